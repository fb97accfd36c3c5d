"""The run directory: the source of truth of a run.

Layout of ``<output>/<ticket>/<run-id>/``::

    run.json              what was run (recipe hash, command, aorta-tui version), atomic
    recipe.resolved.yaml  the recipe with every default filled; re-running it gives the same plan
    plan.json             cells and trials in run order
    journal.jsonl         every event, one JSON object per line, appended and flushed
    .lock                 held (flock) by the orchestrator while it runs; holds its pid
    trials/<cell>/trial-<NNN>/{stdout.log, stderr.log, result.json}
    env/host_env.json, env/<environment>.json
    matrix.json, matrix.md

Killing the orchestrator at any point loses no completed trial: a trial counts as done only
when its ``trial_finished`` line is in the journal and its ``result.json`` is on disk, and both
are written before the next trial starts. A run directory appears under its name only once
``run.json`` is in it (it is built as ``.<run-id>.creating`` and renamed), so a kill while it
is being created leaves no half-made run to resume.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import stat
import time
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from aorta_tui import __version__
from aorta_tui.core.atomic import fsync_dir
from aorta_tui.core.errors import AortaError, EnvironmentProblem, RunDirError, UsageError
from aorta_tui.core.events import (
    EVENT_TYPES,
    Event,
    RunFinished,
    RunStarted,
    TrialFinished,
    TrialStarted,
)
from aorta_tui.core.inputs import describe_kind, open_input, permission_problem
from aorta_tui.core.rundir_fs import RunDirFS, rundir_refused

JOURNAL = "journal.jsonl"
LOCK = ".lock"
RUN_META = "run.json"
CREATING_SUFFIX = ".creating"
# No line the engine writes comes near this; a longer one is damage, and reading it whole
# would cost its size in memory.
MAX_JOURNAL_LINE = 16 << 20
# A trial id is ``<cell>/trial-<NNN>`` and becomes a path under trials/: nothing else is trusted.
_TRIAL_ID = re.compile(r"^[^/\x00]+/trial-\d+$")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def safe_component(text: str) -> str:
    """Turn a ticket into a directory name (tickets are free text in recipes)."""
    out = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in text.strip())
    return out.strip(".") or "untitled"


def is_trial_id(value: object) -> bool:
    return isinstance(value, str) and bool(_TRIAL_ID.match(value)) and ".." not in value.split("/")


# -- writing failures ----------------------------------------------------------------------

_FULL = {errno.ENOSPC, errno.EDQUOT}
_DEVICE = {errno.EIO, errno.EROFS}


def describe_free_space(path: Path) -> str:
    """``"12.0 KiB free"`` on the filesystem holding ``path`` (or its nearest existing parent)."""
    from aorta_tui.core.inputs import describe_size

    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return "free space unknown"
    free = f"{describe_size(st.f_bavail * st.f_frsize)} free"
    # Out of inodes, a filesystem refuses a new file with ENOSPC while bytes are left: saying
    # only "50.0 MiB free" would send the user looking for a disk that is not full.
    if st.f_files > 0 and st.f_favail == 0:
        return f"no inodes left (all {st.f_files} in use), {free}"
    return free


def write_failure(exc: OSError, run_dir: Path | None, *, resumable: bool = True,
                  resume_command: str | None = None) -> AortaError | None:
    """The user-facing error for a failed write the machine caused (full disk, quota, I/O error,
    read-only filesystem), or ``None`` when ``exc`` is not one of those (a bug, then).

    ``resume_command`` is how this run is finished (default: the sweep's ``--resume``)."""
    denied = exc.filename or run_dir
    if isinstance(exc, PermissionError) and denied is not None:
        return permission_problem(denied, fix_dir=run_dir)
    if exc.errno not in _FULL | _DEVICE:
        return None
    where = Path(exc.filename) if exc.filename else run_dir
    what = f"could not write {where}" if where else "could not write the run directory"
    if exc.errno in _FULL:
        free = describe_free_space(where or Path("."))
        why = f"{exc.strerror or 'no space left'} ({free} there)"
        fix = ("delete files on that filesystem (its inodes, the number of files it can hold, "
               "are used up)" if "no inodes left" in free
               else "free some space on that filesystem (or raise the quota)")
    else:
        why = exc.strerror or str(exc)
        fix = "check the disk (dmesg) or write elsewhere with --output DIR"
    resume_command = resume_command or f"aorta-tui sweep run --resume {run_dir}"
    then = (f", then finish the run with `{resume_command}` (finished trials "
            "are kept)") if resumable and run_dir is not None else ", then run it again"
    return EnvironmentProblem(f"{what}: {why}", hint=fix + then)


def output_write_error(exc: OSError, path: str | os.PathLike[str], *, option: str = "-o") -> AortaError:
    """The error for a file or directory the user named (``-o``, ``--run-dir``) that could not
    be written: the machine's problem (full disk or inodes, quota, I/O error, read-only, another
    user's directory) is exit 3 naming the file and the free space; anything else exit 2."""
    if exc.filename is None:
        exc.filename = os.fspath(path)
    return write_failure(exc, None, resumable=False) or UsageError(
        f"cannot write {exc.filename}: {exc.strerror or exc}",
        hint=f"choose a writable path with {option}")


# -- the lock ------------------------------------------------------------------------------

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


def _holder_is_live(info: dict[str, Any]) -> bool:
    """True when the lock file's pid is a running process that could be the one that wrote it.

    The file is rewritten by each new holder just *after* it takes the lock, so for a moment it
    still names the previous (dead) holder; and a dead holder's pid may have been reused.
    """
    pid = info.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if info.get("host") not in (None, socket.gethostname()):
        return True  # another machine's process (a shared filesystem): it cannot be checked
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by someone else
    started_proc = _process_start(pid)
    started_lock = info.get("started_at")
    if started_proc is not None and isinstance(started_lock, (int, float)):
        return started_proc <= float(started_lock) + 2.0  # a later process reused the pid
    return True


def _read_holder(fh: IO[bytes]) -> dict[str, Any]:
    fh.seek(0)
    try:
        info = json.loads(fh.readline(4096) or "{}")
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def _live_holder(fh: IO[bytes], wait_s: float = 1.0) -> dict[str, Any]:
    """The holder's record once it names a live process; ``{}`` when it never does in ``wait_s``
    (the holder is known to exist, it just cannot be named)."""
    deadline = time.monotonic() + wait_s
    while True:
        info = _read_holder(fh)
        if _holder_is_live(info):
            return info
        if time.monotonic() >= deadline:
            return {}
        time.sleep(0.02)


def describe_holder(info: dict[str, Any]) -> str:
    if not info.get("pid"):
        return "another process (its pid is not known: the lock file does not name a live process)"
    host = f" on {info['host']}" if info.get("host") else ""
    return f"pid {info['pid']}{host}"


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
        line = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "started_at": time.time()}) + "\n"
        # One write at offset 0, then cut what is left of the previous holder's line: a reader
        # sees the old line or the new one, never an empty file.
        os.pwrite(fh.fileno(), line.encode(), 0)
        os.ftruncate(fh.fileno(), len(line.encode()))
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


def lock_holder(run_dir: Path) -> dict[str, Any] | None:
    """The orchestrator holding the run's lock, or ``None`` when nobody runs it.

    A held lock whose file does not (yet) name a live process gives ``{}``: someone runs it, and
    its pid is not known. A dead pid is never returned. A lock that cannot be opened (missing,
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


# -- the journal ---------------------------------------------------------------------------

class Journal:
    """Append-only ``journal.jsonl``. Each line reaches the OS (one ``write``) before ``append``
    returns; a line that says a trial finished is also fsynced: a resume trusts those lines.

    A failed write (a full disk) is raised and remembered in ``error``: the event bus keeps a
    failing sink from stopping a run, and the sweep must stop when its journal cannot be written.
    """

    DURABLE: tuple[type[Event], ...] = (TrialFinished, RunFinished, RunStarted)

    def __init__(self, path: Path, *, dir_fd: int | None = None) -> None:
        self.path = path
        self.error: OSError | None = None
        # O_NOFOLLOW | O_NONBLOCK and the fstat: a journal that is a symlink or a FIFO is refused
        # at once (a FIFO's open for writing would wait for a reader forever). ``dir_fd``: the
        # run's root held by its file layer (RunStore), so the journal is the one in that run.
        try:
            self._fd = os.open(path.name if dir_fd is not None else path,
                               os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                               | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                check_journal_file(path)  # raises the located refusal
            raise
        if not stat.S_ISREG(os.fstat(self._fd).st_mode):
            os.close(self._fd)
            self._fd = -1
            check_journal_file(path)
        os.set_blocking(self._fd, True)
        # A writer killed mid-line (or a failed write) left a fragment: end it, or the next event
        # would be glued onto it and lost to every reader.
        self._torn = self._ends_torn()

    def _ends_torn(self) -> bool:
        try:
            fh = open_journal_file(self.path)
            if fh is None:
                return False
            with fh:
                fh.seek(0, os.SEEK_END)
                if fh.tell() == 0:
                    return False
                fh.seek(-1, os.SEEK_END)
                return fh.read(1) != b"\n"
        except OSError:
            return False

    def append(self, event: Event) -> None:
        data = encode_journal_line(event.to_dict())
        if self._torn:
            data = b"\n" + data
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                self._torn = True  # until the whole line is out
                view = view[n:]
            self._torn = False
            if isinstance(event, self.DURABLE):
                os.fsync(self._fd)
        except OSError as exc:
            if exc.filename is None:
                exc.filename = str(self.path)
            self.error = self.error or exc
            raise

    # An EventSink, so the bus can feed it first.
    emit = append

    def check(self) -> None:
        """Raise the first write failure, if any (the bus swallowed it)."""
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)
            self._fd = -1


def _journal_refusal(message: str, path: Path) -> RunDirError:
    return RunDirError(message, hint=f"aorta-tui writes {JOURNAL} itself, as a regular file: this "
                       f"run directory is damaged; move {path} away to see the rest of the run "
                       "with `aorta-tui bundle`, or start a new run")


def open_journal_file(path: Path) -> IO[bytes] | None:
    """A run's journal for reading, through the one checked open (``None`` when missing): a
    FIFO, a device such as ``/dev/zero``, a symlink or a directory is a located exit 2 at once,
    never a hang or an endless read."""
    try:
        return open_input(path, what="journal", follow_symlinks=False, missing_ok=True)
    except UsageError as exc:
        raise _journal_refusal(exc.message, path) from None


def check_journal_file(path: Path) -> None:
    """Raise the journal's refusal when it exists and is not a regular file (see above)."""
    fh = open_journal_file(path)
    if fh is not None:
        fh.close()


def encode_journal_line(obj: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(obj, ensure_ascii=False, default=str)
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (an undecodable byte from argv or a path): escape it, so the line is
        # still UTF-8 JSON that reads back to the same string.
        return (json.dumps(obj, ensure_ascii=True, default=str) + "\n").encode("ascii")


@dataclass(frozen=True)
class Damage:
    """A journal line that is not an event: where it is and what is wrong with it."""

    line: int
    reason: str

    def describe(self, path: Path | str = JOURNAL) -> str:
        return f"{path}:{self.line}: {self.reason}; skipped"


@dataclass
class JournalScan:
    events: list[Event] = field(default_factory=list)
    damaged: list[Damage] = field(default_factory=list)
    torn_tail: bool = False  # the last line has no newline: a writer was killed mid-line


_HINTS: dict[type[Event], dict[str, Any]] = {}


def _hints(cls: type[Event]) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a decoded JSON value fits an event field's annotation (the shapes events use)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_conforms(v, item) for v in value)
    if origin is dict:
        _, item = typing.get_args(hint) or (str, Any)
        return isinstance(value, dict) and all(_conforms(v, item) for v in value.values())
    return True  # an annotation this checker does not know: accept, as before


def _json_kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _hint_text(hint: Any) -> str:
    """An event field's annotation in JSON's words: ``int | None`` -> "an integer or null"."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_hint_text(h) for h in typing.get_args(hint))
    origin = typing.get_origin(hint) or hint
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false",
            list: "an array", dict: "an object", type(None): "null"}.get(origin, str(hint))


def parse_journal_line(raw: bytes, *, sweep_ids: bool = True) -> tuple[Event | None, str | None]:
    """One journal line -> ``(event, None)``, or ``(None, why it is not an event)``. Never raises.

    ``sweep_ids=False`` accepts any trial id (an event stream of another engine: a policy
    sweep names its trials ``001-baseline-t1``)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"not JSON ({exc})"[:200]
    except RecursionError:
        return None, "JSON nested too deeply"
    if not isinstance(data, dict):
        return None, f"not an event (a JSON line holding {_json_kind(data)}, not an object)"
    kind = data.get("event")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        shown = kind if isinstance(kind, str) and len(kind) <= 40 else _json_kind(kind)
        return None, f"unknown event type {shown!r}" if isinstance(kind, str) else "no \"event\" name"
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if not _conforms(value, hints.get(f.name, Any)):
            return None, f"{kind} field {f.name!r} is {_json_kind(value)}, not {_hint_text(hints[f.name])}"
        kwargs[f.name] = value
    missing = [f.name for f in fields(cls) if f.name not in kwargs
               and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        return None, f"{kind} lacks {', '.join(repr(m) for m in missing)}"
    if sweep_ids and kind in ("trial_launch", "trial_started", "trial_finished") and not is_trial_id(kwargs.get("trial_id")):
        return None, f"{kind} with an invalid trial_id {str(kwargs.get('trial_id'))[:60]!r}"
    try:
        return cls(**kwargs), None
    except TypeError as exc:  # a required field is missing
        return None, f"{kind} is incomplete ({exc})"[:200]


def _raw_lines(fh: IO[bytes], limit: int = MAX_JOURNAL_LINE) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(line number, bytes or None when longer than limit, ended by a newline)``, reading in
    chunks so that a huge line costs no more memory than ``limit``."""
    lineno = 0
    buf = b""
    over = False
    while True:
        chunk = fh.read(1 << 20)
        if not chunk:
            break
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            lineno += 1
            yield lineno, None if over or nl > limit else buf[:nl], True
            buf = buf[nl + 1:]
            over = False
        if len(buf) > limit:
            over, buf = True, b""
    if buf or over:
        yield lineno + 1, None if over else buf, False


def scan_journal(path: Path, *, sweep_ids: bool = True) -> JournalScan:
    """Every event of a journal, and every line that is not one (counted and located).

    ``sweep_ids=False``: trial ids of another engine's run (see ``parse_journal_line``)."""
    scan = JournalScan()
    fh = open_journal_file(path)
    if fh is None:
        return scan
    with fh:
        for lineno, raw, ended in _raw_lines(fh):
            if not ended:
                scan.torn_tail = True  # the writer was killed mid-line: not damage
                break
            if raw is None:
                scan.damaged.append(Damage(lineno, f"longer than {MAX_JOURNAL_LINE >> 20} MiB"))
                continue
            if not raw.strip():
                continue
            event, why = parse_journal_line(raw, sweep_ids=sweep_ids)
            if event is not None:
                scan.events.append(event)
            else:
                scan.damaged.append(Damage(lineno, why or "damaged"))
    return scan


def iter_journal(path: Path) -> Iterator[Event]:
    """Events of a journal. A torn last line and damaged lines are skipped (see ``scan_journal``)."""
    yield from scan_journal(path).events


def read_journal(run_dir: str | Path) -> list[Event]:
    return list(iter_journal(Path(run_dir) / JOURNAL))


# -- listing runs --------------------------------------------------------------------------

@dataclass(frozen=True)
class RunInfo:
    path: Path
    ticket: str
    run_id: str
    state: str  # running, finished, interrupted
    total: int
    done: int
    started_at: float | None
    status: str | None  # the run_finished status, when there is one
    failed: int = 0  # finished trials with verdict fail / error (a "finished" run can be all failures)
    errored: int = 0


def run_info(run_dir: str | Path) -> RunInfo:
    run_dir = Path(run_dir)
    total = done = 0
    verdicts = {b"fail": 0, b"error": 0}
    started: float | None = None
    status: str | None = None
    # Listing runs (the TUI's home screen does it every few seconds) must not parse every
    # trial's line: the writer puts "event" first, so a prefix says what a line is.
    try:
        fh = open_journal_file(run_dir / JOURNAL)
    except AortaError:
        fh = None  # listed as a run without events: `attach` and `--resume` say what is wrong
    if fh is not None:
        with fh:
            for _lineno, line, ended in _raw_lines(fh):
                if not ended:
                    break  # a torn last line
                if line is None:
                    continue  # a damaged (huge) line
                if line.startswith(b'{"event": "trial_finished"'):
                    # a whole line: not a fragment ended by a later writer, nor glued to one
                    whole = line.rstrip().endswith(b"}") and line.count(b'{"event": ') == 1
                    done += whole
                    # the first "verdict" is the event's own: trial_id and cell come before it
                    # and cannot hold quotes; reason and detectors (free text) come after
                    at = line.find(b'"verdict": "')
                    verdict = line[at + 12:line.find(b'"', at + 12)] if whole and at > 0 else b""
                    if verdict in verdicts:
                        verdicts[verdict] += 1
                elif line.startswith(b'{"event": "run_'):
                    ev, _ = parse_journal_line(line)
                    if ev is None:
                        continue
                    if isinstance(ev, RunStarted):
                        total = max(int(ev.total), 0)
                        started = started or ev.ts
                        status = None
                    elif isinstance(ev, RunFinished):
                        status = ev.status
    if lock_holder(run_dir) is not None:
        state = "running"
    elif status == "completed":
        state = "finished"
    else:
        state = "interrupted"
    return RunInfo(run_dir, run_dir.parent.name, run_dir.name, state, total, min(done, total or done),
                   started, status, verdicts[b"fail"], verdicts[b"error"])


def list_runs(output_dir: str | Path) -> list[RunInfo]:
    """Every run under ``output_dir`` (``<ticket>/<run-id>/journal.jsonl``), newest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    runs = [run_info(j.parent) for j in root.glob(f"*/*/{JOURNAL}")
            if not j.parent.name.endswith(CREATING_SUFFIX)]
    runs.sort(key=lambda r: r.started_at or 0.0, reverse=True)
    return runs


# -- resume bookkeeping --------------------------------------------------------------------

@dataclass
class ResumeState:
    completed: dict[str, dict[str, Any]]  # trial_id -> its trial_finished event dict
    interrupted: set[str]  # started, never finished: re-run
    damaged: list[Damage] = field(default_factory=list)  # journal lines that are not events


def read_trial_result(run_dir: Path | RunDirFS, trial_id: str) -> dict[str, Any] | None:
    """``trials/<trial_id>/result.json`` when it is a whole result of that trial, else ``None``.

    Only the trial's own directory is read, through the run's file layer (no link followed):
    a retired attempt (``trial-NNN.interrupted-K``) is evidence, never a result.
    """
    if not is_trial_id(trial_id):
        return None
    rel = f"trials/{trial_id}/result.json"
    if isinstance(run_dir, RunDirFS):
        d = run_dir.read_json_or_none(rel)
    else:
        try:
            with RunDirFS(run_dir) as fs:
                d = fs.read_json_or_none(rel)
        except OSError:
            return None
    if not isinstance(d, dict) or d.get("trial_id", trial_id) != trial_id:
        return None  # not this trial's result (a copied directory), or not a result at all
    if not isinstance(d.get("verdict"), str):
        return None
    cell, _, number = trial_id.partition("/")
    if not isinstance(d.get("cell"), str):
        d["cell"] = cell
    if not isinstance(d.get("trial"), int) or isinstance(d.get("trial"), bool):
        d["trial"] = int(number.removeprefix("trial-"))
    d["trial_id"] = trial_id
    return d


def resume_state(run_dir: Path, trial_ids: set[str] | None = None, *,
                 read_result: Callable[[str], dict[str, Any] | None] | None = None,
                 sweep_ids: bool = True) -> ResumeState:
    """What the journal says was done, checked against the result files.

    ``trial_ids`` is the plan's set: a journal line about any other trial is not trusted.
    ``read_result`` reads one trial's whole result (default: a sweep's ``result.json``,
    ``read_trial_result``); ``sweep_ids=False`` for another engine's trial ids (a policy sweep's).
    """
    if read_result is None:
        def read_result(tid: str) -> dict[str, Any] | None:
            return read_trial_result(run_dir, tid)
    completed: dict[str, dict[str, Any]] = {}
    started: set[str] = set()
    scan = scan_journal(run_dir / JOURNAL, sweep_ids=sweep_ids)
    for ev in scan.events:
        tid = getattr(ev, "trial_id", None)
        if tid is None or (trial_ids is not None and tid not in trial_ids):
            continue
        if isinstance(ev, TrialStarted):
            started.add(tid)
        elif (isinstance(ev, TrialFinished) and tid not in completed
              and read_result(tid) is not None):
            # A finished line without its whole result file is not trusted (the result is
            # written first).
            completed[tid] = ev.to_dict()
    return ResumeState(completed=completed, interrupted=started - set(completed), damaged=scan.damaged)


# -- creating and opening a run ------------------------------------------------------------

def _output_error(output: Path, exc: OSError) -> AortaError:
    return write_failure(exc, None, resumable=False) or UsageError(
        f"cannot create the run directory under {output}: {exc.strerror or exc}",
        hint="pass a writable --output DIR",
    )


def create_run_dir(output: Path, ticket: str, populate: Callable[[Path], None]) -> Path:
    """Create ``<output>/<ticket>/<run-id>`` holding what ``populate`` writes, all or nothing.

    The directory is filled as ``.<run-id>.creating`` and renamed once ``populate`` is done, so
    a run directory without its ``run.json`` never exists under a run's name.
    """
    parent = output / safe_component(ticket)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        run_id = new_run_id()
        staging = parent / f".{run_id}{CREATING_SUFFIX}"
        staging.mkdir()
    except OSError as exc:
        raise _output_error(output, exc) from None
    if not os.access(staging, os.W_OK):
        raise UsageError(f"{staging} is not writable", hint="pass a writable --output DIR")
    try:
        populate(staging)
        (staging / JOURNAL).touch()  # listed (and resumable) from the moment it has its name
        final = parent / run_id
        os.rename(staging, final)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)  # a failed creation leaves nothing (a kill: the hidden dir)
        if isinstance(exc, OSError):
            raise _output_error(output, exc) from None
        raise
    fsync_dir(parent)
    return final


def check_outputs(run_dir: Path, *, files: tuple[str, ...] = (),
                  dirs: tuple[str, ...] = ()) -> None:
    """Refuse, before anything is changed, a run directory where one of the ``files`` an engine
    replaces atomically is a directory (or a FIFO, a socket, a device), or where one of the
    ``dirs`` it writes into is not a directory: a located exit 2 with the ``mv`` that clears it,
    never an exit 70 once the trials have run again."""
    for name in (*files, *dirs):
        path = run_dir / name
        try:
            st = path.lstat()
        except OSError:
            continue  # absent: written when its time comes
        want_dir = name in dirs
        if want_dir and stat.S_ISDIR(st.st_mode):
            continue
        if not want_dir and (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            continue  # a link is replaced, never followed, by the atomic rename
        if want_dir and stat.S_ISLNK(st.st_mode):
            # a link where the tool writes into a directory is what an attack plants, not damage:
            # the same refusal (exit 3) the file layer gives when it meets one later
            raise rundir_refused(str(path), "a symlink")
        what = ("a directory" if stat.S_ISDIR(st.st_mode) else "a symlink" if stat.S_ISLNK(st.st_mode)
                else "a file" if stat.S_ISREG(st.st_mode) else "a special file")
        raise RunDirError(
            f"{path} is {what}, not a {'directory' if want_dir else 'file'}: aorta-tui writes its "
            f"{name}{'/' if want_dir else ''} there",
            hint=f"move it away (`mv {path} {path}.bad`) and run the command again")


def staged_run_id(staging: Path) -> str:
    """The run id of a directory ``create_run_dir`` is filling (``.<run-id>.creating``)."""
    name = staging.name
    if name.startswith(".") and name.endswith(CREATING_SUFFIX):
        return name[1:-len(CREATING_SUFFIX)]
    return name


def discard_new_run(run_dir: Path) -> bool:
    """Remove a run directory this process created moments ago and in which no trial ran (the
    executor refused the run before its first trial: docs/slurm.md), and its ticket directory
    when that is left empty. Renamed to a hidden ``.creating`` name first, which no listing
    shows, so a kill half-way leaves what a killed creation leaves, never half a run."""
    grave = run_dir.with_name(f".{run_dir.name}.discarded{CREATING_SUFFIX}")
    try:
        os.rename(run_dir, grave)
    except OSError:
        return False
    shutil.rmtree(grave, ignore_errors=True)
    with contextlib.suppress(OSError):
        run_dir.parent.rmdir()  # only when empty: other runs of the ticket stay
    return True


def prepare_output(output: Path, ticket: str) -> Path:
    """Create an empty ``<output>/<ticket>/<run-id>`` or explain why it cannot be created."""
    return create_run_dir(output, ticket, lambda _d: None)


def write_run_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    with RunDirFS(run_dir) as fs:
        fs.atomic_write_json(RUN_META, {"aorta_tui_version": __version__, **meta})


def read_run_meta(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_META
    # A directory still being created (or left so by a kill) is never a run, even with its
    # run.json written: it has not got its name, so nothing lists it or follows it.
    if run_dir.name.endswith(CREATING_SUFFIX) or (
            not path.exists() and ((run_dir / "recipe.resolved.yaml").exists()
                                   or (run_dir / "plan.json").exists())):
        raise RunDirError(
            f"{run_dir} was never fully created (aorta-tui was stopped while writing it; it has no "
            f"{RUN_META}), so no trial ran in it",
            hint="start the sweep again as a new run (the same recipe and command); this directory "
            "can be deleted",
        )
    if not run_dir.is_dir():  # a file or nothing: no run (exit 2), as a missing run.json says
        raise RunDirError(
            f"{run_dir} is not an aorta-tui run directory (no {RUN_META})",
            hint="pass the directory that holds journal.jsonl, e.g. aorta-out/TICKET/20261129-101500-ab12")
    try:
        from aorta_tui.core.inputs import MiB, require_object

        with RunDirFS(run_dir) as fs:  # run.json through the file layer: never a link's target
            meta = fs.load_json(RUN_META, what="run.json", limit=4 * MiB)
        return require_object(meta, where=str(path), what="run.json written by aorta-tui")
    except FileNotFoundError:
        raise RunDirError(
            f"{run_dir} is not an aorta-tui run directory (no {RUN_META})",
            hint="pass the directory that holds journal.jsonl, e.g. aorta-out/TICKET/20261129-101500-ab12",
        ) from None
    except UsageError as exc:
        if not path.exists():
            raise RunDirError(
                f"{run_dir} is not an aorta-tui run directory (no {RUN_META})",
                hint="pass the directory that holds journal.jsonl, e.g. aorta-out/TICKET/20261129-101500-ab12",
            ) from None
        raise RunDirError(f"{exc.message}", hint="the run directory is damaged; start a new run") from None


def record_warning(run_dir: Path, message: str, *, code: str) -> None:
    """Append one ``warning`` line to the run's journal under its lock (taken and released
    here): what a command decided about the run before its engine starts, e.g. root's
    ``--i-trust-this-directory`` (``core/run_trust.py``). Refused like a resume while another
    process holds the lock. A directory without a journal is no run: nothing is made in it
    (the command itself then says what it is)."""
    from aorta_tui.core.events import RunWarning

    if not (run_dir / JOURNAL).is_file():
        return
    lock = RunLock(run_dir)
    lock.acquire()
    try:
        journal = Journal(run_dir / JOURNAL)
        try:
            journal.append(RunWarning(run_dir.name, message=message, code=code))
        finally:
            journal.close()
    finally:
        lock.release()
