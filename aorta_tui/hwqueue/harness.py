"""The stream harness: issue a workload's launches on N streams and time every one.

Public API::

    raw = execute(QueueRunConfig(workload="hetero_kernels", streams=8, device="cuda"),
                  on_event=callback)               # -> RawRun

A whole run (the result document, written) is :func:`aorta_tui.hwqueue.run.run_queue`.

Timing modes (``docs/hwqueue.md``):

* ``events``: one pass; per launch a device event before and after the call on the launch's
  stream and the host clock around the call.
* ``cupti``: the same pass under ``torch.profiler``; kernel-level figures come from the
  profiler's kernel records, the events of the same pass are kept for comparison.
* ``auto`` (default): two passes over the same workload. A *measure* pass issues the launches
  the way a hand-written loop would (one end event per stream per iteration, no per-launch
  instrumentation) and gives throughput and iteration latency; a *detail* pass then times every
  launch (profiler kernel records on a GPU when available, events otherwise) and gives the
  per-launch figures. Each summary figure names the pass it came from.

With ``graph`` (``--graph``) both passes replay CUDA/HIP graphs captured after the warm-up
(:mod:`aorta_tui.hwqueue.graphs`), and every GPU run measures the eager and graph-replay floors
of its own launches once, before the measured passes.

Everything is computed afterwards from the recorded timestamps by
:mod:`aorta_tui.hwqueue.metrics`. torch is imported only when a run starts.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.core.events import Event, Progress, RunWarning
from aorta_tui.core.phases import PAUSE
from aorta_tui.core.phases import announce as announce_phase
from aorta_tui.hwqueue.graphs import declared_kernels
from aorta_tui.hwqueue.metrics import LaunchRecord
from aorta_tui.hwqueue.workloads.base import DTYPES, Launch, QueueWorkloadContext

if TYPE_CHECKING:
    from aorta_tui.hwqueue.backends import Backend, EventHandle, StreamHandle
    from aorta_tui.hwqueue.cupti import ProfilerCapture
    from aorta_tui.hwqueue.workloads.base import QueueWorkload
    from aorta_tui.trace.device.attach import DeviceSide
    from aorta_tui.trace.session import TraceSession

SYNC_MODES = ("per_iteration", "end_only", "none")
TIMINGS = ("auto", "events", "cupti")
# default: every stream at the default priority; lc: latency-critical streams at the highest
STREAM_PRIORITIES = ("default", "lc")
EventCallback = Callable[[Event], None]


SIZES = ("auto", "default", "tiny")


def resolve_size(size: str, device: str, devices: list[str] | None = None) -> str:
    """``auto`` (the command line's default): ``tiny`` on a CPU, ``default`` on a GPU. A
    CPU-emulated run of the default sizes took 21 minutes for 8 streams of hetero_kernels;
    tiny takes seconds and measures the same things."""
    if size not in SIZES:
        raise UsageError(f"unknown size {size!r}", hint="use --size auto, default or tiny")
    if size != "auto":
        return size
    first = (devices or [device])[0].strip().lower()
    return "tiny" if first.split(":")[0] == "cpu" else "default"


@dataclass
class QueueRunConfig:
    workload: str
    streams: int
    iterations: int = 50
    warmup: int = 5
    device: str = "cuda"
    devices: list[str] | None = None  # spread streams round-robin over these
    sync_mode: str = "per_iteration"
    dtype: str = "float32"
    size: str = "default"  # default or tiny
    params: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    ebpf_trace: bool = False
    keep_timeline: bool = False  # put every LaunchRecord into the result (large)
    timing: str = "auto"  # see TIMINGS and the module docstring
    detail_iterations: int = 20  # auto: iterations of the detail pass (at most --iterations)
    profiler_trace: str | None = None  # write the profiler's chrome trace here (cupti / auto)
    stream_priority: str = "default"  # see STREAM_PRIORITIES
    graph: bool = False  # capture each stream's iteration as a CUDA/HIP graph and replay it

    def validate(self) -> None:
        from aorta_tui.hwqueue.backends import resolve_devices
        from aorta_tui.hwqueue.workloads import check_streams, workload_class

        if self.ebpf_trace and self.timing == "cupti":
            # both need CUPTI inside this one process for the measured pass, and CUPTI allows one
            # subscriber: the trace's collector holds it, so the harness's profiler would record
            # nothing (it used to end in exit 70, "the profiler recorded no device activity")
            raise UsageError(
                "--timing cupti with --ebpf-trace cannot work: both read the GPU's kernel timestamps "
                "through CUPTI in this one process during the measured pass, and CUPTI allows one "
                "subscriber (the trace's collector holds it, so the harness's profiler would get nothing)",
                hint="use --timing auto with --ebpf-trace (the profiler's detail pass runs after the "
                     "trace, which gives CUPTI back; the trace itself has launch_to_start from CUPTI), "
                     "or --timing cupti without --ebpf-trace")

        check_streams(self.workload, self.streams)
        workload_class(self.workload)(self.params, size=self.size)  # parameter names and types
        _, devs = resolve_devices(self.device, self.devices)
        if len(set(devs)) > 1 and not workload_class(self.workload).independent_streams:
            raise UsageError(
                f"workload {self.workload!r} passes tensors between its streams, so its streams "
                "cannot be spread over several devices",
                hint="drop --devices for it; hetero_kernels, tiny_kernel_stress, large_gemm_only, "
                "graph_subgraphs and torch_compile can be spread")
        if self.iterations < 1:
            raise UsageError(f"--iterations must be at least 1, not {self.iterations}")
        if self.warmup < 0:
            raise UsageError(f"--warmup must be 0 or more, not {self.warmup}")
        if self.sync_mode not in SYNC_MODES:
            raise UsageError(f"unknown sync mode {self.sync_mode!r}",
                             hint=f"use one of {', '.join(SYNC_MODES)}")
        if self.ebpf_trace and devs == ["cpu"]:
            raise UsageError("--ebpf-trace traces the CUDA runtime of a GPU run; a --device cpu "
                             "run has nothing to trace", hint="drop --ebpf-trace or use --device cuda")
        if self.timing not in TIMINGS:
            raise UsageError(f"unknown timing {self.timing!r}",
                             hint="use --timing auto, events or cupti")
        if self.detail_iterations < 1:
            raise UsageError(f"--detail-iterations must be at least 1, not {self.detail_iterations}")
        if self.profiler_trace and (self.timing == "events" or devs == ["cpu"]):
            raise UsageError("--profiler-trace writes the profiler's kernel trace of a GPU run with "
                             "--timing auto or cupti; this run records none",
                             hint="drop --profiler-trace, or use --device cuda without --timing events")
        if self.timing == "cupti" and devs == ["cpu"]:
            raise UsageError("--timing cupti reads GPU kernel timestamps; a --device cpu run has none",
                             hint="drop --timing cupti or use --device cuda")
        if self.stream_priority not in STREAM_PRIORITIES:
            raise UsageError(f"unknown stream priority {self.stream_priority!r}",
                             hint="use --stream-priority default or lc (latency-critical streams "
                             "at the highest priority)")
        if self.dtype not in DTYPES:
            raise UsageError(f"unknown dtype {self.dtype!r}", hint=f"use one of {', '.join(DTYPES)}")
        if self.graph:
            check_graph(self.workload, workload_class(self.workload)(self.params, size=self.size),
                        devs)


def check_graph(name: str, workload: QueueWorkload, devs: list[str],
                env: Mapping[str, str] | None = None) -> None:
    """``--graph`` is refused before any work when it cannot mean what it says."""
    env = os.environ if env is None else env
    if devs == ["cpu"]:
        raise UsageError("--graph captures CUDA/HIP graphs, and a --device cpu run emulates its "
                         "streams on the host: there is no device to capture on",
                         hint="drop --graph, or use --device cuda on a GPU machine")
    reason = workload.graph_unsupported_reason()
    if reason is not None:
        raise UsageError(f"--graph: workload {name!r} cannot be captured as a CUDA/HIP graph: "
                         f"{reason}", hint="run it without --graph; `queue list --json` says "
                         "which workloads can be captured (graph_unsupported: null)")
    blocking = env.get("CUDA_LAUNCH_BLOCKING", "").strip()
    if blocking not in ("", "0"):
        raise UsageError(f"--graph conflicts with CUDA_LAUNCH_BLOCKING={blocking}: stream capture "
                         "records launches without running them, which launch-blocking mode "
                         "forbids, and a blocking replay would measure neither setting",
                         hint="unset CUDA_LAUNCH_BLOCKING (in a policy sweep: do not combine the "
                         "cuda_graphs and cuda_launch_blocking settings in one policy) or drop "
                         "--graph")


@dataclass
class MeasurePass:
    """The uninstrumented pass of ``--timing auto``: when each iteration began (host) and ended
    (latest device end marker over the streams it used)."""

    iteration_starts_ns: list[float]
    iteration_ends_ns: list[float]
    end_ns: float
    issue_ends_ns: list[float] = field(default_factory=list)  # host clock after the last launch


@dataclass
class RawRun:
    """What the timed loop produced, before metrics: the input of :func:`result.build_result`.

    ``records``, ``iteration_starts_ns`` and ``end_ns`` belong to the pass that timed every
    launch (the only pass, or the detail pass of ``auto``); ``measure`` is the measure pass.
    """

    records: list[LaunchRecord]
    iteration_starts_ns: list[float]
    end_ns: float
    work_per_iteration: float
    clock_uncertainty_ns: float | None
    memory: dict[str, Any] | None
    memory_reason: str | None
    platform: dict[str, Any]
    stream_devices: list[str]
    emulated: bool
    device_clock: str
    params: dict[str, Any]
    ebpf: dict[str, Any] | None = None
    ebpf_reason: str | None = None
    # with kernel timestamps: the event-based launch records of the same pass, and capture counts
    event_records: list[LaunchRecord] | None = None
    profiler_info: dict[str, Any] | None = None
    # why the workload's work cannot give a throughput (None: it can)
    throughput_reason: str | None = None
    # the priority each stream reports having (None: not readable, see priority_info["reason"])
    stream_priorities: list[int | None] = field(default_factory=list)
    priority_info: dict[str, Any] = field(default_factory=dict)
    measure: MeasurePass | None = None
    # where the per-launch records come from: "cupti", "events" or "cpu", and why not cupti
    detail_source: str = "events"
    detail_reason: str | None = None
    # --graph: how the iteration was captured (graphs.capture's info); None: eager launches
    graph: dict[str, Any] | None = None
    # the bare-loop and graph-replay floors of the workload's launch calls (graphs.measure_floors)
    floors: dict[str, Any] = field(default_factory=dict)
    launches_per_iteration: int = 0  # the workload's launch calls per iteration
    kernels_declared: int | None = None  # kernels they declare per iteration (None: unknown)


@dataclass
class _Loop:
    """What one run of the loop needs: the pieces set up once by :func:`execute`."""

    cfg: QueueRunConfig
    backend: Backend
    streams: list[StreamHandle]
    stream_devices: list[str]
    workload: QueueWorkload
    emit: EventCallback
    total: int  # progress total over all passes
    done: int = 0
    next_iteration: int = 0  # index passed to workload.iteration(); continues across passes
    replay: list[Launch] | None = None  # --graph: the launches that replay the captured graphs

    def plan(self, index: int) -> list[Launch]:
        return self.replay if self.replay is not None else self.workload.iteration(index)


def execute(cfg: QueueRunConfig, on_event: EventCallback | None = None) -> RawRun:
    """Set up the workload, warm up, run the measured pass(es), collect raw timestamps."""
    # --ebpf-trace: the CUPTI collector must be loaded before this process initialises CUDA,
    # so the trace of the measured pass has GPU start times (launch_to_start), live
    device_side = _device_side(cfg)
    try:
        return _execute(cfg, on_event, device_side)
    finally:
        # the trace's session stopped it already, unless the run failed before or without the
        # trace (no GPU, bpftrace refused): its FIFO and folder (aorta-cupti-*) go either way
        if device_side is not None:
            device_side.stop()


def _execute(cfg: QueueRunConfig, on_event: EventCallback | None, device_side: DeviceSide | None) -> RawRun:
    from aorta_tui.hwqueue.backends import select_backend
    from aorta_tui.hwqueue.workloads import workload_class

    emit = on_event or (lambda _e: None)
    backend = select_backend(cfg.device, cfg.devices)
    torch = backend.torch
    stream_devices = [backend.devices[i % len(backend.devices)] for i in range(cfg.streams)]
    workload = workload_class(cfg.workload)(cfg.params, size=cfg.size)
    ctx = QueueWorkloadContext(torch=torch, dtype=getattr(torch, cfg.dtype),
                          stream_devices=stream_devices, backend=backend.name)
    workload.setup(ctx)
    latency_critical = workload.latency_critical_streams(cfg.streams)
    boosted = set(latency_critical) if cfg.stream_priority == "lc" else set()
    streams = backend.make_streams(stream_devices, high_priority=boosted)
    priority_info = _priority_info(cfg, backend, workload, latency_critical, stream_devices)
    detail_n = min(cfg.iterations, cfg.detail_iterations) if cfg.timing == "auto" else cfg.iterations
    loop = _Loop(cfg, backend, streams, stream_devices, workload, emit,
                 total=detail_n + (cfg.iterations if cfg.timing == "auto" else 0))
    try:
        eager_plan, graph_info, floors, uncertainty = _warm_up(loop)
        measure, detail, ebpf, ebpf_reason = _measured_passes(loop, detail_n, on_event, device_side)
        if detail.clock_uncertainty_ns is not None and measure is None:
            # latency then comes from kernel records on the profiler's clock; with a measure
            # pass it comes from events, so the event anchor's uncertainty stays
            uncertainty = detail.clock_uncertainty_ns
        memory, memory_reason = backend.memory()
        platform_info = backend.platform_info()
        platform_info["distributed"] = _distributed_info(torch)
        platform_info["pid"] = os.getpid()  # which process measured it (sweeps, --repeat)
        return RawRun(
            records=detail.records, iteration_starts_ns=detail.starts, end_ns=detail.end_ns,
            work_per_iteration=float(workload.work_per_iteration()),
            throughput_reason=workload.throughput_unavailable(),
            clock_uncertainty_ns=uncertainty, memory=memory, memory_reason=memory_reason,
            platform=platform_info, stream_devices=stream_devices,
            emulated=backend.emulated, device_clock=detail.device_clock,
            params=dict(workload.params), ebpf=ebpf, ebpf_reason=ebpf_reason,
            event_records=detail.event_records, profiler_info=detail.profiler_info,
            stream_priorities=[backend.read_priority(s) for s in streams],
            priority_info=priority_info, measure=measure,
            detail_source="cpu" if backend.emulated else detail.source,
            detail_reason=detail.reason, graph=graph_info, floors=floors,
            launches_per_iteration=len(eager_plan), kernels_declared=declared_kernels(eager_plan),
        )
    finally:
        workload.cleanup()


def _warm_up(loop: _Loop) -> tuple[list[Launch], dict[str, Any] | None, dict[str, Any], float | None]:
    """The warm-up iterations, then (--graph) the capture, the floors and the clock anchor.
    Returns the eager plan, the graph info, the floors and the clock's uncertainty."""
    cfg, backend, streams, workload = loop.cfg, loop.backend, loop.streams, loop.workload
    announce_phase("warm-up")  # a watching tracer leaves intervals across phases out
    for i in range(cfg.warmup):
        plan = workload.iteration(i)
        _issue(backend, streams, plan, _new_events(backend, loop.stream_devices, plan))
        if cfg.sync_mode == "per_iteration":
            backend.synchronize()
    backend.synchronize()
    eager_plan = workload.iteration(cfg.warmup)
    graph_info = None
    if cfg.graph:
        from aorta_tui.hwqueue.graphs import capture

        captured = capture(backend, streams, eager_plan)
        loop.replay, graph_info = captured.plan, captured.info
    floors = _floors(cfg, backend, workload, eager_plan, loop.stream_devices)
    announce_phase(PAUSE)
    loop.next_iteration = cfg.warmup
    loop.emit(Progress(cfg.run_id, done=0, total=loop.total, message="warm-up done"))
    backend.reset_memory()
    uncertainty = backend.calibrate()
    return eager_plan, graph_info, floors, uncertainty


def _measured_passes(loop: _Loop, detail_n: int, on_event: EventCallback | None,
                     device_side: DeviceSide | None) -> tuple[MeasurePass | None, _Detail, dict[str, Any] | None, str | None]:
    """The measure pass (--timing auto) and the detail pass, the eBPF trace over the one that
    gives the headline figures; returns both passes and the trace's result (or why not)."""
    cfg, backend = loop.cfg, loop.backend
    tracer, ebpf_reason = _ebpf_session(cfg, on_event, device_side)
    measure = None
    # the eBPF trace covers the pass that gives the headline figures
    with tracer if tracer is not None else contextlib.nullcontext():
        if cfg.timing == "auto":
            measure = _measure_pass(loop)
        else:
            detail = _detail_pass(loop, detail_n, profiler=cfg.timing == "cupti", required=True)
    if cfg.timing == "auto":
        detail = _detail_pass(loop, detail_n, profiler=not backend.emulated, required=False)
    ebpf = None
    if tracer is not None:
        try:
            ebpf = tracer.result().to_json()
        except Exception as exc:  # a tracer failure must not lose the measurement
            ebpf_reason = f"eBPF session failed: {type(exc).__name__}: {exc}"
            loop.emit(RunWarning(cfg.run_id, message=ebpf_reason, code="ebpf"))
    return measure, detail, ebpf, ebpf_reason


def _floors(cfg: QueueRunConfig, backend: Backend, workload: QueueWorkload, plan: list[Launch],
            stream_devices: list[str]) -> dict[str, Any]:
    """The eager and graph floors of this run's own launches, measured once per run."""
    from aorta_tui.hwqueue.graphs import measure_floors

    graph_reason = workload.graph_unsupported_reason()
    return measure_floors(backend, plan, stream_devices, graph_reason)


def _measure_pass(loop: _Loop) -> MeasurePass:
    """Issue the iterations as a hand-written loop would and time whole iterations only.

    Every iteration is compiled beforehand into a flat tuple of pre-bound calls (stream
    switches, the waits and records its dependencies need, the launches, one end marker per
    stream), so the timed loop does one Python call per entry and nothing else per launch.
    """
    cfg, backend = loop.cfg, loop.backend
    plans = [loop.plan(loop.next_iteration + i) for i in range(cfg.iterations)]
    loop.next_iteration += cfg.iterations
    marks = [_plain_events(backend, loop.stream_devices, plan) for plan in plans]
    calls = [compile_plan(backend, loop.streams, plan, *marks[i]) for i, plan in enumerate(plans)]
    saved = backend.save_streams()
    try:
        starts, issue_ends, _, end_ns = _run_iterations(
            loop, plans, lambda i, _plan: _run_calls(calls[i]), " (measure pass)", "measure")
    finally:
        backend.restore_streams(saved)
    ends = [max(backend.event_host_ns(ev, loop.stream_devices[s]) for s, ev in stream_ends.items())
            for _sync, stream_ends in marks]
    return MeasurePass(starts, ends, end_ns, issue_ends)


def _run_calls(calls: tuple[Callable[[], Any], ...]) -> None:
    for call in calls:
        call()


def compile_plan(backend: Backend, streams: list[StreamHandle], plan: list[Launch],
                 sync: dict[int, EventHandle], ends: dict[int, EventHandle]) -> tuple[Callable[[], Any], ...]:
    """One iteration as the flat tuple of calls the measure pass makes, in issue order.

    The current stream is set only when the next launch is on another stream (a run of
    launches on one stream is one ``with torch.cuda.stream`` block of a hand-written loop);
    a launch's waits come before it, the record others wait on right after it.
    """
    calls: list[Callable[[], Any]] = []
    current: object = _NO_STREAM  # compared by identity only
    for j, la in enumerate(plan):
        stream = streams[la.stream]
        for w in la.waits:
            wait = backend.bound_wait(stream, sync[w])
            if wait is not None:
                calls.append(wait)
        if stream is not current:
            setter = backend.bound_set_stream(stream)
            if setter is not None:
                calls.append(setter)
            current = stream
        calls.append(la.fn)
        ev = sync.get(j)
        if ev is not None:
            calls.append(backend.bound_record(ev, stream))
    for s, ev in ends.items():
        calls.append(backend.bound_record(ev, streams[s]))
    return tuple(calls)


_NO_STREAM = object()
_Issued = TypeVar("_Issued")  # what a pass's issue call returns per iteration


def _run_iterations(loop: _Loop, plans: list[list[Launch]], issue: Callable[[int, list[Launch]], _Issued],
                    label: str, phase: str) -> tuple[list[float], list[float], list[_Issued], float]:
    """The loop both passes share: host clock at each iteration start, the sync mode, progress.

    Returns the start times, the host time after each iteration's last launch call, what
    ``issue`` returned per iteration, and the host time after the final synchronise."""
    cfg, backend = loop.cfg, loop.backend
    clock = time.perf_counter_ns
    starts: list[float] = []
    issued: list[float] = []
    out: list[_Issued] = []
    every = max(1, len(plans) // 20)
    announce_phase(phase)
    for i, plan in enumerate(plans):
        starts.append(float(clock()))
        out.append(issue(i, plan))
        issued.append(float(clock()))
        if cfg.sync_mode == "per_iteration":
            backend.synchronize()
        loop.done += 1
        if (i + 1) % every == 0:
            loop.emit(Progress(cfg.run_id, done=loop.done, total=loop.total,
                               message=f"{cfg.workload} x{cfg.streams} streams{label}"))
    backend.synchronize()
    end_ns = float(time.perf_counter_ns())
    announce_phase(PAUSE)
    return starts, issued, out, end_ns


@dataclass
class _Detail:
    records: list[LaunchRecord]
    starts: list[float]
    end_ns: float
    device_clock: str
    source: str  # "cupti" or "events"
    reason: str | None  # why not cupti (None when cupti)
    event_records: list[LaunchRecord] | None = None
    profiler_info: dict[str, Any] | None = None
    clock_uncertainty_ns: float | None = None  # replaces the event calibration's when set


def _detail_pass(loop: _Loop, n: int, profiler: bool, required: bool) -> _Detail:
    """Time every launch of ``n`` iterations: events, and the profiler's kernels if ``profiler``.

    ``required`` (``--timing cupti``): a profiler failure is an error. Otherwise (``auto``) the
    pass falls back to events and says why.
    """
    cfg, backend = loop.cfg, loop.backend
    plans = [loop.plan(loop.next_iteration + i) for i in range(n)]
    loop.next_iteration += n
    events = [_new_events(backend, loop.stream_devices, plan) for plan in plans]
    capture, reason = _start_capture(backend, profiler, required)
    label = " (detail pass)" if cfg.timing == "auto" else ""
    try:
        starts, _issued, host, end_ns = _run_iterations(
            loop, plans, lambda i, plan: _issue(backend, loop.streams, plan, events[i]), label,
            "detail" if cfg.timing == "auto" else "measure")
    finally:
        if capture is not None:
            capture.__exit__(None, None, None)
    records = _event_records(loop, plans, host, events)
    detail = _Detail(records, starts, end_ns, backend.device_clock, "events", reason)
    if capture is None:
        return detail
    return _with_profiler_kernels(loop, detail, capture, required)


def _start_capture(backend: Backend, profiler: bool, required: bool
                   ) -> tuple[ProfilerCapture | None, str | None]:
    """The profiler's capture, entered (None without ``profiler``, or when it could not start
    and is not ``required``), and why a pass has no kernel timestamps (None: it will have)."""
    if not profiler:
        return None, ("CPU emulation has no device kernels" if backend.emulated
                      else "--timing events: per-launch CUDA/HIP events only")
    from aorta_tui.hwqueue.cupti import ProfilerCapture

    capture = ProfilerCapture(backend.torch)
    try:
        capture.__enter__()
    except Exception as exc:
        if required:
            raise
        return None, f"the profiler could not start: {type(exc).__name__}: {exc}"
    return capture, None


def _event_records(loop: _Loop, plans: list[list[Launch]], host: list[list[tuple[int, int]]],
                   events: list[list[tuple[EventHandle, EventHandle]]]) -> list[LaunchRecord]:
    """Each launch's host call and its events' times (the host's own, under CPU emulation)."""
    backend = loop.backend
    records: list[LaunchRecord] = []
    for i, plan in enumerate(plans):
        for j, la in enumerate(plan):
            h0, h1 = host[i][j]
            e0, e1 = events[i][j]
            dev = loop.stream_devices[la.stream]
            if backend.emulated:
                g0, g1 = float(h0), float(h1)
            else:
                g0, g1 = backend.event_host_ns(e0, dev), backend.event_host_ns(e1, dev)
            records.append(LaunchRecord(i, la.stream, la.label, float(h0), float(h1), g0, g1))
    return records


def _with_profiler_kernels(loop: _Loop, detail: _Detail, capture: ProfilerCapture,
                           required: bool) -> _Detail:
    """The pass with the profiler's kernel records in place of the events' (which it keeps
    beside them), or ``detail`` with the reason they could not be used."""
    from aorta_tui.hwqueue.cupti import activity_records, estimate_offset

    cfg, records = loop.cfg, detail.records
    trace = capture.trace(keep=cfg.profiler_trace)
    try:
        offset, offset_unc = estimate_offset(trace, capture.markers)
        kernel_records, info = activity_records(trace, offset, records)
    except RuntimeError as exc:
        if required:
            raise
        detail.reason = f"the profiler trace could not be used: {exc}"
        return detail
    finally:
        del trace
    if not kernel_records:
        if required:
            _no_device_activity()
        detail.reason = f"the profiler recorded no device activity for the measured launches: {_why_no_activity()}"
        return detail
    if info["implausible_timestamps_dropped"]:
        loop.emit(RunWarning(cfg.run_id, code="profiler", message=(
            f"dropped {info['implausible_timestamps_dropped']} profiler kernel records that start "
            "before their own launch call (a known CUPTI clock fault); figures use the rest")))
    info["clock_offset_ns"] = offset  # profiler clock minus perf_counter_ns
    info["clock_offset_uncertainty_us"] = offset_unc / 1e3
    if cfg.profiler_trace:
        info["trace_file"] = str(cfg.profiler_trace)
    return _Detail(kernel_records, detail.starts, detail.end_ns,
                   "cupti (torch.profiler kernel timestamps, one record per kernel)", "cupti", None,
                   event_records=records, profiler_info=info, clock_uncertainty_ns=offset_unc)


def _priority_info(cfg: QueueRunConfig, backend: Backend, workload: QueueWorkload,
                   latency_critical: tuple[int, ...], stream_devices: list[str]) -> dict[str, Any]:
    """What ``--stream-priority`` asked for, whether it changed anything, and if not, why."""
    highest = backend.highest_priority(stream_devices[0])
    reason: str | None = None
    if cfg.stream_priority == "default":
        reason = "not requested (--stream-priority default): every stream has the default priority"
    elif backend.emulated:
        reason = ("not applied: CPU emulation has no streams, so no stream priorities "
                  "(emulated run)")
    elif not latency_critical:
        reason = (f"not applied: workload {cfg.workload!r} declares no latency-critical streams, "
                  "so every stream kept the default priority")
    return {
        "requested": cfg.stream_priority,
        "applied": reason is None,
        "latency_critical_streams": list(latency_critical),
        "latency_critical_role": type(workload).latency_critical_role,
        "highest_priority": highest,
        "priority_source": backend.priority_source,
        "reason": reason,
    }


def _new_events(backend: Backend, stream_devices: list[str],
                plan: list[Launch]) -> list[tuple[EventHandle, EventHandle]]:
    return [(backend.new_event(stream_devices[la.stream]), backend.new_event(stream_devices[la.stream]))
            for la in plan]


def _issue(backend: Backend, streams: list[StreamHandle], plan: list[Launch],
           events: list[tuple[EventHandle, EventHandle]]) -> list[tuple[int, int]]:
    """Issue one iteration's launches, each between two events and two host clock reads.

    A launch's ``waits`` make its stream wait for the end event of earlier launches.
    """
    clock = time.perf_counter_ns
    host: list[tuple[int, int]] = []
    for j, la in enumerate(plan):
        stream = streams[la.stream]
        for w in la.waits:
            backend.wait(stream, events[w][1])
        e0, e1 = events[j]
        with backend.stream_context(stream):
            backend.record(e0, stream)
            h0 = clock()
            la.fn()
            h1 = clock()
            backend.record(e1, stream)
        host.append((h0, h1))
    return host


def _plain_events(backend: Backend, stream_devices: list[str],
                  plan: list[Launch]) -> tuple[dict[int, EventHandle], dict[int, EventHandle]]:
    """Events of a measure-pass iteration: one per launch that others wait on, one end marker
    per stream the iteration uses."""
    needed = {w for la in plan for w in la.waits}
    sync = {j: backend.new_event(stream_devices[plan[j].stream]) for j in sorted(needed)}
    ends = {s: backend.new_event(stream_devices[s]) for s in sorted({la.stream for la in plan})}
    return sync, ends


def _why_no_activity() -> str:
    injected = os.environ.get("CUDA_INJECTION64_PATH")
    if injected:
        return (f"CUDA_INJECTION64_PATH={injected} loads another CUPTI client into this process, and CUPTI "
                "allows one subscriber")
    return ("CUPTI gave the profiler nothing (another CUPTI client in this process, or a torch build without "
            "CUPTI / roctracer)")


def _no_device_activity() -> None:
    """--timing cupti, and its profiler got no kernel record: an environment problem (exit 3)
    with the likeliest reason, never an internal error. CUPTI allows one subscriber per process:
    a tool injected through CUDA_INJECTION64_PATH (aorta-tui's own collector under `trace queue
    -- aorta-tui queue run ...`, Nsight Systems) holds it and the profiler records nothing."""
    raise EnvironmentProblem(f"--timing cupti: the profiler recorded no device activity for the measured "
                             f"launches: {_why_no_activity()}",
                             hint="run without the other tool (e.g. trace with `trace queue --device-timestamps "
                                  "off`), or use --timing events")


def _device_side(cfg: QueueRunConfig) -> DeviceSide | None:
    if not cfg.ebpf_trace:
        return None
    from aorta_tui.trace.device.attach import prepare_this_process

    return prepare_this_process("auto")


def _ebpf_session(cfg: QueueRunConfig, on_event: EventCallback | None,
                  device_side: DeviceSide | None = None) -> tuple[TraceSession | None, str | None]:
    """The tracing engine's session over the measured loop, when asked for.

    Asked for but impossible here (no bpftrace, no privilege, no CUDA runtime mapped) raises
    the session's own typed error: the user asked for a trace, a run without one would mislead.
    """
    if not cfg.ebpf_trace:
        return None, "not requested (--ebpf-trace)"
    # Imported here, not at the top: the trace engine is only needed when a trace is asked for.
    from aorta_tui.trace.session import TraceSession

    return TraceSession(probes=["cuda"], pid=os.getpid(), mode="events", on_event=on_event,
                       run_id=cfg.run_id, device_side=device_side), None


def _distributed_info(torch: ModuleType) -> dict[str, Any] | None:
    """Rank, world size and backend when this run is one rank of a torch.distributed job."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size(),
            "backend": str(dist.get_backend())}
