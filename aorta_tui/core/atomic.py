"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import RunDirRefused


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644,
                       durable: bool = True) -> Path:
    """Write ``data`` to ``path`` via a temp file in the same directory, fsync, then rename.

    ``durable=False`` skips the two fsyncs (the file's and its directory's): the rename is still
    atomic for every reader, but a power loss may leave the file empty or absent. Only for a
    file whose loss something else recovers: a trial's ``result.json`` counts once the journal's
    fsynced ``trial_finished`` line names it and the file reads whole (otherwise the resume runs
    the trial again), and a worker's ``workload_result.json`` is read from the page cache by the
    orchestrator the moment the worker exits. Each fsync costs 1-4 ms: three per trial.

    ``path`` is a file the user named (``-o``): its directory is opened once, and the rest is
    :func:`write_at` on that descriptor. A run directory's files go through
    ``core/rundir_fs.RunDirFS``, which reaches the directory without following a link."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:  # name the file the user asked for
        exc.filename = str(target)
        raise
    try:
        write_at(dir_fd, target.name, data, mode=mode, durable=durable, where=str(target))
    finally:
        os.close(dir_fd)
    return target


def write_at(dir_fd: int, name: str, data: bytes, *, mode: int = 0o644, durable: bool = True,
             where: str | None = None) -> None:
    """The atomic write itself, relative to the directory descriptor ``dir_fd``: a new temp file
    (``O_EXCL|O_NOFOLLOW``), its mode set on the descriptor (``fchmod``:
    a temp file renamed away and replaced by a link meanwhile changes nothing outside), then
    ``renameat`` over ``name`` and an fsync of the directory. ``where`` names it in errors.
    A FIFO, device or socket at ``name`` is refused, never replaced (exit 3): a caller that did
    not check its ``-o`` first would otherwise swap a reader's pipe (or, as root, a device
    node) for a regular file."""
    _refuse_special(dir_fd, name, where)
    fd, tmp = _temp_at(dir_fd, name, where)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            if durable:
                os.fsync(fh.fileno())
            mine = os.fstat(fh.fileno())
            try:
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileNotFoundError:
                raise _swapped(where or name, tmp) from None
        _check_placed(dir_fd, name, mine, where or name, tmp)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        if isinstance(exc, OSError):
            exc.filename = where or name  # a failed write() names no file; the temp name is noise
        raise
    if durable:
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)


def _refuse_special(dir_fd: int, name: str, where: str | None) -> None:
    try:
        mode = os.lstat(name, dir_fd=dir_fd).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        from aorta_tui.core.inputs import describe_kind

        raise RunDirRefused(f"{where or name} is {describe_kind(mode)}, not a file to replace",
                            hint="write the document to a regular file's name (it is replaced "
                                 "atomically, never written through)")


def _swapped(where: str, tmp: str) -> RunDirRefused:
    return RunDirRefused(
        f"{where}: its temp file {tmp} was moved or replaced while it was written: refused "
        "(someone who can write the directory is changing it under the tool)",
        hint=f"look at who can write {os.path.dirname(where) or '.'}; run the command again "
             "once nobody else writes there")


def _check_placed(dir_fd: int, name: str, mine: os.stat_result, where: str, tmp: str) -> None:
    """The file now at ``name`` is the one written (a temp name swapped for a link before the
    rename put the link there instead: it is removed, and the write refused)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise _swapped(where, tmp) from None
    if (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino):
        if stat.S_ISLNK(st.st_mode):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dir_fd)
        raise _swapped(where, tmp)


def _temp_at(dir_fd: int, name: str, where: str | None) -> tuple[int, str]:
    """A new, empty, private temp file beside ``name`` (relative to ``dir_fd``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(16):
        tmp = f".{name[:200]}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(tmp, flags, 0o600, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue
        except OSError as exc:  # name the file the user asked for, not a random temp name
            exc.filename = where or name
            raise
    raise FileExistsError(errno.EEXIST, "no free temp file name after 16 tries", where or name)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: object, *, indent: int | None = 2,
                      durable: bool = True) -> Path:
    return atomic_write_bytes(path, json_bytes(obj, indent=indent), durable=durable)


def json_bytes(obj: object, *, indent: int | None = 2) -> bytes:
    """The one JSON encoding of the files the tool writes (UTF-8, a final newline)."""
    text = json.dumps(obj, indent=indent, sort_keys=False, ensure_ascii=False, default=_json_default)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (an undecodable byte of a path or argv): escape it, so the file is
        # still UTF-8 JSON that reads back to the same string.
        return (json.dumps(obj, indent=indent, ensure_ascii=True, default=_json_default) + "\n").encode()


def _json_default(obj: object) -> object:
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
    to write (a ticket bundle). As :func:`write_at`, the mode is set on the descriptor and the
    rename is relative to the directory's descriptor, opened once."""
    target = Path(path)
    dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd, tmp, watcher = _temp_with_watcher(target, dir_fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                yield fh
                fh.flush()
                os.fchmod(fh.fileno(), mode)
                os.fsync(fh.fileno())
            os.replace(tmp, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        finally:
            _release(watcher)
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _temp_with_watcher(target: Path, dir_fd: int) -> tuple[int, str, subprocess.Popen[bytes] | None]:
    """A new temp file beside ``target`` (its name relative to ``dir_fd``), created only once
    its watcher runs: a kill between the two (the temp file made, its watcher not yet) would
    leave the file for good."""
    for _ in range(16):
        tmp = f".{target.name}.{secrets.token_hex(8)}.tmp"
        watcher = _remove_when_gone(str(target.parent / tmp))
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=dir_fd)
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
