"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from aorta_tui.core import ownership, spawn_gate


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644,
                       durable: bool = True) -> Path:
    """Write ``data`` to ``path`` via a temp file in the same directory, fsync, then rename.

    ``durable=False`` skips the two fsyncs (the file's and its directory's): the rename is still
    atomic for every reader, but a power loss may leave the file empty or absent. Only for a
    file whose loss something else recovers: a trial's ``result.json`` counts once the journal's
    fsynced ``trial_finished`` line names it and the file reads whole (otherwise the resume runs
    the trial again), and a worker's ``workload_result.json`` is read from the page cache by the
    orchestrator the moment the worker exits. Each fsync costs 1-4 ms: three per trial."""
    target = Path(path)
    ownership.make_dirs(target.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:  # name the file the user asked for, not a random temp name
        exc.filename = str(target)
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if not target.exists():  # a new file is the sudo user's; a replaced one keeps its owner
            ownership.adopt(tmp)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(target)  # a failed write() names no file: say which one it was
        raise
    if durable:
        fsync_dir(target.parent)
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 2,
                      durable: bool = True) -> Path:
    text = json.dumps(obj, indent=indent, sort_keys=False, ensure_ascii=False, default=_json_default)
    try:
        data = (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (an undecodable byte of a path or argv): escape it, so the file is
        # still UTF-8 JSON that reads back to the same string.
        data = (json.dumps(obj, indent=indent, ensure_ascii=True, default=_json_default) + "\n").encode()
    return atomic_write_bytes(path, data, durable=durable)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def fsync_dir(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open_binary(path: str | os.PathLike[str], *, mode: int = 0o644) -> Iterator[IO[bytes]]:
    """A binary file to stream into that appears at ``path`` only when the block ends cleanly
    (temp file in the same directory, fsync, rename); on any exception nothing is left behind,
    nor when the process is killed (SIGKILL included): a watcher in its own session removes
    the temp file once this process is gone. For output too large to build in memory and slow
    to write (a ticket bundle)."""
    target = Path(path)
    fd, tmp, watcher = _temp_with_watcher(target)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if not target.exists():
            ownership.adopt(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    finally:
        _release(watcher)
    fsync_dir(target.parent)


def _temp_with_watcher(target: Path) -> tuple[int, str, subprocess.Popen[bytes] | None]:
    """A new temp file beside ``target``, created only once its watcher runs: a kill between
    the two (the temp file made, its watcher not yet) would leave the file for good."""
    for _ in range(16):
        tmp = str(target.parent / f".{target.name}.{secrets.token_hex(8)}.tmp")
        watcher = _remove_when_gone(tmp)
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            _abandon(watcher)  # someone else's file of that name: its watcher must not remove it
            continue
        except BaseException:
            _release(watcher)
            raise
        return fd, tmp, watcher
    raise FileExistsError(errno.EEXIST, "no free temp file name after 16 tries", str(target.parent))


def _abandon(watcher: subprocess.Popen[bytes] | None) -> None:
    """End a watcher without letting it remove anything (it removes only on end of input)."""
    if watcher is not None:
        with contextlib.suppress(OSError):
            watcher.kill()
        watcher.wait()
        with contextlib.suppress(OSError):
            assert watcher.stdin is not None
            watcher.stdin.close()


def _remove_when_gone(tmp: str) -> subprocess.Popen[bytes] | None:
    """A ``sh`` that waits for the end of a pipe only this process holds, then removes
    ``tmp``: the pipe ends when this process ends, however it ends. In its own session, so the
    signal that kills this process's group does not kill it first. (O_TMPFILE would need no
    helper, but linking it into place fails where /proc/self/fd links are refused.)"""
    try:
        return spawn_gate.popen(["sh", "-c", 'read -r _ ; rm -f -- "$1"', "sh", tmp],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                close_fds=True)
    except OSError:
        return None  # no sh: an exception still removes the temp file


def _release(watcher: subprocess.Popen[bytes] | None) -> None:
    if watcher is None:
        return
    with contextlib.suppress(OSError):
        assert watcher.stdin is not None
        watcher.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        watcher.wait(timeout=5)
