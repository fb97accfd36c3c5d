"""Hold every process a trial starts, so that ending the trial ends all of them.

A process group is not enough: a trial that double-forks and calls ``setsid``
(``bash -c '(setsid sleep 300 &); sleep 100'``) leaves both its group and, once the middle
process exits, its parent links - it is re-parented to init and nothing in ``/proc`` ties it
to the trial any more. Linux has two means to keep such a process in reach, tried in order:

``cgroup``
    The trial runs in a cgroup v2 of its own, created under the orchestrator's own cgroup
    (which must be writable: root on the host, or a delegated subtree such as a systemd unit
    with ``Delegate=yes``). A process leaves a cgroup only by writing another cgroup's
    ``cgroup.procs`` (root can, anywhere; a delegated user can write its parent): then the
    trial's process group is followed too, and its survivors are reported as not known
    (``Scope.unseen``, issue 27). Otherwise ``cgroup.procs`` lists the whole trial, and
    ``cgroup.kill`` (Linux 5.14+) ends it in one write; without it every pid listed is sent
    SIGKILL until the list is empty. The child is born inside its cgroup: the orchestrator
    steps into it for the one vfork+exec and back out (``step_in``/``step_out``), so it has no
    window in which to fork outside; where that is refused, the child enters it between fork
    and exec instead (a ``preexec_fn`` writing ``0`` to an fd opened beforehand - the only code
    run there, with no lock taken).
``subreaper``
    ``PR_SET_CHILD_SUBREAPER`` on the orchestrator and on the trial's main process: an orphan
    is re-parented to its nearest subreaper ancestor instead of init, so while the main process
    lives every orphan stays in its tree, and afterwards they come to the orchestrator. The
    tree is re-listed every ``SUBREAPER_REFRESH_S`` while the trial runs, and an orphan of the
    orchestrator is the trial's when it was seen in the tree, holds the trial's stdout or
    stderr pipe, or its environment holds the trial's ``AORTA_*`` variables (a sweep gives
    each trial its own ``AORTA_ARTIFACT_DIR``). Gap: a daemon with none of these (no
    ``AORTA_*`` variables, output redirected) born and orphaned between two re-listings, just
    before the main process exits on its own, is not found.
``process-group``
    Neither is available (prctl refused): the process group and the parent links, as before;
    a double fork with ``setsid`` escapes it.

``AORTA_CONTAINMENT=cgroup|subreaper|process-group`` (or ``ProcessSpec.containment``) asks
for one; a mechanism that cannot be had falls back to the next, and the result says which
was used and why (``ProcessOutcome.containment`` / ``containment_reason``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import signal as _signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from aorta_tui.core.numerals import ascii_digits
from aorta_tui.core.spawn_gate import GATE
from aorta_tui.trial import proctree

MECHANISMS = ("cgroup", "subreaper", "process-group")
ENV_FORCE = "AORTA_CONTAINMENT"
SUBREAPER_REFRESH_S = 0.5
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_CGROUP_PREFIX = "aorta-trial-"
_counter = itertools.count(1)
_lock = threading.Lock()
_own_subreaper: bool | None = None  # None: not tried yet
# Main processes of the trials running now (all threads): never taken for another's orphan.
_leaders: set[int] = set()


def requested(explicit: str | None = None) -> str:
    """The mechanism asked for: ``explicit``, else ``$AORTA_CONTAINMENT``, else ``auto``.

    Raises ValueError for a name that is none of them.
    """
    value = (explicit or os.environ.get(ENV_FORCE) or "auto").strip().lower()
    if value != "auto" and value not in MECHANISMS:
        raise ValueError(
            f"{ENV_FORCE}={value!r} is not one of auto, {', '.join(MECHANISMS)}"
        )
    return value


class Scope:
    """The processes of one trial. Subclasses differ in how they find them."""

    mechanism = "process-group"

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.leader: int | None = None
        self.pipe_links: set[str] = set()  # /proc/<pid>/fd link text of the trial's pipes

    # -- life cycle ---------------------------------------------------------------------------

    def preexec(self) -> Callable[[], None] | None:
        """Run in the child between fork and exec (``None``: nothing, vfork stays possible)."""
        return None

    def step_in(self) -> bool:
        """Put this process where its next child must be born (a cgroup scope: its cgroup),
        so the child needs no ``preexec``; ``False``: not done, use :meth:`preexec`. Every
        ``True`` is followed by :meth:`step_out` once the child exists."""
        return False

    def step_out(self) -> None:
        """Back where :meth:`step_in` found this process."""

    def attach(self, pid: int, pipes: Iterable[int] = ()) -> None:
        """``pid``: the trial's main process; ``pipes``: our ends of its stdout/stderr."""
        self.leader = pid
        self.pipe_links = set()
        for fd in pipes:
            with contextlib.suppress(OSError):
                self.pipe_links.add(f"pipe:[{os.fstat(fd).st_ino}]")
        with _lock:
            _leaders.add(pid)

    def close(self) -> None:
        if self.leader is not None:
            with _lock:
                _leaders.discard(self.leader)

    # -- finding and ending -------------------------------------------------------------------

    def next_refresh(self) -> float | None:
        """When :meth:`refresh` wants to run next (monotonic), or None."""
        return None

    def refresh(self) -> None:
        """Look at the tree while the trial runs (only the subreaper needs to)."""

    def members(self) -> set[int]:
        """Every live (not zombie) process of the trial, the main one included when alive."""
        assert self.leader is not None
        return proctree.tree_pids(self.leader, pgid=self.leader)

    def any_left(self) -> bool:
        """Cheap check after the main process exited: may anything of the trial still run?"""
        assert self.leader is not None
        try:
            os.killpg(self.leader, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def signal(self, sig: int, pids: Iterable[int]) -> None:
        assert self.leader is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.leader, sig)
        for pid in pids:
            if pid != self.leader:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)

    def kill_all(self, pids: Iterable[int]) -> None:
        """SIGKILL everything of the trial (``pids``: what the caller knows of)."""
        self.signal(_signal.SIGKILL, pids)

    def reap(self, pids: Iterable[int]) -> None:
        """Collect the exit status of those ``pids`` that are the orchestrator's children."""

    def unseen(self) -> str | None:
        """Why a process of the trial could be alive and not be found (then its survivors are
        not known, never "none"), or None when the mechanism sees every one."""
        return ("only the process group and parent links are followed: a process that "
                "double-forked and called setsid is not seen")

    def _group_left(self) -> set[int]:
        """Live members of the trial's process group (cheap check first: one killpg)."""
        if self.leader is None:
            return set()
        try:
            os.killpg(self.leader, 0)
        except (ProcessLookupError, PermissionError):
            return set()
        return set(proctree.live_group_members(self.leader))


class CgroupScope(Scope):
    mechanism = "cgroup"

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.procs_fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        self._home_fd: int | None = None
        self.leave_reason = _leave_reason(path.parent)

    def unseen(self) -> str | None:
        # A cgroup holds a process only as long as it cannot move itself out (issue 27 item 3).
        # One that left but kept the trial's process group is still found and ended.
        if self.leave_reason is None:
            return None
        return (f"{self.leave_reason}; one that left it and also the trial's process group "
                "(setsid) is not seen")

    def preexec(self) -> Callable[[], None] | None:
        fd = self.procs_fd

        def enter() -> None:  # in the child: one write, no allocation, no lock
            try:  # noqa: SIM105 - plain try: nothing allocated in the forked child
                os.write(fd, b"0")
            except OSError:
                pass  # attach() sees the child is not inside and falls back

        return enter

    # A preexec_fn makes subprocess fork() the whole orchestrator instead of vfork(): 3 ms per
    # trial on the 2-core box, the largest part of a short trial's cost (benchmarks/
    # sweep_overhead.py). A child is born in its parent's cgroup, so the orchestrator steps into
    # the trial's cgroup for the one vfork+exec and back out: the child is inside from its first
    # instruction, as with the preexec write, and can fork nothing outside it. Only the
    # orchestrator's spawning thread spawns then (one trial starts at a time); the trial's
    # cgroup is the orchestrator's own cgroup's child, so both moves stay inside the subtree
    # this process may write.
    #
    # Threads that start trials at once (scripts/gpu_warm_check.py runs eight) would move the
    # one process between their cgroups under each other: a child born in another trial's
    # cgroup is killed with that trial. spawn_gate.GATE makes step_in .. step_out one at a
    # time, and keeps every other process creation and read of this process's cgroup out of it.
    def step_in(self) -> bool:
        GATE.acquire()
        try:
            home = os.open(self.path.parent / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            GATE.release()
            return False
        try:
            os.write(self.procs_fd, b"0")
        except OSError:
            os.close(home)
            GATE.release()
            return False
        self._home_fd = home
        return True

    def step_out(self) -> None:
        home = self._home_fd
        self._home_fd = None
        if home is None:
            return
        try:
            for _ in range(3):  # a transient failure must not leave us where cgroup.kill lands
                try:
                    os.write(home, b"0")
                    return
                except OSError as exc:
                    err = exc
            raise RuntimeError(f"the orchestrator could not leave the trial's cgroup {self.path}: {err}")
        finally:
            os.close(home)
            GATE.release()

    def inside(self, pid: int) -> bool:
        """Whether ``pid`` entered this cgroup (read from /proc/<pid>/cgroup: that still
        answers for a child that already exited and awaits its reaping, while cgroup.procs
        no longer lists it)."""
        if pid in self._listed():
            return True
        found = trial_cgroup_of(pid)
        return found is not None and found == self.path

    def _listed(self) -> set[int]:
        return cgroup_pids(self.path)

    def members(self) -> set[int]:
        listed = {p for p in self._listed() - {os.getpid()} if proctree.is_alive(p)}
        if self.leave_reason is None:
            return listed
        return listed | self._group_left()  # what moved itself out, in the trial's group

    def any_left(self) -> bool:
        return bool(self._listed()) or (self.leave_reason is not None and bool(self._group_left()))

    def signal(self, sig: int, pids: Iterable[int]) -> None:
        # Only what is listed now (a pid that died may be reused), and the trial's process
        # group (its id stays reserved while a member lives) for what moved itself out.
        for pid in self._listed() - {os.getpid()}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if self.leave_reason is not None and self.leader is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.leader, sig)

    def kill_all(self, pids: Iterable[int]) -> None:
        if self.leave_reason is not None and self.leader is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.leader, _signal.SIGKILL)
        # Never with this process inside (the gate keeps it out; this is the last guard): then
        # only the others, one by one.
        if os.getpid() not in self._listed():
            try:
                (self.path / "cgroup.kill").write_bytes(b"1")
                return
            except OSError:
                pass  # before Linux 5.14: kill what is listed until nothing is
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            listed = self._listed() - {os.getpid()}
            if not listed:
                return
            self.signal(_signal.SIGKILL, listed)
            time.sleep(0.01)

    def close(self) -> None:
        super().close()
        with contextlib.suppress(OSError):
            os.close(self.procs_fd)
        # Empty once every process has been reaped by its parent; a process stuck in D state
        # keeps it (the caller reports it as a survivor). rmdir of a populated cgroup: EBUSY.
        end = time.monotonic() + 0.5
        while True:
            try:
                self.path.rmdir()
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() >= end:
                    return
                time.sleep(0.01)


class SubreaperScope(Scope):
    mechanism = "subreaper"

    def unseen(self) -> str | None:
        return None  # its one gap is documented (docs/reliability.md), not seen per trial

    def __init__(self, reason: str, fingerprint: frozenset[bytes]) -> None:
        super().__init__(reason)
        self.fingerprint = fingerprint
        self.seen: dict[int, float | None] = {}  # pid -> start time (pid reuse check)
        self._next = time.monotonic() + SUBREAPER_REFRESH_S
        self._prctl = _libc_prctl()

    def preexec(self) -> Callable[[], None] | None:
        prctl = self._prctl
        if prctl is None:
            return None

        def become_subreaper() -> None:  # in the child: one foreign call
            with contextlib.suppress(Exception):
                prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

        return become_subreaper

    def next_refresh(self) -> float | None:
        return self._next

    def refresh(self) -> None:
        self._next = time.monotonic() + SUBREAPER_REFRESH_S
        for pid in [p for p in self.seen if not proctree.is_alive(p)]:
            del self.seen[pid]  # gone: nothing to end, and its pid may be reused
        self._remember(super().members())

    def _remember(self, pids: Iterable[int]) -> None:
        for pid in pids:
            if pid not in self.seen:
                self.seen[pid] = proctree.start_time(pid)

    def _still_seen(self) -> set[int]:
        out = set()
        for pid, began in self.seen.items():
            if proctree.is_alive(pid) and (began is None or proctree.start_time(pid) == began):
                out.add(pid)
        return out

    def _orphans(self) -> set[int]:
        """Children of the orchestrator that are this trial's (seen in its tree, or carrying
        its AORTA_* variables), with their own trees."""
        me = os.getpid()
        with _lock:
            leaders = set(_leaders)
        roots = set()
        for pid in _children_of(me):
            if pid in leaders or not proctree.is_alive(pid):
                continue
            if (pid in self.seen or (self.fingerprint and self.fingerprint <= _environ(pid))
                    or _holds_any(pid, self.pipe_links)):
                roots.add(pid)
        if not roots:
            return set()
        stats = proctree.all_stats()
        out: set[int] = set()
        for root in roots:
            out |= proctree.tree_pids(root, stats=stats)
        return out

    def members(self) -> set[int]:
        found = super().members() | self._still_seen() | self._orphans()
        self._remember(found)
        return found

    def any_left(self) -> bool:
        return super().any_left() or bool(self._still_seen()) or bool(self._orphans())

    def reap(self, pids: Iterable[int]) -> None:
        # Orphans re-parented to the orchestrator are its children now: collect them, or they
        # stay zombies until it exits. Only pids of this trial: never waitpid(-1), which
        # would take another Popen's status.
        for pid in pids:
            if pid == self.leader:
                continue
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def open_scope(env: dict[str, str], explicit: str | None = None) -> Scope:
    """The best containment for a trial about to start with environment ``env``."""
    notes: list[str] = []
    try:
        want = requested(explicit)
    except ValueError as exc:
        if explicit is not None:
            raise  # a caller's mistake
        want = "auto"  # a bad environment variable must not fail every trial: say so instead
        notes.append(f"{exc}; used auto")
    if want in ("auto", "cgroup"):
        scope, why = _try_cgroup()
        if scope is not None:
            scope.reason = "; ".join([*notes, scope.reason])
            return scope
        notes.append(f"no cgroup: {why}")
    if want in ("auto", "cgroup", "subreaper"):
        ok, why = _become_subreaper()
        if ok:
            if want == "subreaper":
                notes.append(f"asked for by {ENV_FORCE} or the caller")
            reason = "; ".join([*notes, "PR_SET_CHILD_SUBREAPER on the orchestrator and the trial"])
            return SubreaperScope(reason, env_fingerprint(env))
        notes.append(f"no subreaper: {why}")
    else:
        notes.append(f"asked for by {ENV_FORCE} or the caller")
    notes.append("only the process group and parent links are followed: a double fork "
                 "with setsid escapes")
    return Scope("; ".join(notes))


def downgrade(scope: CgroupScope, env: dict[str, str], why: str) -> Scope:
    """The child did not land in its cgroup (checked after the fork): use the next mechanism."""
    scope.close()
    ok, no_reaper = _become_subreaper()
    if ok:
        # The child is already running: it is not a subreaper itself, the orchestrator is.
        return SubreaperScope(f"no cgroup: {why}", env_fingerprint(env))
    return Scope(f"no cgroup: {why}; no subreaper: {no_reaper}")


def env_fingerprint(env: dict[str, str]) -> frozenset[bytes]:
    """The trial's ``AORTA_*`` entries, as they appear in ``/proc/<pid>/environ``."""
    return frozenset(f"{k}={v}".encode() for k, v in env.items() if k.startswith("AORTA_"))


# -- cgroup v2 --------------------------------------------------------------------------------


def own_cgroup_dir() -> tuple[Path | None, str]:
    """The directory of this process's cgroup v2, or None with the reason.

    Read under the gate: while a trial's spawn has stepped this process into the trial's
    cgroup, /proc/self/cgroup names that cgroup, not this process's home."""
    try:
        with GATE:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as exc:
        return None, f"/proc/self/cgroup unreadable ({exc.strerror})"
    rel = next((line[3:] for line in lines if line.startswith("0::")), None)
    if rel is None:
        return None, "this process is in no cgroup v2 hierarchy (cgroup v1 only)"
    path = _cgroup_dir(rel)
    if path is None:
        return None, "no cgroup2 file system is mounted"
    return path, ""


def _cgroup_dir(rel: str) -> Path | None:
    """The directory of cgroup ``rel`` (a ``0::`` path of /proc/<pid>/cgroup)."""
    mount = _cgroup2_mount()
    if mount is None:
        return None
    point, root = mount
    if root != "/" and rel.startswith(root):
        rel = rel[len(root):]
    return Path(point + rel.rstrip("/")) if rel != "/" else Path(point)


def _cgroup2_mount() -> tuple[str, str] | None:
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        pre, _, post = line.partition(" - ")
        if post.split(" ", 1)[0] == "cgroup2":
            fields = pre.split()
            return _unescape(fields[4]), _unescape(fields[3])
    return None


def _unescape(s: str) -> str:
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def trial_cgroup_of(pid: int) -> Path | None:
    """The trial cgroup ``pid`` runs in (one this module made), or None."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    rel = next((line[3:] for line in lines if line.startswith("0::")), "")
    if not rel.rsplit("/", 1)[-1].startswith(_CGROUP_PREFIX):
        return None
    path = _cgroup_dir(rel)
    return path if path is not None and path.is_dir() else None


def _leave_reason(base: Path) -> str | None:
    """Why a trial in a cgroup under ``base`` could move itself out of it, or None.

    Moving a process needs write access to the ``cgroup.procs`` of the cgroup it goes to and
    of the common ancestor: root has it everywhere; otherwise the trial (with the
    orchestrator's credentials) can go back into ``base`` when that file is writable to it."""
    if os.geteuid() == 0:
        return "the trial runs as root, which may move its processes into any cgroup"
    if os.access(base / "cgroup.procs", os.W_OK):
        return f"the trial may write {base / 'cgroup.procs'}, so it may move its processes there"
    return None


def cgroup_pids(path: Path) -> set[int]:
    try:
        return {int(x) for x in (path / "cgroup.procs").read_bytes().split()}
    except (OSError, ValueError):
        return set()


def _try_cgroup() -> tuple[CgroupScope | None, str]:
    base, why = own_cgroup_dir()
    if base is None:
        return None, why
    name = f"{_CGROUP_PREFIX}{os.getpid()}-{next(_counter)}"
    path = base / name
    _remove_stale(base)
    try:
        path.mkdir()
    except OSError as exc:
        return None, f"cannot create {path} ({exc.strerror})"
    try:
        scope = CgroupScope(path, f"trial in cgroup v2 {path}")
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.rmdir()
        return None, f"cannot write {path / 'cgroup.procs'} ({exc.strerror})"
    return scope, ""


def _remove_stale(base: Path) -> None:
    """Empty trial cgroups left by orchestrators that were killed (SIGKILL leaves them)."""
    try:
        names = [e.name for e in os.scandir(base) if e.name.startswith(_CGROUP_PREFIX)]
    except OSError:
        return
    for name in names:
        owner = name[len(_CGROUP_PREFIX):].split("-", 1)[0]
        if ascii_digits(owner) and int(owner) != os.getpid() and not proctree.is_alive(int(owner)):
            with contextlib.suppress(OSError):
                (base / name).rmdir()  # EBUSY while populated: left alone


# -- subreaper --------------------------------------------------------------------------------


def _libc_prctl() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def _become_subreaper() -> tuple[bool, str]:
    """Make the orchestrator a child subreaper (once; it stays one for its life)."""
    global _own_subreaper
    with _lock:
        if _own_subreaper is None:
            prctl = _libc_prctl()
            if prctl is None:
                _own_subreaper = False
            else:
                _own_subreaper = prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        ok = _own_subreaper
    return ok, "" if ok else "prctl(PR_SET_CHILD_SUBREAPER) is not available or was refused"


def is_subreaper() -> bool:
    """Whether this process is a child subreaper (tests, diagnostics)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    flag = ctypes.c_int(0)
    return libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value == 1


def _children_of(pid: int) -> set[int]:
    """Children of ``pid`` from ``/proc/<pid>/task/*/children`` (or a full /proc scan)."""
    out: set[int] = set()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
        for tid in tids:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.update(int(x) for x in fh.read().split())
        return out
    except FileNotFoundError:
        pass  # a kernel without CONFIG_PROC_CHILDREN
    except OSError:
        return out
    return {st.pid for st in proctree.all_stats() if st.ppid == pid}


def _holds_any(pid: int, links: set[str]) -> bool:
    """Whether ``pid`` has one of ``links`` (``pipe:[inode]``) open: the trial's output pipes."""
    if not links:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in links:
                return True
        except OSError:
            continue
    return False


def _environ(pid: int) -> frozenset[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return frozenset(fh.read().split(b"\0"))
    except OSError:
        return frozenset()
