"""Process-tree helpers read from ``/proc`` (Linux): who descends from a trial, who is alive.

Used by the worker (kill the whole tree), the hang monitor (sum the workers' I/O, leaving out
launchers such as torchrun and store-server threads) and the GPU sampler (which of
nvidia-smi's pids belong to the trial). Everything is fail-soft: a process
that vanishes between listing and reading is simply skipped. Cost is one small read per
process on the machine (~1-3 ms for a few hundred processes), so callers use these on the
slow paths only (periodic samples, kills), never for a trial that exits normally.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from aorta_tui.core.numerals import ascii_digits

PROC = "/proc"


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    pgid: int
    state: str  # one letter: R S D Z T ...


def read_stat(pid: int) -> ProcStat | None:
    """Parse ``/proc/<pid>/stat``; ``None`` when the process is gone or unreadable."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain ') ' - split at the last ')'.
    close = raw.rfind(b")")
    if close < 0:
        return None
    fields = raw[close + 2 :].split()
    if len(fields) < 3:
        return None
    try:
        return ProcStat(pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), state=fields[0].decode())
    except (ValueError, UnicodeDecodeError):
        return None


def all_stats() -> list[ProcStat]:
    out: list[ProcStat] = []
    try:
        names = os.listdir(PROC)
    except OSError:
        return out
    for name in names:
        if ascii_digits(name):
            st = read_stat(int(name))
            if st is not None:
                out.append(st)
    return out


def tree_pids(root: int, *, pgid: int | None = None, stats: list[ProcStat] | None = None) -> set[int]:
    """``root`` and every live descendant (by parent links), plus members of ``pgid``.

    Group members are included because an orphaned grandchild is re-parented to init and
    loses its parent link, but keeps the trial's process group. Zombies are left out: they
    are already dead and hold no memory, GPU context or I/O.
    """
    stats = all_stats() if stats is None else stats
    children: dict[int, list[int]] = {}
    alive: set[int] = set()
    for st in stats:
        if st.state == "Z":
            continue
        alive.add(st.pid)
        children.setdefault(st.ppid, []).append(st.pid)
        if pgid is not None and st.pgid == pgid:
            alive.add(st.pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        if pid in alive:
            found.add(pid)
        stack.extend(children.get(pid, ()))
    if pgid is not None:
        found.update(st.pid for st in stats if st.pgid == pgid and st.state != "Z")
    return found


def live_group_members(pgid: int) -> list[int]:
    """Pids of the group that are still running (not zombies)."""
    return [st.pid for st in all_stats() if st.pgid == pgid and st.state != "Z"]


def is_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (dead, waiting to be reaped)."""
    st = read_stat(pid)
    return st is not None and st.state != "Z"


# Threads whose I/O is a service to other processes, not the work of the one hosting them:
# torch's TCPStore server (``pt_tcpstore``, ``pt_tcpstore_uv`` with libuv) answers the polls of
# the other ranks (ProcessGroupNCCL's monitor thread checks the store every second) and of
# torchrun's agent. Its read()/write() calls count in the host's /proc/<pid>/io.
STORE_SERVER_THREADS = ("pt_tcpstore",)


def _read_io(path: str) -> int | None:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    total = 0
    seen = 0
    for line in raw.splitlines():
        key, _, value = line.partition(b":")
        if key in (b"rchar", b"wchar"):
            try:
                total += int(value)
            except ValueError:
                return None
            seen += 1
    return total if seen == 2 else None


def io_bytes(pid: int, *, exclude_threads: tuple[str, ...] = ()) -> int | None:
    """``rchar + wchar`` of ``/proc/<pid>/io``: bytes moved by read()/write()-family calls.

    Counts files, pipes and sockets alike (``send``/``recv`` on a socket do not count; torch's
    store client uses those, its libuv server read/write). ``exclude_threads``: name prefixes
    of threads (``/proc/<pid>/task/<tid>/comm``) whose own I/O is subtracted. ``None`` when
    unreadable (gone, or not ours to inspect without ptrace rights).
    """
    total = _read_io(f"{PROC}/{pid}/io")
    if total is None or not exclude_threads:
        return total
    try:
        tids = os.listdir(f"{PROC}/{pid}/task")
    except OSError:
        return total
    for tid in tids:
        try:
            with open(f"{PROC}/{pid}/task/{tid}/comm", "rb") as fh:
                name = fh.read().decode("utf-8", "replace").strip()
        except OSError:
            continue
        if name.startswith(exclude_threads):
            total -= _read_io(f"{PROC}/{pid}/task/{tid}/io") or 0
    return total


def cpu_ticks(pid: int) -> int | None:
    """utime + stime of ``pid`` in clock ticks (reported, not used to decide a hang)."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> float | None:
    """When ``pid`` started, as epoch seconds (``/proc/<pid>/stat`` starttime + boot time)."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as fh:
            raw = fh.read()
        ticks = int(raw[raw.rfind(b")") + 2 :].split()[19])
        with open(f"{PROC}/stat", "rb") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith(b"btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def cmdline(pid: int) -> list[str] | None:
    """``/proc/<pid>/cmdline`` as argv; ``None`` when gone or empty (a kernel thread, a zombie)."""
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    if not raw:
        return None
    return [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")]


# Programs that start and supervise the processes doing the work (ranks) and do none of it
# themselves. Their own I/O is bookkeeping - torchrun polls the rendezvous store it hosts about
# once a second, mpirun/orted forward stdio and heartbeats - so the hang monitor leaves it out.
LAUNCHER_PROGRAMS = frozenset({
    "torchrun", "mpirun", "mpiexec", "mpiexec.hydra", "orterun", "prterun", "prte", "orted",
    "prted", "hydra_pmi_proxy",
})  # fmt: skip
LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})
_PYTHON_OPTS_WITH_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs"})


def launcher_name(argv: list[str] | None) -> str | None:
    """The launcher ``argv`` runs (``torchrun``, ``torch.distributed.run``, ``mpirun``, ...), or None.

    Recognises the program itself (``torchrun``, ``/usr/bin/mpirun``), a console script run by
    an interpreter (``python3 /venv/bin/torchrun``, which is what a ``#!`` line produces), a
    module (``python -m torch.distributed.run``) and ``accelerate launch``.
    """
    if not argv:
        return None
    prog = os.path.basename(argv[0])
    rest = argv[1:]
    if prog.startswith("python"):
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] != "-":
            opt = rest[i]
            if opt == "-m":
                module = rest[i + 1] if i + 1 < len(rest) else ""
                return module if module in LAUNCHER_MODULES else None
            if opt.startswith("-m"):  # -mtorch.distributed.run
                return opt[2:] if opt[2:] in LAUNCHER_MODULES else None
            if opt == "-c":
                return None
            i += 2 if opt in _PYTHON_OPTS_WITH_VALUE else 1
        if i >= len(rest):
            return None
        prog, rest = os.path.basename(rest[i]), rest[i + 1 :]
    if prog in LAUNCHER_PROGRAMS:
        return prog
    if prog == "accelerate" and rest[:1] == ["launch"]:
        return "accelerate launch"
    return None
