"""The process supervisor: run one trial's command in a fresh process and report how it ended.

The child gets its complete environment at creation (GPU runtimes read their variables once
at start-up), its own session and process group, stdin from /dev/null, and stdout/stderr
pumped into bounded files. One event loop in the calling thread waits with ``poll`` on the
two pipes, a pidfd of the child and (with :class:`CancelEvent`) a wake-up pipe, so a trial
that exits at once costs a fork/exec, a few syscalls and no sleeping.

Every process the trial starts is held by a :mod:`~aorta_tui.trial.containment` scope: a
cgroup v2 of its own where one can be made, else ``PR_SET_CHILD_SUBREAPER``, else the process
group (``ProcessOutcome.containment`` says which, and why). Ending a trial early (timeout,
cancel, hang): SIGTERM to every process of the scope, ``kill_grace_s`` to exit, then SIGKILL
(``cgroup.kill``) to what is left, re-listed. After the main process exits - early or not -
any process of the scope still running is ended the same way, so no grandchild of a trial
outlives it (``killed_strays`` says when that was needed). ``killed_count`` counts the
processes ended; ``survivors`` lists any still alive afterwards (none, unless stuck in the
kernel or out of reach of the mechanism used).

Figures recorded: wall time (monotonic, from just before the fork to the reap), exit code or
signal and core-dump flag (``wait4`` status), peak RSS (``wait4`` rusage ``ru_maxrss``: the
largest single process among the child and the descendants it waited for, in KiB - not a
sum; Linux also counts into it the *parent's* peak RSS at exec time, so when the figure does
not exceed the orchestrator's own ``VmHWM`` it says nothing about the trial and is reported as
``None`` with ``peak_rss_reason``), peak GPU memory (see :mod:`aorta_tui.trial.gpu_probe`: sampled, a lower bound, or
``None`` with a reason).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import select
import signal as _signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from aorta_tui.core import spawn_gate
from aorta_tui.core.inputs import FieldReader
from aorta_tui.core.process_record import ExecutorFacts, ProcessRecord, read_executor_facts
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.trial import containment, gpu_probe, proctree, timeline
from aorta_tui.trial.hang import HangMonitor, HangPolicy, HangReport

if TYPE_CHECKING:
    import resource

    from aorta_tui.classify.tiers import LogScan

KiB = 1024
MiB = 1024 * KiB
MARKER_RESERVE = 256  # bytes kept free in a bounded log for the "omitted" marker line
_PLAIN_EVENT_POLL_S = 0.1  # how often a plain threading.Event is looked at (CancelEvent: at once)
_STRAY_DRAIN_S = 1.0  # how long to wait for EOF from a pipe held by an escaped process
_READ_CHUNK = 256 * KiB
_SAMPLER_JOIN_S = 2.0  # at most this long for the GPU sampler's last tool call after the trial
_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR


class CancelEvent(threading.Event):
    """A ``threading.Event`` whose ``set()`` also wakes every running worker at once.

    A plain Event works too, but is only looked at every 0.1 s. ``set`` takes no lock, so it
    is safe to call from a signal handler.
    """

    def __init__(self) -> None:
        super().__init__()
        self._wake_fds: dict[int, None] = {}
        self.now = False  # hurry(): no grace for the running trial, SIGKILL at once

    def set(self) -> None:
        super().set()
        self._wake()

    def hurry(self) -> None:
        """A second stop request: the cancelled trial gets no more grace (its processes are
        SIGKILLed at once), so the orchestrator's own clean-up comes sooner; safe in a
        signal handler."""
        self.now = True
        self.set()

    def _wake(self) -> None:
        for fd in list(self._wake_fds):
            with contextlib.suppress(OSError):
                os.write(fd, b"x")

    def _subscribe(self) -> tuple[int, int]:
        read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._wake_fds[write_fd] = None
        return read_fd, write_fd

    def _unsubscribe(self, fds: tuple[int, int]) -> None:
        self._wake_fds.pop(fds[1], None)
        for fd in fds:
            os.close(fd)


class TrialProc(Protocol):
    """The parts of ``subprocess.Popen`` the supervisor uses (a Popen, or a trial forked by a
    warm zygote: ``trial/warm.py``'s ``_ForkedProc``)."""

    @property
    def pid(self) -> int: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def stderr(self) -> IO[bytes] | None: ...

    returncode: int | None


class LaunchedProc(TrialProc, Protocol):
    """A trial a launcher started: when it was forked, and the RSS it started with."""

    @property
    def spawned_ns(self) -> int: ...
    @property
    def rss_floor_kb(self) -> int | None: ...
    @property
    def rss_floor_reason(self) -> str: ...


class TrialLauncher(Protocol):
    """Starts a trial instead of Popen (``trial/warm.py``'s ``WarmLauncher``), inside ``scope``;
    raises :class:`LaunchDeclined` where it cannot, before it started anything."""

    def launch(self, spec: ProcessSpec, scope: containment.Scope) -> LaunchedProc: ...


@dataclass
class ProcessSpec:
    """What to run. ``env`` is the child's complete environment (nothing is inherited)."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    stdout_path: Path
    stderr_path: Path
    timeout_s: float | None = None
    max_log_bytes: int = 64 * MiB  # per stream; past it: head, a marker line, the last tail_bytes
    tail_bytes: int = 64 * KiB
    hang: HangPolicy | None = None
    kill_grace_s: float = 2.0  # SIGTERM -> SIGKILL
    sample_gpu: bool = True  # sample per-process GPU memory when a vendor tool exists
    gpu_sample_interval_s: float = 1.0
    gpu_first_sample_s: float = 0.2
    # cgroup | subreaper | process-group; None: $AORTA_CONTAINMENT, else the best available
    containment: str | None = None
    # starts the process instead of Popen (trial_isolation: warm: trial/warm.py's WarmLauncher,
    # which forks the trial from a zygote); argv[-1] is then the trial's spec file
    launcher: TrialLauncher | None = None
    # the classifier's patterns over the whole output as it passes (classify.LogScan): the
    # logs keep only their head and tail, the scan sees every byte in between too
    log_scan: LogScan | None = None
    # the directory the logs lie beneath, no link followed below it (the run directory);
    # None: the logs' own directory
    log_root: Path | None = None

    def __post_init__(self) -> None:
        if self.max_log_bytes < self.tail_bytes + 2 * MARKER_RESERVE:
            raise ValueError(
                f"max_log_bytes ({self.max_log_bytes}) must exceed tail_bytes "
                f"({self.tail_bytes}) by at least {2 * MARKER_RESERVE} bytes"
            )
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {self.timeout_s!r}")


@dataclass
class ProcessOutcome:
    """How a trial's process ended. ``pid`` is None only when it never started."""

    pid: int | None
    exit_code: int | None
    signal: int | None
    core_dumped: bool
    timed_out: bool
    cancelled: bool
    hang: HangReport | None
    exec_error: str | None
    wall_s: float
    started_at: float
    ended_at: float
    peak_rss_kb: int | None
    gpu_peak_mem_bytes: int | None
    gpu_mem_reason: str | None
    stdout_bytes: int
    stderr_bytes: int
    truncated: bool
    gpu_mem_source: str | None = None
    peak_rss_reason: str | None = None  # why peak_rss_kb is None
    # GPU error counters that grew during the trial ({device: {counter: increase}}; {} = read,
    # nothing grew), or None with gpu_counters_reason. Read at the first GPU sample and at exit.
    gpu_counters_delta: dict[str, dict[str, int]] | None = None
    gpu_counters_reason: str | None = None
    killed_strays: bool = False  # processes of the tree outlived the main one and were ended
    kill_escalated: bool = False  # SIGTERM was not enough; SIGKILL was sent
    log_error: str | None = None  # writing a log file failed (disk full, ...)
    hang_note: str | None = None  # why the hang detector could not fire, when it could not
    containment: str | None = None  # cgroup | subreaper | process-group (None: never started)
    containment_reason: str | None = None
    timeout_s: float | None = None  # the limit the trial ran under
    stopped_at_s: float | None = None  # seconds from the start to our first signal (early end)
    killed_count: int = 0  # processes of the trial this worker ended (main one included)
    # still alive after the final SIGKILL; None: not known (the mechanism cannot see every
    # process of the trial: survivors_reason says why), never [] for "none" then
    survivors: list[int] | None = field(default_factory=list)
    survivors_reason: str | None = None
    # the supervisor's timeline marks (CLOCK_MONOTONIC ns: spawn, spawned, exited, reaped) and
    # the cost of what ran beside the trial here (GPU sampler, hang monitor); see trial/timeline
    marks: dict[str, int] = field(default_factory=dict)
    beside: dict[str, Any] = field(default_factory=dict)
    # where the trial ran when an executor other than a local process ran it (a Slurm job: job
    # id, node, GPU ids, state, queue wait apart from run time; aorta_tui/executor/slurm.py)
    executor: ExecutorFacts | None = None

    @property
    def signal_name(self) -> str | None:
        if self.signal is None:
            return None
        try:
            return _signal.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"

    def to_record(self) -> ProcessRecord:
        """The finished process as result.json's ``process`` section records it (a typed value of
        ``core``, which the trial contract holds): every key held, the hang report as it is
        (core's type) and the signal's name."""
        return ProcessRecord(
            pid=self.pid, exit_code=self.exit_code, signal=self.signal,
            core_dumped=self.core_dumped, timed_out=self.timed_out, cancelled=self.cancelled,
            hang=self.hang, exec_error=self.exec_error,
            wall_s=self.wall_s, started_at=self.started_at, ended_at=self.ended_at,
            peak_rss_kb=self.peak_rss_kb, gpu_peak_mem_bytes=self.gpu_peak_mem_bytes,
            gpu_mem_reason=self.gpu_mem_reason, stdout_bytes=self.stdout_bytes,
            stderr_bytes=self.stderr_bytes, truncated=self.truncated,
            gpu_mem_source=self.gpu_mem_source, peak_rss_reason=self.peak_rss_reason,
            gpu_counters_delta=copy.deepcopy(self.gpu_counters_delta),
            gpu_counters_reason=self.gpu_counters_reason, killed_strays=self.killed_strays,
            kill_escalated=self.kill_escalated, log_error=self.log_error,
            hang_note=self.hang_note, containment=self.containment,
            containment_reason=self.containment_reason, timeout_s=self.timeout_s,
            stopped_at_s=self.stopped_at_s, killed_count=self.killed_count,
            survivors=None if self.survivors is None else tuple(self.survivors),
            survivors_reason=self.survivors_reason, marks=dict(self.marks),
            beside=copy.deepcopy(self.beside), executor=self.executor,
            signal_name=self.signal_name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (result.json's ``process``, a Slurm task's outcome): the record's, its
        one serializer."""
        return self.to_record().to_dict()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessOutcome:
        """Inverse of :meth:`to_dict` (unknown keys ignored: newer files stay readable)."""
        names = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        if kwargs.get("hang") is not None:
            kwargs["hang"] = HangReport.from_dict(kwargs["hang"])
        if kwargs.get("executor") is not None:
            kwargs["executor"] = read_executor_facts(FieldReader("process", "process outcome"),
                                                     kwargs["executor"], "executor")
        return cls(**kwargs)


class _BoundedLog:
    """Writes a stream to a file, keeping at most the head and the tail of ``max_bytes``.

    The head goes to disk as it arrives (a live log); the tail is held in memory and written
    after a marker line when the stream ends, so the file never exceeds ``max_bytes``.
    """

    def __init__(self, fs: RunDirFS, path: Path, max_bytes: int, tail_bytes: int,
                 scan: LogScan | None = None,
                 label: str = "") -> None:
        self.path = path
        # every byte of the stream, kept or not, goes through the classifier's scan (LogScan)
        self.scan, self.label = scan, label
        self.on_data = scan.feed_for(label) if scan is not None else None
        # through the run directory's file layer: a log (or a directory on its way) that someone
        # made a link, a FIFO or a hard link is refused, never followed or truncated
        self.fd = fs.open_log(path)
        self.head_limit = max_bytes - tail_bytes - MARKER_RESERVE
        self.tail_bytes = tail_bytes
        self.keep = tail_bytes + MARKER_RESERVE  # a tail this small fits without a marker
        self.written = 0
        self.total = 0
        self.tail = bytearray()
        self.error: str | None = None
        self.truncated = False
        self.kept: int | None = None  # bytes of the stream the file keeps (None: all of them)

    def write(self, data: bytes) -> None:
        self.total += len(data)
        if self.on_data is not None:
            self.on_data(data)
        room = self.head_limit - self.written
        if room > 0:
            head = data[:room]
            self._write_all(head)
            self.written += len(head)
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 4 * self.keep:
                del self.tail[: -self.keep]

    def close(self) -> None:
        extra = self.total - self.written
        if extra > 0:
            if extra <= self.keep:
                self._write_all(bytes(self.tail[-extra:]))
            else:
                tail = bytes(self.tail[-self.tail_bytes :])
                omitted = extra - len(tail)
                marker = (
                    f"\n[aorta-tui: {omitted} bytes omitted here; this log keeps the first "
                    f"{self.written} and the last {len(tail)} of {self.total} bytes]\n"
                ).encode()
                self._write_all(marker[:MARKER_RESERVE] + tail)
                self.truncated = True
                self.kept = self.written + len(tail)
        self.tail = bytearray()
        if self.scan is not None:
            self.scan.finish(self.label, head=self.written,
                             kept=self.total if self.kept is None else self.kept)
        os.close(self.fd)

    def _write_all(self, data: bytes) -> None:
        if self.error:
            return
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except OSError as exc:
                self.error = f"writing {self.path} failed: {exc}"
                return
            view = view[n:]


@dataclass
class _Loop:
    """Mutable state of one run's event loop."""

    poller: select.poll
    pipes: dict[int, _BoundedLog] = field(default_factory=dict)
    leader_exited: bool = False


def _open_logs(spec: ProcessSpec) -> tuple[_BoundedLog, _BoundedLog]:
    """The two bounded logs (one when both streams go to one file), opened beneath
    ``spec.log_root`` (the run directory) without following a link; without a root, beneath
    the log's own directory."""
    root = spec.log_root
    if root is None:
        root = Path(os.path.commonpath([spec.stdout_path.parent, spec.stderr_path.parent]))
        root.mkdir(parents=True, exist_ok=True)
    scan = spec.log_scan
    shared = spec.stderr_path == spec.stdout_path
    with RunDirFS(root) as fs:
        out_log = _BoundedLog(fs, spec.stdout_path, spec.max_log_bytes, spec.tail_bytes, scan,
                              "stdout+stderr" if shared else "stdout")
        if shared:
            return out_log, out_log
        try:
            return out_log, _BoundedLog(fs, spec.stderr_path, spec.max_log_bytes, spec.tail_bytes,
                                        scan, "stderr")
        except BaseException:
            out_log.close()
            raise


def run_process(
    spec: ProcessSpec,
    *,
    cancel: threading.Event | None = None,
    on_start: Callable[[int], None] | None = None,
) -> ProcessOutcome:
    """Run ``spec`` to the end and return its outcome; never raises for a failed exec."""
    # An unwritable trial directory raises OSError here, a link on the way RunDirRefused: the
    # orchestrator's problem, not the trial's (it never ran).
    out_log, err_log = _open_logs(spec)
    started_at = time.time()
    spawn_ns = time.monotonic_ns()
    t0 = spawn_ns / 1e9  # time.monotonic()'s clock
    if not spec.argv:
        return _exec_failed(spec, "empty command (argv is empty)", started_at, t0, out_log, err_log)
    scope = containment.open_scope(spec.env, spec.containment)
    if spec.launcher is not None:
        launched = _run_launched(spec, scope, started_at, t0, spawn_ns, out_log, err_log, cancel, on_start)
        if launched is not None:
            return launched
        # the launcher declined (LaunchDeclined): exec'd as any trial, its wait in `spawned`
    stepped_in = scope.step_in()  # a cgroup: born inside it, with no preexec_fn (vfork)
    proc: subprocess.Popen[bytes] | None = None
    spawn_error: BaseException | None = None
    try:
        # preexec_fn (subreaper, or a cgroup that could not be stepped into): one prctl or
        # one write between fork and exec. step_in holds the spawn gate; otherwise take it.
        with contextlib.nullcontext() if stepped_in else spawn_gate.GATE:
            proc = subprocess.Popen(
                spec.argv,
                env=spec.env,
                cwd=spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                bufsize=0,
                preexec_fn=None if stepped_in else scope.preexec(),
            )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        spawn_error = exc
    finally:
        # Also on KeyboardInterrupt or a signal handler's exception: this process must never
        # stay in the trial's cgroup, where the trial's end would kill it.
        if stepped_in:
            try:
                scope.step_out()
            except RuntimeError:
                if proc is not None:
                    proc.kill()  # never leave a trial running that this process cannot supervise
                    proc.wait()
                raise
    if proc is None:
        assert spawn_error is not None
        scope.close()
        return _exec_failed(spec, _describe_exec_error(spawn_error, spec), started_at, t0, out_log, err_log)
    spawned_ns = time.monotonic_ns()  # Popen returns once the exec succeeded
    if isinstance(scope, containment.CgroupScope) and not scope.inside(proc.pid):
        scope = containment.downgrade(scope, spec.env, f"the trial did not enter {scope.path}")
    assert proc.stdout is not None and proc.stderr is not None  # both are pipes (PIPE above)
    scope.attach(proc.pid, (proc.stdout.fileno(), proc.stderr.fileno()))
    run = _Run(spec, proc, out_log, err_log, started_at, t0, cancel, scope)
    run.marks.update(spawn=spawn_ns, spawned=spawned_ns)
    return run.run(on_start)


class LaunchDeclined(Exception):
    """Raised by a launcher that cannot start this trial its way, before it started anything:
    the trial is exec'd like any other (a prepared zygote that did not load: trial/prepared.py)."""


def _run_launched(spec: ProcessSpec, scope: containment.Scope, started_at: float, t0: float,
                  spawn_ns: int, out_log: _BoundedLog, err_log: _BoundedLog,
                  cancel: threading.Event | None, on_start: Callable[[int], None] | None) -> ProcessOutcome | None:
    """``run_process`` for a process that ``spec.launcher`` starts (a warm trial): the same
    supervision; the launcher puts it into ``scope`` (cgroup) before it runs. None: the
    launcher declined before it started anything (the caller execs the trial)."""
    launcher = spec.launcher
    assert launcher is not None  # run_process comes here only for a spec with one
    try:
        proc = launcher.launch(spec, scope)
    except LaunchDeclined:
        return None
    except Exception as exc:  # the zygote is gone or refused: the trial did not start
        scope.close()
        return _exec_failed(spec, f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc),
                            started_at, t0, out_log, err_log)
    if isinstance(scope, containment.CgroupScope) and not scope.inside(proc.pid):
        scope = containment.downgrade(scope, spec.env, f"the trial did not enter {scope.path}")
    assert proc.stdout is not None and proc.stderr is not None  # a launched trial's two pipes
    scope.attach(proc.pid, (proc.stdout.fileno(), proc.stderr.fileno()))
    run = _Run(spec, proc, out_log, err_log, started_at, t0, cancel, scope)
    run.marks.update(spawn=spawn_ns, spawned=proc.spawned_ns)
    floor = proc.rss_floor_kb
    if floor is not None and (run.parent_hwm_kb is None or floor > run.parent_hwm_kb):
        run.parent_hwm_kb, run.rss_floor_who = floor, proc.rss_floor_reason
    return run.run(on_start)


class _Run:
    def __init__(
        self,
        spec: ProcessSpec,
        proc: TrialProc,
        out_log: _BoundedLog,
        err_log: _BoundedLog,
        started_at: float,
        t0: float,
        cancel: threading.Event | None,
        scope: containment.Scope,
    ) -> None:
        self.spec = spec
        self.scope = scope
        self.proc = proc
        self.pid = proc.pid
        self.out_log = out_log
        self.err_log = err_log
        self.started_at = started_at
        self.t0 = t0
        self.cancel = cancel
        self.kill_reason: str | None = None
        self.hang_report: HangReport | None = None
        self.kill_escalated = False
        self.killed_strays = False
        self.status: int | None = None
        self.rusage: resource.struct_rusage | None = None
        self.tree_snapshot: set[int] = set()  # every process of the trial we signalled
        self.stopped_at: float | None = None
        self.survivors: set[int] = set()
        self.unseen: str | None = None  # why survivors may exist unseen (Scope.unseen)
        self.parent_hwm_kb = peak_rss_kb()  # read after the fork: an upper bound
        self.rss_floor_who = "Linux counts the orchestrator's peak RSS into the child's ru_maxrss at exec"
        self.marks: dict[str, int] = {}
        self.hang_watch = timeline.Stopwatch()
        self.sampler_stop_ns = 0

    # -- main --------------------------------------------------------------------------------

    def run(self, on_start: Callable[[int], None] | None) -> ProcessOutcome:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        poller = select.poll()
        loop = _Loop(poller)
        for stream, log in ((self.proc.stdout, self.out_log), (self.proc.stderr, self.err_log)):
            fd = stream.fileno()
            os.set_blocking(fd, False)
            poller.register(fd, _POLL_IN)
            loop.pipes[fd] = log
        exit_fd, exit_waiter = self._exit_notifier()
        poller.register(exit_fd, select.POLLIN)
        wake: tuple[int, int] | None = None
        if isinstance(self.cancel, CancelEvent):
            wake = self.cancel._subscribe()
            poller.register(wake[0], select.POLLIN)
        sampler, gpu_reason = self._start_gpu_sampler()
        monitor = self._hang_monitor(sampler, gpu_reason)
        try:
            if on_start is not None:
                on_start(self.pid)
            self._event_loop(loop, exit_fd, monitor)
            self.marks.setdefault("exited", time.monotonic_ns())
            if sampler is not None:  # its last tool call overlaps the reap and the drain
                sampler.request_stop()
            self._drain(loop, until_eof=False)
            self._reap()
            self.marks["reaped"] = time.monotonic_ns()
            self._end_strays()
            self._drain(loop, until_eof=True)
        except BaseException:
            # Interrupted (KeyboardInterrupt, a failing on_start): never leave the tree running.
            self.tree_snapshot |= self.scope.members()
            self.scope.kill_all(self.tree_snapshot)
            if self.status is None:
                self._reap()
            self.scope.reap(self.tree_snapshot)
            raise
        finally:
            self.unseen = self.scope.unseen()
            self.scope.close()
            if sampler is not None:
                stop_at = time.perf_counter_ns()
                sampler.stop(join_s=_SAMPLER_JOIN_S)
                self.sampler_stop_ns = time.perf_counter_ns() - stop_at
            if wake is not None and isinstance(self.cancel, CancelEvent):
                self.cancel._unsubscribe(wake)
            os.close(exit_fd)
            if exit_waiter is not None:
                exit_waiter.join(0.1)
            for fd in list(loop.pipes):
                loop.pipes.pop(fd)
            self.proc.stdout.close()
            self.proc.stderr.close()
            self.out_log.close()
            if self.err_log is not self.out_log:
                self.err_log.close()
        return self._outcome(sampler, gpu_reason, monitor)

    def _event_loop(self, loop: _Loop, exit_fd: int, monitor: HangMonitor | None) -> None:
        spec = self.spec
        deadline = self.t0 + spec.timeout_s if spec.timeout_s is not None else None
        term_deadline: float | None = None
        plain_cancel = self.cancel is not None and not isinstance(self.cancel, CancelEvent)
        while not loop.leader_exited:
            now = time.monotonic()
            refresh = self.scope.next_refresh()
            if refresh is not None and now >= refresh:
                self.scope.refresh()
            if self.kill_reason is None:
                if self.cancel is not None and self.cancel.is_set():
                    self.kill_reason = "cancel"
                elif deadline is not None and now >= deadline:
                    self.kill_reason = "timeout"
                elif monitor is not None and now >= monitor.next_check:
                    report = self.hang_watch.time(monitor.check, now)
                    if report is not None:
                        self.kill_reason = "hang"
                        self.hang_report = report
                if self.kill_reason is not None:
                    self.stopped_at = now
                    self.tree_snapshot = self.scope.members()
                    self._signal_tree(_signal.SIGTERM)
                    term_deadline = now + spec.kill_grace_s
            elif term_deadline is not None and (now >= term_deadline
                                                or getattr(self.cancel, "now", False)):
                self.tree_snapshot |= self.scope.members()
                self.scope.kill_all(self.tree_snapshot)
                self.kill_escalated = True
                term_deadline = None

            wait_until = [t for t in (term_deadline, self.scope.next_refresh()) if t is not None]
            if self.kill_reason is None:
                if deadline is not None:
                    wait_until.append(deadline)
                if monitor is not None:
                    wait_until.append(monitor.next_check)
            timeout_ms: int | None = None
            if wait_until:
                timeout_ms = max(0, int((min(wait_until) - now) * 1000) + 1)
            if plain_cancel and self.kill_reason is None:
                cap = int(_PLAIN_EVENT_POLL_S * 1000)
                timeout_ms = cap if timeout_ms is None else min(timeout_ms, cap)

            if timeout_ms is not None:
                timeout_ms = min(timeout_ms, 2**31 - 1)  # poll(2) takes an int: ~24.8 days at most
            for fd, _mask in loop.poller.poll(timeout_ms):
                if fd == exit_fd:
                    loop.leader_exited = True
                    self.marks.setdefault("exited", time.monotonic_ns())
                elif fd in loop.pipes:
                    if self._read(loop, fd) and monitor is not None:
                        monitor.note_output(time.monotonic())
                else:  # the cancel wake-up pipe
                    with contextlib.suppress(OSError):
                        os.read(fd, 4096)

    # -- pieces ------------------------------------------------------------------------------

    def _read(self, loop: _Loop, fd: int) -> bool:
        """Read what is there; on EOF stop watching the pipe. True when bytes arrived."""
        got = False
        while True:
            try:
                data = os.read(fd, _READ_CHUNK)
            except BlockingIOError:
                return got
            except OSError:
                data = b""
            if not data:
                loop.poller.unregister(fd)
                loop.pipes.pop(fd)
                return got
            loop.pipes[fd].write(data)
            got = True
            if len(data) < _READ_CHUNK:
                return got

    def _drain(self, loop: _Loop, *, until_eof: bool) -> None:
        """Read the rest of the output. ``until_eof`` waits (bounded) for writers to close."""
        for fd in list(loop.pipes):
            self._read(loop, fd)
        if not until_eof:
            return
        end = time.monotonic() + _STRAY_DRAIN_S
        while loop.pipes:
            left = end - time.monotonic()
            if left <= 0:
                break  # held open by a process outside the tree; keep what we have
            for fd, _mask in loop.poller.poll(int(left * 1000) + 1):
                if fd in loop.pipes:
                    self._read(loop, fd)

    def _exit_notifier(self) -> tuple[int, threading.Thread | None]:
        """A file descriptor that becomes readable when the child exits (it is not reaped)."""
        try:
            return os.pidfd_open(self.pid), None
        except (AttributeError, OSError):
            pass
        # Kernels before 5.3: a thread waits without reaping and writes to a pipe.
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)

        def wait_exit() -> None:
            with contextlib.suppress(ChildProcessError):
                os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            os.write(write_fd, b"x")
            os.close(write_fd)

        thread = threading.Thread(target=wait_exit, name=f"exit-wait-{self.pid}", daemon=True)
        thread.start()
        return read_fd, thread

    def _reap(self) -> None:
        while True:
            try:
                _pid, status, rusage = os.wait4(self.pid, 0)
            except InterruptedError:
                continue
            except ChildProcessError:
                return
            self.status, self.rusage = status, rusage
            # Keep Popen consistent (no "still running" warning when it is collected).
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            return

    def _signal_tree(self, sig: int) -> None:
        self.scope.signal(sig, self.tree_snapshot)

    def _end_strays(self) -> None:
        """After the main process exited: end whatever of the trial still runs."""
        if not self.scope.any_left() and not self.tree_snapshot:
            return  # the fast path: one syscall (a read of cgroup.procs with a cgroup)
        live = self.scope.members() - {self.pid}
        live |= {p for p in self.tree_snapshot if p != self.pid and proctree.is_alive(p)}
        if live:
            if self.kill_reason is None:
                self.killed_strays = True
            self.tree_snapshot |= live
            self._signal_tree(_signal.SIGTERM)
            live = _wait_dead(live, self.spec.kill_grace_s, reap=self.scope.reap)
            if live:
                self.tree_snapshot |= live | (self.scope.members() - {self.pid})
                self.scope.kill_all(self.tree_snapshot)
                self.kill_escalated = True
                live = _wait_dead(live, 1.0, reap=self.scope.reap)
        self.scope.reap(self.tree_snapshot)
        if self.spec.launcher is not None:  # a warm orchestrator is a subreaper: orphans are ours
            for pid in self.tree_snapshot - {self.pid}:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
        self.survivors = {p for p in (self.scope.members() | live) if p != self.pid}

    def _start_gpu_sampler(self) -> tuple[gpu_probe.GpuSampler | None, str | None]:
        if not self.spec.sample_gpu:
            return None, "GPU sampling switched off for this trial"
        reason = gpu_probe.sampling_unavailable()
        if reason is not None:
            return None, reason
        sampler = gpu_probe.GpuSampler(
            self.pid,
            interval_s=self.spec.gpu_sample_interval_s,
            first_after_s=self.spec.gpu_first_sample_s,
            want_utilisation=bool(self.spec.hang and self.spec.hang.wants_gpu),
        )
        sampler.start()
        return sampler, None

    def _hang_monitor(
        self, sampler: gpu_probe.GpuSampler | None, gpu_reason: str | None
    ) -> HangMonitor | None:
        if self.spec.hang is None:
            return None
        return HangMonitor(
            self.spec.hang, self.pid, self.t0, gpu=sampler, gpu_unavailable=gpu_reason
        )

    def _outcome(
        self,
        sampler: gpu_probe.GpuSampler | None,
        gpu_reason: str | None,
        monitor: HangMonitor | None,
    ) -> ProcessOutcome:
        ended = time.monotonic()
        exit_code = sig = None
        core = False
        if self.status is not None:
            if os.WIFSIGNALED(self.status):
                sig = os.WTERMSIG(self.status)
                core = os.WCOREDUMP(self.status)
            elif os.WIFEXITED(self.status):
                exit_code = os.WEXITSTATUS(self.status)
        if sampler is not None:
            gpu_peak, gpu_reason, gpu_source = sampler.result()
            counters, counters_reason = sampler.counters_delta, sampler.counters_reason
        else:
            gpu_peak, gpu_source = None, None
            counters, counters_reason = None, gpu_reason
        log_errors = [e for e in (self.out_log.error, self.err_log.error) if e]
        peak_rss, rss_reason = self._peak_rss()
        return ProcessOutcome(
            pid=self.pid,
            exit_code=exit_code,
            signal=sig,
            core_dumped=core,
            timed_out=self.kill_reason == "timeout",
            cancelled=self.kill_reason == "cancel",
            hang=self.hang_report,
            exec_error=None,
            wall_s=ended - self.t0,
            started_at=self.started_at,
            ended_at=self.started_at + (ended - self.t0),
            peak_rss_kb=peak_rss,
            peak_rss_reason=rss_reason,
            gpu_peak_mem_bytes=gpu_peak,
            gpu_mem_reason=gpu_reason,
            stdout_bytes=self.out_log.total,
            stderr_bytes=0 if self.err_log is self.out_log else self.err_log.total,
            truncated=self.out_log.truncated or self.err_log.truncated,
            gpu_mem_source=gpu_source,
            gpu_counters_delta=counters,
            gpu_counters_reason=counters_reason,
            killed_strays=self.killed_strays,
            kill_escalated=self.kill_escalated,
            log_error="; ".join(log_errors) or None,
            hang_note=monitor.cannot_fire() if monitor is not None else None,
            containment=self.scope.mechanism,
            containment_reason=self.scope.reason,
            timeout_s=self.spec.timeout_s,
            stopped_at_s=None if self.stopped_at is None else self.stopped_at - self.t0,
            killed_count=len((self.tree_snapshot | {self.pid}) - self.survivors)
            if self.tree_snapshot or self.kill_reason else 0,
            survivors=sorted(self.survivors) if self.survivors or self.unseen is None else None,
            survivors_reason=self.unseen,
            marks=dict(self.marks),
            beside=self._beside(sampler, gpu_reason, monitor),
        )

    def _beside(self, sampler: gpu_probe.GpuSampler | None, gpu_reason: str | None,
                monitor: HangMonitor | None) -> dict[str, Any]:
        """What ran next to the trial in this process, and what it cost."""
        out: dict[str, Any] = {}
        if sampler is None:
            out["gpu_sampler"] = {"ran": False, "reason": gpu_reason}
        else:
            out["gpu_sampler"] = {**sampler.costs(), "stop_wait_ms": round(self.sampler_stop_ns / 1e6, 3)}
        if monitor is None:
            out["hang_monitor"] = {"ran": False, "reason": "hang detection is off for this trial"}
        else:
            out["hang_monitor"] = {**self.hang_watch.to_dict(), "where": "the orchestrator's event loop"}
        return out


    def _peak_rss(self) -> tuple[int | None, str | None]:
        if self.rusage is None:
            return None, "the process was not reaped by this worker"
        maxrss = int(self.rusage.ru_maxrss)
        if self.parent_hwm_kb is None:
            return None, "the orchestrator's own peak RSS is unknown (/proc/self/status unreadable)"
        if maxrss <= self.parent_hwm_kb:
            return None, (
                f"at most {self.parent_hwm_kb} KiB: {self.rss_floor_who}, "
                "and the trial did not exceed it"
            )
        return maxrss, None


def peak_rss_kb(pid: int | str = "self") -> int | None:
    """A process's peak resident set (VmHWM, KiB), or None when /proc cannot say."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _wait_dead(
    pids: set[int], timeout_s: float, reap: Callable[[set[int]], None] | None = None
) -> set[int]:
    """Wait (on pidfds, no sleeping) until ``pids`` are dead or ``timeout_s`` passed.

    A zombie counts as dead. ``reap`` then collects those that are the orchestrator's own
    children (re-parented orphans), or they would stay zombies until it exits.
    """
    poller = select.poll()
    fds: dict[int, int] = {}
    alive: set[int] = set()
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            if proctree.is_alive(pid):
                alive.add(pid)
            continue
        fds[fd] = pid
        poller.register(fd, select.POLLIN)
    end = time.monotonic() + timeout_s
    try:
        while fds:
            left = end - time.monotonic()
            if left <= 0:
                break
            for fd, _mask in poller.poll(int(left * 1000) + 1):
                poller.unregister(fd)
                os.close(fd)
                fds.pop(fd)
    finally:
        for fd in fds:
            os.close(fd)
    if reap is not None:
        reap(pids)
    return alive | set(fds.values())


def _exec_failed(
    spec: ProcessSpec,
    reason: str,
    started_at: float,
    t0: float,
    out_log: _BoundedLog,
    err_log: _BoundedLog,
) -> ProcessOutcome:
    out_log.close()
    if err_log is not out_log:
        err_log.close()
    wall = time.monotonic() - t0
    return ProcessOutcome(
        pid=None, exit_code=None, signal=None, core_dumped=False, timed_out=False,
        cancelled=False, hang=None, exec_error=reason, wall_s=wall, started_at=started_at,
        ended_at=started_at + wall, peak_rss_kb=None, gpu_peak_mem_bytes=None,
        gpu_mem_reason="the command did not start", stdout_bytes=0, stderr_bytes=0,
        peak_rss_reason="the command did not start",
        truncated=False,
    )  # fmt: skip


def _describe_exec_error(exc: BaseException, spec: ProcessSpec) -> str:
    cmd = spec.argv[0]
    if isinstance(exc, OSError):
        if exc.filename is not None and str(exc.filename) == str(spec.cwd):
            return f"working directory {spec.cwd} cannot be used: {exc.strerror}"
        if exc.errno == errno.ENOENT:
            if "/" in cmd:
                return f"command not found: {cmd} does not exist"
            path = spec.env.get("PATH")
            where = f"PATH={path}" if path is not None else "PATH is not set in its environment"
            return f"command not found: {cmd!r} is not on the trial's PATH ({where})"
        if exc.errno == errno.EACCES:
            return f"cannot execute {cmd}: permission denied (not executable, or a directory)"
        if exc.errno == errno.ENOEXEC:
            return f"cannot execute {cmd}: exec format error (a script without a #! line?)"
        return f"cannot execute {cmd}: {exc.strerror or exc}"
    return f"cannot execute {cmd}: {exc}"
