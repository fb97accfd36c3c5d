"""The run's lock: an exclusive ``flock`` on ``<run>/.lock`` held by the process that runs
it, the holder's pid in the file, and who holds it (a pid checked live through /proc)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from aorta_tui.core.errors import AortaError, RunDirError, UsageError
from aorta_tui.core.inputs import describe_kind, open_input, parse_json_text
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.store.naming import LOCK


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _process_start(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch), from /proc; ``None`` when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None
    boot = _boot_time()
    return None if boot is None else boot + ticks / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class LockHolder:
    """The one line the holder writes into ``.lock`` after it takes the lock: its pid, its host
    and when it took the lock. ``pid`` None: a lock known to be held by a process that cannot be
    named (the file does not name a live one). The file is in an untrusted run directory: a line
    that is not such a record reads as that unnamed holder, never as a guessed pid."""

    pid: int | None = None
    host: str | None = None
    started_at: float | None = None

    @classmethod
    def mine(cls) -> LockHolder:
        return cls(os.getpid(), socket.gethostname(), time.time())

    def to_line(self) -> bytes:
        """The bytes ``json.dumps({"pid", "host", "started_at"}) + "\\n"`` wrote, key order kept."""
        return (json.dumps({"pid": self.pid, "host": self.host,
                            "started_at": self.started_at}) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes | str) -> LockHolder:
        """The record of one line; an unreadable line, a field of the wrong type or a pid that
        is no process id (0, negative, a bool) is the unnamed holder (``LockHolder()``)."""
        try:  # bounded nesting: a line of 4,096 "[" raised RecursionError through json.loads
            info = parse_json_text(line.decode() if isinstance(line, bytes) else line or "{}",
                                   where=LOCK, what="lock file")
        except (UsageError, UnicodeDecodeError):
            return cls()
        if not isinstance(info, dict):
            return cls()
        pid, host, at = info.get("pid"), info.get("host"), info.get("started_at")
        if not (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0) \
                or not (host is None or isinstance(host, str)) \
                or not (at is None or isinstance(at, (int, float)) and not isinstance(at, bool)):
            return cls()
        return cls(pid, host, None if at is None else float(at))


def _holder_is_live(info: LockHolder) -> bool:
    """True when the lock file's pid is a running process that could be the one that wrote it.

    The file is rewritten by each new holder just *after* it takes the lock, so for a moment it
    still names the previous (dead) holder; and a dead holder's pid may have been reused.
    """
    pid = info.pid
    if pid is None:
        return False
    if info.host not in (None, socket.gethostname()):
        return True  # another machine's process (a shared filesystem): it cannot be checked
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by someone else
    started_proc = _process_start(pid)
    if started_proc is not None and info.started_at is not None:
        return started_proc <= info.started_at + 2.0  # a later process reused the pid
    return True


def _read_holder(fh: IO[bytes]) -> LockHolder:
    fh.seek(0)
    return LockHolder.from_line(fh.readline(4096))


def _live_holder(fh: IO[bytes], wait_s: float = 1.0) -> LockHolder:
    """The holder's record once it names a live process; the unnamed holder when it never does
    in ``wait_s`` (the holder is known to exist, it just cannot be named)."""
    deadline = time.monotonic() + wait_s
    while True:
        info = _read_holder(fh)
        if _holder_is_live(info):
            return info
        if time.monotonic() >= deadline:
            return LockHolder()
        time.sleep(0.02)


def describe_holder(info: LockHolder) -> str:
    if info.pid is None:
        return "another process (its pid is not known: the lock file does not name a live process)"
    host = f" on {info.host}" if info.host else ""
    return f"pid {info.pid}{host}"


def _sweep_refusal(run_dir: Path, holder: str) -> AortaError:
    return RunDirError(
        f"{run_dir} is in use by {holder}",
        hint=f"wait for that run to finish, follow it with `aorta-tui attach {run_dir}`, "
        "or cancel it first",
    )


class RunLock:
    """An exclusive ``flock`` on ``<run>/.lock``. The kernel drops it when the holder dies."""

    # ``lock_holder`` probes with a shared lock for an instant; a few quick retries keep such a
    # probe from refusing a real orchestrator.
    ATTEMPTS = 5

    def __init__(self, run_dir: Path, *,
                 refusal: Callable[[Path, str], AortaError] | None = None) -> None:
        self.path = run_dir / LOCK
        self._fh: IO[bytes] | None = None
        # (run dir, the holder in words) -> the error when the lock is held; an engine whose
        # run is not a sweep says so in its own words (the default names `attach`).
        self._refusal = refusal or _sweep_refusal

    def acquire(self, fs: RunDirFS | None = None) -> None:
        """Take the lock; ``fs``, the run's file layer, opens ``.lock`` relative to the run's
        descriptor (a store holds one; a one-off journal line has none)."""
        fh = open_lock_file(self.path, create=True, fs=fs)  # held for the run's lifetime
        assert fh is not None
        for attempt in range(self.ATTEMPTS):
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    fh.close()
                    raise
                if attempt + 1 < self.ATTEMPTS:
                    time.sleep(0.01 * (attempt + 1))
        else:
            holder = describe_holder(_live_holder(fh))
            fh.close()
            raise self._refusal(self.path.parent, holder)
        line = LockHolder.mine().to_line()
        # One write at offset 0, then cut what is left of the previous holder's line: a reader
        # sees the old line or the new one, never an empty file.
        os.pwrite(fh.fileno(), line, 0)
        os.ftruncate(fh.fileno(), len(line))
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def open_lock_file(path: Path, *, create: bool = False, fs: RunDirFS | None = None) -> IO[bytes] | None:
    """``.lock`` through the one checked open: a regular file (never a symlink, a FIFO or a
    directory), for update; ``None`` when it is missing and not ``create``. With the run's
    file layer it is opened relative to the run's descriptor, never by path."""
    if fs is not None:
        return _open_lock_at(fs, path, create=create)
    try:
        return open_input(path, what="lock file", writable=True, create=create,
                          follow_symlinks=False, missing_ok=not create)
    except UsageError as exc:
        raise RunDirError(exc.message, hint=f"aorta-tui makes {LOCK} itself: move this one away "
                          f"(`mv {path} {path}.bad`), then run the command again") from None


def _open_lock_at(fs: RunDirFS, path: Path, *, create: bool) -> IO[bytes] | None:
    """``.lock`` opened beneath ``fs``' root: no link followed, a FIFO or a device refused by
    ``fstat`` on the descriptor (opened without waiting), exit 3 naming what it is."""
    hint = f"aorta-tui makes {LOCK} itself: move this one away (`mv {path} {path}.bad`), then run the command again"
    st = fs.lstat(LOCK)
    if st is not None and stat.S_ISDIR(st.st_mode):  # damage, not a link: the located exit 2
        raise RunDirError(f"{path} is a directory, not a lock file", hint=hint)
    try:
        fd = fs.open_at(LOCK, os.O_RDWR | (os.O_CREAT if create else 0))
    except FileNotFoundError:
        if create:
            raise
        return None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # a FIFO or a device (a link was refused by open_at, exit 3)
            raise RunDirError(f"{path} is {describe_kind(mode)}, not a lock file", hint=hint)
        os.set_blocking(fd, True)  # a regular file never blocks; the flag only guarded the open
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "r+b")


def lock_holder(run_dir: Path) -> LockHolder | None:
    """The orchestrator holding the run's lock, or ``None`` when nobody runs it.

    A held lock whose file does not (yet) name a live process gives ``LockHolder()`` (pid None):
    someone runs it, and its pid is not known. A dead pid is never returned. A lock that cannot be opened (missing,
    damaged: not a regular file, another user's) is nobody's.
    """
    path = Path(run_dir) / LOCK
    try:
        fh = open_input(path, what="lock file", follow_symlinks=False, missing_ok=True)
    except AortaError:
        return None
    if fh is None:
        return None
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _live_holder(fh, wait_s=0.2)
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return None
