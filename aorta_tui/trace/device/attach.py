"""The device half of a trace session: decide, build, inject, read, join.

``DeviceSide.prepare`` runs before the traced command starts (the collector must be in its
environment when CUDA starts up); ``bind`` hooks the join to the session's metric statistics
once the bpftrace program is rendered; ``stop`` reads the last records and counts what never
matched. Where the collector cannot run, the session keeps its launch-only histograms and the
result says why (``--device-timestamps on`` makes that an error instead, exit 3).

``$AORTA_CUPTI_COLLECTOR=/path/libaorta_cupti.so`` skips the build and injects that library
(a collector built beforehand, e.g. on a machine without a compiler; the tests' fake one).
For the ``hip`` sets the collector is ``rocprof_collector.c`` (rocprofiler-sdk, loaded through
``ROCP_TOOL_LIBRARIES``; ``$AORTA_ROCPROF_COLLECTOR`` for a prebuilt one): it has never run on
AMD hardware, so only ``--device-timestamps on`` loads it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.core.inputs import Json
from aorta_tui.trace.device.records import Parsed
from aorta_tui.trace.metrics import Metric

if TYPE_CHECKING:  # the collector's build, channel and join load only where it is prepared; the rest
    # are the session's types, named here for the seams it binds
    from aorta_tui.trace.device.build import BuildResult
    from aorta_tui.trace.device.channel import DeviceChannel
    from aorta_tui.trace.device.join import DispatchJoin
    from aorta_tui.trace.device.rocprof_build import RocprofBuildResult
    from aorta_tui.trace.parser import Batch
    from aorta_tui.trace.program import Program
    from aorta_tui.trace.stream_stats import MetricStats

MODES = ("auto", "on", "off")
LAUNCH_METRICS = ("launch", "launch_call")  # eBPF records whose entry time the join uses
TWO_CLOCK_METRICS = ("launch_to_start", "queued", "launch_host")
HIP_SETS = ("hip", "hip_calls")  # their device half is the rocprofiler-sdk collector
# Where launches come from (--launch-source): the collector's launch callback (no launch uprobe),
# the eBPF uprobe, or auto (the collector wherever it is loaded into a CUDA program of the cuda set)
# "activity" (auto's choice where the collector is loaded: issue 34): the kernel records alone,
# with CUPTI's latency timestamps; no per-launch callback and no per-launch uprobe
LAUNCH_SOURCES = ("auto", "activity", "collector", "ebpf")
PART_METRICS = ("launch_host", "launch_push", "launch_gpu_queue")
EBPF_LAUNCH_TIME = ("eBPF uprobe at the libcuda launch entry point (bpftrace nsecs, CLOCK_MONOTONIC), "
                    "on the launching thread")
COLLECTOR_LAUNCH_TIME = ("CUPTI driver-API callback at launch entry (the collector's clock_gettime, "
                         "CLOCK_MONOTONIC), on the launching thread; no uprobe on the launch path")
ACTIVITY_LAUNCH_TIME = ("CUPTI latency timestamp `queued` of the kernel's activity record (the launch "
                        "written into the command buffer; mapped onto CLOCK_MONOTONIC); no per-launch "
                        "callback or uprobe, so the launch call's entry is not seen")
DEVICE_TIME = ("CUPTI kernel activity record (device timestamps on CLOCK_MONOTONIC through "
               "cuptiActivityRegisterTimestampCallback, offset measured: see clock)")
# libcupti entry points watched in the traced program (uretprobes, a few calls per process): a
# refused subscribe or a second activity registration is the program's own profiler meeting ours
CUPTI_WATCH = ("cuptiSubscribe", "cuptiSubscribe_v2", "cuptiActivityRegisterCallbacks")
CUPTI_MULTIPLE_SUBSCRIBERS = 39
COLLECTOR_WORDING = {
    "launch": ("CUDA kernel/graph launch calls (cuLaunchKernel/Ex/cuGraphLaunch), seen by the CUPTI "
               "collector's driver-API launch callback at API entry (no uprobe)"),
    "launch_to_start": ("submit->dispatch: CUDA launch call entry (CUPTI driver-API callback, CLOCK_MONOTONIC) "
                        "-> kernel start on the GPU (CUPTI activity record, mapped onto CLOCK_MONOTONIC); a "
                        "graph launch counts to its first kernel"),
    "queued": ("kernels launched earlier on the same stream and not yet started when each launch call "
               "entered (CUPTI launch callback time against CUPTI start times)"),
}


ACTIVITY_WORDING = {
    "launch": ("CUDA kernel launches, one per kernel activity record (a graph counts once, at its first "
               "kernel), at their CUPTI `queued` time; no callback or uprobe on the launch path"),
    "launch_to_start": ("queued -> start: the launch written into the command buffer (CUPTI latency "
                        "timestamp) -> kernel start on the GPU (= launch_push + launch_gpu_queue); the "
                        "host part before `queued` needs an entry time (--cross-check or "
                        "--launch-source ebpf|collector)"),
    "queued": ("kernels launched earlier on the same stream and not yet started at each launch's "
               "`queued` time (CUPTI activity records alone)"),
}


def _looks_like_python(exe: str) -> bool:
    return os.path.basename(exe).startswith("python")



# A count of 0 from a collector that never spoke is not "no launches": the program made no CUDA
# context, or its libcuda never loaded the collector (CUDA_INJECTION64_PATH). Said as a warning.
NO_COLLECTOR_RECORDS = ("launches were not seen: no record came from the CUPTI collector (the program "
                        "created no CUDA context, or its libcuda did not load the collector); "
                        "`--launch-source ebpf` counts them with the uprobe")


@dataclass
class PrebuiltCollector:
    """A collector library given by ``$AORTA_CUPTI_COLLECTOR`` (no build): one built elsewhere
    for this machine's CUPTI, or a test's stand-in. The user vouches that it matches the CUPTI
    the program loads."""

    library: Path
    origin: str = "$AORTA_CUPTI_COLLECTOR"

    def to_dict(self) -> dict[str, object]:
        return {"library": str(self.library), "prebuilt": True, "from": self.origin}


def _prebuilt(path: str, var: str = "AORTA_CUPTI_COLLECTOR") -> PrebuiltCollector:
    lib = Path(path)
    if not lib.is_file():
        name = "libaorta_rocprof.so" if "ROCPROF" in var else "libaorta_cupti.so"
        raise EnvironmentProblem(f"{var}={path} is not a file",
                                 hint=f"point it at a built collector ({name}), or unset it to "
                                      "build one")
    return PrebuiltCollector(lib.resolve(), f"${var}")


class RawSink(Protocol):
    """Where joined values go as raw records (--raw, --perfetto): the metric's name and one
    column per field; ``tid`` only for launches from the collector (eBPF launches carry theirs)."""

    def __call__(self, name: str, ts: NDArray[np.int64], pid: NDArray[np.int64], key: NDArray[np.int64],
                 value: NDArray[np.int64], tid: NDArray[np.int64] | None = None) -> None: ...


class DeviceSide:
    def __init__(self, mode: str, *, probe_set: str, device_metrics: tuple[Metric, ...],
                 launch_source: str = "auto", cross_check: bool = False, trace_mode: str = "events") -> None:
        if mode not in MODES:
            raise UsageError(f"--device-timestamps {mode!r} is not one of {', '.join(MODES)}")
        if launch_source not in LAUNCH_SOURCES:
            raise UsageError(f"--launch-source {launch_source!r} is not one of {', '.join(LAUNCH_SOURCES)}")
        if cross_check and launch_source != "auto":
            raise UsageError(f"--cross-check takes launches from both the eBPF uprobe and the collector; "
                             f"--launch-source {launch_source} names one of them",
                             hint="drop --launch-source, or drop --cross-check")
        self.mode = mode
        self.launch_source_asked = launch_source
        self.cross_check = cross_check
        self.trace_mode = trace_mode
        # decided in prepare(): "collector", "ebpf" or "cross-check", and why
        self.launch_source = "ebpf"
        self.launch_source_reason = "the collector is not loaded"
        self._launch_mid: int | None = None  # the launch metric, when the collector feeds it
        self._watch_mid: int | None = None  # libcupti calls of the traced program (uretprobes)
        self._watch_names: dict[int, str] = {}
        self.cupti_calls: dict[int, list[tuple[str, int]]] = {}  # pid -> [(function, CUptiResult)]
        self.watch_reason: str | None = None
        self.pending_warnings: list[str] = []  # for the live stream; also in the result
        self._held: list[Parsed] | None = []  # device records read before bind()
        self._warned: set[int] = set()
        self.probe_set = probe_set
        self.vendor = "hip" if probe_set in HIP_SETS else "cuda"  # which collector
        self.device_metrics = device_metrics
        self.build: BuildResult | RocprofBuildResult | PrebuiltCollector | None = None
        # set together by prepare(): ``active`` from then on
        self.channel: DeviceChannel | None = None
        self.join: DispatchJoin | None = None
        self.reason: str | None = None  # why there are no device timestamps
        self.fix: str | None = None
        self.mids: dict[str, int] = {}
        self._launch_mids: set[int] = set()
        self._stats: dict[int, MetricStats] = {}
        self._lock: threading.Lock = threading.Lock()  # the session's lock once bound
        # (metric name, ts, pid, key, value) of every joined value, for --raw and --perfetto
        self.raw_sink: RawSink | None = None
        # the collector is loaded in this very process (prepare_this_process): stop() detaches it
        self.in_process = False
        self.detach_result: str | None = None
        self._stopped = False  # stop() is called by the session and again by whoever loaded it

    @property
    def active(self) -> bool:
        return self.channel is not None

    @property
    def _dispatch(self) -> DispatchJoin:
        """The join, for code that runs only once prepare() made the side ``active`` (or a
        test set the join): a call before that is a bug, said as one."""
        if self.join is None:
            raise RuntimeError("the device side has no join: prepare() did not open the collector")
        return self.join

    @property
    def _collector(self) -> BuildResult | RocprofBuildResult | PrebuiltCollector:
        """The collector library, set by prepare() before the channel: there wherever the side
        is ``active``."""
        if self.build is None:
            raise RuntimeError("the device side has no collector: prepare() did not build one")
        return self.build

    @property
    def _channel(self) -> DeviceChannel:
        """The FIFO's reader, where the side is ``active`` (the callers check that first)."""
        if self.channel is None:
            raise RuntimeError("the device side has no channel: prepare() did not open the collector")
        return self.channel

    def _unavailable(self, reason: str, fix: str | None) -> None:
        if self.mode == "on":
            raise EnvironmentProblem(f"GPU start times cannot be collected: {reason}",
                                     hint=fix or "`--device-timestamps off` traces launches only")
        self.reason, self.fix = reason, fix

    def prepare(self, command: list[str] | None, *, children: bool = False) -> dict[str, str]:
        """Build and open what the command needs; returns the variables to add to its environment.

        ``children``: no command of ours, but the caller starts the traced programs itself and
        puts the returned variables in their environments (a sweep's trials; this very process
        before it initialises CUDA, see :func:`prepare_this_process`)."""
        if self.mode == "off":
            self.reason = "turned off (--device-timestamps off)"
            return {}
        if self.vendor == "hip":
            return self._prepare_hip(command, children)
        if not command and not children:
            self._unavailable("the collector is loaded when a program starts (CUDA_INJECTION64_PATH); "
                              "a running process (--pid) cannot be given one",
                              "trace the program from its start: `trace queue -- CMD ...`")
            return {}
        if os.environ.get("CUDA_INJECTION64_PATH"):
            self._unavailable(f"CUDA_INJECTION64_PATH is already set ({os.environ['CUDA_INJECTION64_PATH']}): "
                              "another CUDA tool is injected into this program",
                              "unset CUDA_INJECTION64_PATH, or trace launches only")
            return {}
        from aorta_tui.trace.device.build import build_collector
        from aorta_tui.trace.device.channel import DeviceChannel
        from aorta_tui.trace.device.join import DispatchJoin

        try:
            build = (_prebuilt(prebuilt) if (prebuilt := os.environ.get("AORTA_CUPTI_COLLECTOR"))
                     else build_collector(target_python=command[0] if command and _looks_like_python(command[0])
                                          else None))
        except EnvironmentProblem as exc:
            self._unavailable(exc.message, exc.hint)
            return {}
        self.build = build
        self._decide_launch_source()
        self.join = DispatchJoin(self._emit, launches=self.launch_source, on_launches=self._on_collector_launches)
        self.channel = channel = DeviceChannel(self._on_records)
        # read from now on: a program may launch (and fill the FIFO) before the trace attaches
        channel.start()
        env = channel.env(build.library)
        if self.launch_source == "activity":
            env["AORTA_CUPTI_DOMAINS"] = "0"  # no launch callback: the kernel records are the launches
        return env

    def _decide_launch_source(self) -> None:
        """The collector loaded into a CUDA program of the ``cuda`` set sees every launch at API
        entry on its thread, with its stream: the eBPF launch uprobe is then redundant, and left
        out (``auto``), unless asked for (``--launch-source ebpf``) or both run (``--cross-check``)."""
        why_not = None
        if self.probe_set != "cuda":
            why_not = (f"the {self.probe_set} set times the launch call itself (entry to return): only "
                       "its uprobes see that")
        elif self.trace_mode != "events":
            why_not = "aggregate mode counts launches in the kernel"
        elif (os.environ.get("AORTA_CUPTI_DOMAINS", "1").strip() not in ("1", "3")
              and (self.cross_check or self.launch_source_asked == "collector")):
            why_not = (f"AORTA_CUPTI_DOMAINS={os.environ['AORTA_CUPTI_DOMAINS']} enables no driver-layer "
                       "launch callback (the runtime layer's does not give the stream handle)")
        if self.cross_check:
            if why_not:
                raise UsageError(f"--cross-check compares the eBPF launches with the collector's, but {why_not}",
                                 hint="drop --cross-check")
            self.launch_source = "cross-check"
            self.launch_source_reason = ("--cross-check: the eBPF uprobe and the collector both count "
                                         "every launch; the join goes through eBPF")
            return
        if self.launch_source_asked == "ebpf":
            self.launch_source, self.launch_source_reason = "ebpf", "--launch-source ebpf"
        elif why_not:
            if self.launch_source_asked in ("collector", "activity"):
                raise EnvironmentProblem(f"launches cannot come from the collector: {why_not}",
                                         hint="--launch-source ebpf (or auto)")
            self.launch_source, self.launch_source_reason = "ebpf", why_not
        elif self.launch_source_asked in ("auto", "activity"):
            self.launch_source = "activity"
            self.launch_source_reason = (
                ("auto: " if self.launch_source_asked == "auto" else "--launch-source activity: ")
                + "the kernel records alone, with CUPTI's latency timestamps (queued, submitted): no "
                "per-launch callback and no per-launch uprobe, so the traced program pays only CUPTI's "
                "activity tracing (docs/tracing.md, trace_perturbation); every kernel record is kept or "
                "counted as dropped")
        else:
            self.launch_source = "collector"
            self.launch_source_reason = ("--launch-source collector: the collector is loaded into the program "
                                         "and sees every launch at API entry: no launch uprobe is attached")

    def launch_source_info(self) -> dict[str, Any]:
        """What the result says about where launches and their timestamps come from."""
        return {"mode": self.launch_source, "why": self.launch_source_reason,
                "launch_timestamp": self._launch_time(),
                "device_timestamp": DEVICE_TIME if self.active else None}

    def _launch_time(self) -> str:
        return {"collector": COLLECTOR_LAUNCH_TIME, "activity": ACTIVITY_LAUNCH_TIME}.get(self.launch_source,
                                                                                       EBPF_LAUNCH_TIME)

    def refuse_collector_without_it(self) -> None:
        """``--launch-source collector`` where no collector could be prepared: exit 3, not a trace
        that silently counts through eBPF."""
        if self.launch_source_asked in ("collector", "activity") and not self.active:
            raise EnvironmentProblem(f"launches cannot come from the collector: {self.reason}",
                                     hint=self.fix or "--launch-source ebpf (or auto)")
        if self.cross_check and not self.active:
            raise EnvironmentProblem(f"--cross-check needs the collector: {self.reason}",
                                     hint=self.fix or "drop --cross-check")

    def _prepare_hip(self, command: list[str] | None, children: bool) -> dict[str, str]:
        """The rocprofiler-sdk collector (rocprof_collector.c): never run on AMD hardware, so
        ``auto`` never loads it; ``--device-timestamps on`` does."""
        from aorta_tui.trace.device.rocprof_build import NEVER_RUN, build_rocprof_collector

        if not command and not children:
            self._unavailable("the collector is loaded when a program's HIP runtime starts "
                              "(ROCP_TOOL_LIBRARIES); a running process (--pid) cannot be given one",
                              "trace the program from its start: `trace queue -- CMD ...`")
            return {}
        if os.environ.get("ROCP_TOOL_LIBRARIES"):
            self._unavailable(f"ROCP_TOOL_LIBRARIES is already set ({os.environ['ROCP_TOOL_LIBRARIES']}): "
                              "another rocprofiler-sdk tool is loaded into this program",
                              "unset ROCP_TOOL_LIBRARIES, or trace launches only")
            return {}
        if self.mode == "auto":
            self._unavailable(f"the rocprofiler-sdk collector is {NEVER_RUN}, so it is loaded only "
                              "when asked for", "`--device-timestamps on` loads it (HIP programs)")
            return {}
        from aorta_tui.trace.device.channel import DeviceChannel
        from aorta_tui.trace.device.join import DispatchJoin

        try:
            build = (_prebuilt(prebuilt, "AORTA_ROCPROF_COLLECTOR") if (prebuilt := os.environ.get("AORTA_ROCPROF_COLLECTOR"))
                     else build_rocprof_collector())
        except EnvironmentProblem as exc:
            self._unavailable(exc.message, exc.hint)
            return {}
        self.build = build
        self.join = DispatchJoin(self._emit, source="rocprofiler")
        self.channel = channel = DeviceChannel(self._on_records)
        channel.start()
        return {"ROCP_TOOL_LIBRARIES": str(build.library), "AORTA_ROCPROF_FIFO": str(channel.path)}

    def bind(self, program: Program, stats: dict[int, MetricStats], lock: threading.Lock,
             make_stats: Callable[[Metric], MetricStats]) -> None:
        """Register the device metrics beside the program's, and remember the launch metric ids."""
        with self._lock:
            self._lock = lock
        self._stats = stats
        if not self.active:
            return
        next_id = max([*program.metric_ids, -1]) + 1
        for metric in self.device_metrics:
            m = self._worded(metric)
            mid = next_id
            next_id += 1
            program.metric_ids[mid] = (self.probe_set, m)
            program.attached.add(mid)
            stats[mid] = make_stats(m)
            self.mids[m.name] = mid
        self._launch_mids = {mid for mid, (ps, m) in program.metric_ids.items()
                             if ps == self.probe_set and m.name in LAUNCH_METRICS}
        if self.launch_source in ("collector", "activity"):
            self._launch_mid = next((mid for mid, (ps, m) in program.metric_ids.items()
                                     if ps == self.probe_set and m.name == "launch"), None)
            if self._launch_mid is not None:
                program.attached.add(self._launch_mid)
                worded = self._worded(program.metric_ids[self._launch_mid][1])
                program.metric_ids[self._launch_mid] = (self.probe_set, worded)
                stats[self._launch_mid] = make_stats(worded)  # nothing counted yet
            self._launch_mids = set()  # no eBPF launch records to join
        with lock:
            # launches before the uprobes attached have no eBPF record: counted apart, not as misses
            self._dispatch.trace_started(time.monotonic_ns())
            # records read before the trace was bound (an in-process collector starts with CUDA,
            # before the session): joined now, so those launches count as before the trace,
            # never as launches whose values went nowhere
            held, self._held = self._held, None
            for parsed in held or []:
                self._dispatch.add_device(parsed)

    def _worded(self, m: Metric) -> Metric:
        """The sentence beside a histogram says where its launch time comes from: with launches
        from the collector, the CUPTI callback, not the eBPF uprobe the static wording names."""
        wording = {"collector": COLLECTOR_WORDING, "activity": ACTIVITY_WORDING}.get(self.launch_source, {})
        if m.name not in wording:
            return m
        return dataclasses.replace(m, measures=wording[m.name])

    # -- the two inputs (both called with the session's lock held or taking it) -------------------
    def on_batch(self, batch: Batch) -> None:
        """eBPF records, called with the session lock held."""
        if self.active and self._watch_mid is not None and len(batch):
            self._watched_calls(batch)
        if not self.active or not self._launch_mids:
            return
        if len(batch):
            sel = np.isin(batch.metric, list(self._launch_mids))
            if sel.any():
                self._dispatch.add_launches(batch.ts[sel], batch.pid[sel], batch.tid[sel], batch.key[sel])
        if batch.heartbeats:  # after the launches: they are stamped before it
            self._dispatch.add_heartbeat(max(batch.heartbeats))

    def _on_records(self, parsed: Parsed) -> None:
        with self._lock:
            if self._held is not None:  # not bound to a session yet: keep them for bind()
                self._held.append(parsed)
                return
            self._dispatch.add_device(parsed)

    def _on_collector_launches(self, ts: np.ndarray, pid: np.ndarray, tid: np.ndarray, stream: np.ndarray) -> None:
        """Launches the collector saw, as the ``launch`` metric (session lock held)."""
        mid = self._launch_mid
        if mid is None or not len(ts):
            return
        self._stats[mid].add(ts, pid, stream, np.zeros(len(ts), dtype=np.int64), None)
        if self.raw_sink is not None:
            self.raw_sink("launch", ts, pid, stream, np.zeros(len(ts), dtype=np.int64), tid)

    def is_collector_launch_metric(self, mid: int) -> bool:
        return self._launch_mid is not None and mid == self._launch_mid

    def collector_launch_counts(self) -> tuple[int | None, int, str | None]:
        """(launches the collectors saw, LAUNCH records read, why the first is unknown): exact
        once every process wrote its final count (BYE); the difference is what was lost."""
        procs = self._dispatch.procs
        if self.launch_source == "activity":
            return self._activity_launch_counts()
        read = sum(self._dispatch.collector_launches_per_pid.values())
        unfinished = [p for p, ps in procs.items() if not ps.exited_cleanly]
        if not procs:
            return None, read, NO_COLLECTOR_RECORDS
        blind = {p: e for p, ps in procs.items() for e in ps.errors
                 if e.startswith(("cuptiSubscribe", "cuptiEnableCallback"))}
        if blind:
            pid, err = next(iter(blind.items()))
            return None, read, (f"pid {pid}'s launches were not seen: its collector has no launch callback "
                                f"({err}); `--launch-source ebpf` counts them with the uprobe")
        if unfinished:
            return None, read, (f"pid {unfinished[0]} has not written its final count (still running, or "
                                "ended without its exit handler)")
        return sum(ps.stats.get("launch_callbacks", 0) for ps in procs.values()), read, None

    def _activity_launch_counts(self) -> tuple[int | None, int, str | None]:
        """Default mode: the launches are the kernel records, so what was seen is what was read
        plus what was dropped on the way (CUPTI, the pool, the staging area, the FIFO)."""
        read = self._dispatch.counts["activity_launches"]
        procs = self._dispatch.procs
        if not procs:
            return None, read, NO_COLLECTOR_RECORDS
        lost = self.dropped() or 0
        return read + lost, read, None

    def collector_launch_lost(self) -> int | None:
        """Launches the collector saw whose record never arrived: exact once every process wrote
        its final count; while one runs, the launches its full ring dropped (its STATS say so
        every flush), as long as no write to the FIFO was dropped (those may hold launches too:
        unknown then)."""
        seen, read, why = self.collector_launch_counts()
        if seen is not None:
            return max(0, seen - read)
        if self.launch_source == "activity":
            return None
        procs = list(self._dispatch.procs.values())
        if not procs or "were not seen" in (why or "") or any(ps.stats.get("dropped_pipe", 0) for ps in procs):
            return None
        return sum(ps.stats.get("dropped_ring", 0) for ps in procs)

    # -- the program's own CUPTI clients, watched ---------------------------------------------
    def watch_program(self, pred: str, first_mid: int) -> str:
        """bpftrace text: a uretprobe on libcupti's subscribe and activity-registration entry points
        in the traced program (a few calls per process), so a profiler inside it that CUPTI refuses
        because this trace's collector holds CUPTI is seen and said, live. Empty, with
        ``watch_reason``, where the collector's libcupti is not known."""
        from aorta_tui.trace import elfsyms
        from aorta_tui.trace.program import validate_param

        if not self.active or self.vendor != "cuda":
            return ""
        lib = getattr(getattr(self.build, "cupti", None), "lib", None)
        if lib is None:
            self.watch_reason = "a prebuilt collector ($AORTA_CUPTI_COLLECTOR) does not say which libcupti it loads"
            return ""
        try:
            path = validate_param("lib", str(Path(lib).resolve()))
            funcs = elfsyms.functions(Path(path))
        except (UsageError, elfsyms.ElfError, OSError) as exc:
            self.watch_reason = f"libcupti {lib} cannot be probed: {exc}"
            return ""
        names = [n for n in CUPTI_WATCH if n in funcs]
        if not names:
            self.watch_reason = f"{lib} exports none of {', '.join(CUPTI_WATCH)}"
            return ""
        self._watch_mid = first_mid
        self._watch_names = dict(enumerate(names))
        return "".join(
            f"uretprobe:{path}:{n} /{pred}/ {{ @sent[{first_mid}] = count(); "
            f'printf("@R {first_mid} %lld %d %d %lld 0 {i} -\\n", nsecs, pid, tid, (int64)retval); }}\n'
            for i, n in enumerate(names))

    @property
    def watch_mid(self) -> int | None:
        """The metric id of the watched libcupti calls' records (not a metric of the result)."""
        return self._watch_mid

    def _watched_calls(self, batch: Batch) -> None:
        sel = batch.metric == self._watch_mid
        for p, code, fn in zip(batch.pid[sel].tolist(), batch.key[sel].tolist(), batch.aux[sel].tolist(), strict=True):
            self.cupti_calls.setdefault(int(p), []).append((self._watch_names.get(int(fn), "?"), int(code) & 0xFFFFFFFF))
        self._check_conflicts()

    def profiler_conflicts(self) -> dict[str, str]:
        """pid -> the sentence for a traced process whose own CUPTI client was refused, or took the
        activity records, because the collector holds CUPTI (CUPTI allows one subscriber)."""
        out: dict[str, str] = {}
        join = self.join
        if join is None:
            return out
        for pid, calls in sorted(self.cupti_calls.items()):
            ps = join.procs.get(pid)
            if ps is None or not ps.hello:
                continue  # our collector has not spoken in this process (yet): nothing to compare
            if any(e.startswith("cuptiSubscribe failed") for e in ps.errors):
                continue  # the program's client came first: the collector says so itself
            refused = [c for f, c in calls if f.startswith("cuptiSubscribe") and c != 0]
            registrations = [c for f, c in calls if f == "cuptiActivityRegisterCallbacks"]
            fix = "`--device-timestamps off` leaves CUPTI to your profiler"
            if refused:
                from aorta_tui.trace.device.records import CUPTI_RESULTS

                names = sorted({CUPTI_RESULTS.get(c, f"CUptiResult {c}").split(" (")[0] for c in refused})
                times = f"{len(refused)} time{'s' if len(refused) > 1 else ''}"
                if CUPTI_MULTIPLE_SUBSCRIBERS in refused:
                    out[str(pid)] = (f"pid {pid}: your program's profiler got no events because this trace holds "
                                     f"CUPTI (its cuptiSubscribe returned {', '.join(names)}, {times}); {fix}")
                else:
                    out[str(pid)] = (f"pid {pid}: a CUPTI client in your program failed to subscribe while this "
                                     f"trace's collector held CUPTI (cuptiSubscribe returned {', '.join(names)}, "
                                     f"{times}): if your profiler got no events, {fix}")
            elif len(registrations) > 1:
                out[str(pid)] = (f"pid {pid}: another CUPTI client in your program registered activity "
                                 f"buffers too ({len(registrations)} registrations, the collector made one): "
                                 f"its profiler and this trace share CUPTI's records, and either may miss "
                                 f"kernels; {fix}")
        return out

    def _check_conflicts(self) -> None:
        for pid, msg in self.profiler_conflicts().items():
            if int(pid) not in self._warned:
                self._warned.add(int(pid))
                self.pending_warnings.append(msg)

    def take_warnings(self) -> list[str]:
        with self._lock:
            self._check_conflicts()  # the collector's HELLO may have come after the call
            out, self.pending_warnings = self.pending_warnings, []
        return out

    def _emit(self, name: str, ts: np.ndarray, pid: np.ndarray, key: np.ndarray, value: np.ndarray) -> None:
        mid = self.mids.get(name)
        if mid is not None and len(ts):
            self._stats[mid].add(ts, pid, key, np.maximum(value, 0), None)
            if self.raw_sink is not None:
                self.raw_sink(name, ts, pid, key, value)

    # -- end ----------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Read the last records, then close and remove the FIFO and its folder. Once: a second
        call (the caller that loaded the collector, after the session stopped it) does nothing."""
        if not self.active or self._stopped:
            return
        self._stopped = True
        with self._lock:
            held, self._held = self._held, None  # never bound (the trace failed to start)
            for parsed in held or []:
                self._dispatch.add_device(parsed)
        if self.in_process:
            self._detach()
        self._channel.stop()
        with self._lock:
            self._dispatch.finish()

    def _detach(self) -> None:
        """Give CUPTI back in this process: it allows one subscriber, and the program's own
        profiler (the queue harness's detail pass runs torch.profiler) subscribes after the trace.
        Only when the collector really started here (its HELLO record came from this pid):
        loading the library just to ask would put libcupti into a process that never had it."""
        import ctypes

        library = self._collector.library  # stop() detaches only an active side: it was built
        with self._lock:
            started = os.getpid() in self._dispatch.procs
        if not started:
            self.detach_result = "not needed: the collector never started in this process"
            return
        try:
            rc = ctypes.CDLL(str(library)).aorta_cupti_detach()
        except (OSError, AttributeError) as exc:  # a prebuilt collector from before detach existed
            self.detach_result = f"could not detach ({exc}): CUPTI stays taken until the process exits"
            return
        self.detach_result = {1: "detached: CUPTI given back to the program"}.get(
            rc, "already finished" if rc == 0 else f"CUPTI refused a step of the detach (CUptiResult {-rc})")

    def is_device_metric(self, mid: int) -> bool:
        return mid in self.mids.values()

    def dropped(self) -> int | None:
        """Records the collector or CUPTI dropped (never silently): the device metrics' losses."""
        if not self.active:
            return None
        keys = ("dropped_ring", "dropped_pipe", "dropped_cupti", "dropped_staging")
        return sum(p.stats.get(k, 0) for p in list(self._dispatch.procs.values()) for k in keys)

    def timestamp_source(self, metric_name: str) -> str | dict[str, Json]:
        """Where each timestamp of a metric of this set comes from (every figure says it): one
        sentence, or where an interval starts (``from``) and ends (``to``)."""
        launch = self._launch_time()
        if metric_name == "launch":
            return launch
        if metric_name == "launch_push":
            return {"from": "CUPTI latency timestamp `queued`", "to": "CUPTI latency timestamp `submitted`"}
        if metric_name == "launch_gpu_queue":
            return {"from": "CUPTI latency timestamp `submitted`", "to": DEVICE_TIME}
        if metric_name == "launch_host":
            return {"from": launch, "to": "CUPTI latency timestamp `queued` (mapped onto CLOCK_MONOTONIC)"}
        if metric_name in TWO_CLOCK_METRICS:
            return {"from": launch, "to": DEVICE_TIME}
        if metric_name in ("kernel_duration", "gpu_idle"):
            return DEVICE_TIME
        return "eBPF uprobes at the libcuda entry point and return (bpftrace nsecs, CLOCK_MONOTONIC)"

    def clock_for(self, metric_name: str) -> dict[str, Any]:
        if not self.active or metric_name not in TWO_CLOCK_METRICS:
            return {}
        return {**self._dispatch.clock.to_dict(),
                "launch_time": {"collector": "CUPTI launch callback", "activity": "CUPTI queued timestamp"}.get(
                    self.launch_source, "eBPF uprobe")}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "available": self.active}
        if self.vendor == "hip":
            from aorta_tui.trace.device.latency import ROCM_PARTS

            out["hardware"] = "never run on AMD hardware"
            out["launch_parts"] = ROCM_PARTS  # host / push / GPU queue: which exist there, and why not
        if not self.active:
            out.update(reason=self.reason, fix=self.fix, status=f"not available: {self.reason}")
            return out
        out["collector"] = self._collector.to_dict()
        out.update(self._dispatch.summary())
        out["launch_source"] = self.launch_source_info()
        out["program_cupti_calls"] = ({str(p): [{"function": f, "result": c} for f, c in calls]
                                       for p, calls in sorted(self.cupti_calls.items())}
                                      if self._watch_mid is not None else None)
        if self._watch_mid is None:
            out["program_cupti_calls_reason"] = self.watch_reason or "not watched"
        conflicts = self.profiler_conflicts()
        if conflicts:
            out["program_profiler"] = conflicts
        out["reader_errors"] = list(self._channel.errors)
        out["fifo_bytes"] = self._channel.pipe_bytes
        procs = out.get("processes", {})
        if self.detach_result is not None:
            out["detach"] = self.detach_result
        if not procs:
            out["warning"] = ("no record came from the collector: the program never initialised CUDA, "
                              "or it is not dynamically linked to libcuda" if self.vendor == "cuda" else
                              "no record came from the collector: the program never started the HIP "
                              "runtime, or its rocprofiler-register did not load ROCP_TOOL_LIBRARIES")
        out["status"] = status_line(procs, self.reason)
        if conflicts:
            out["status"] += "; " + "; ".join(conflicts.values())
        for pid, p in procs.items():
            if not p["exited_cleanly"]:
                out.setdefault("notes", []).append(
                    f"pid {pid} ended without its exit handler (killed, or os._exit): records after "
                    "its last flush may be missing")
        return out


def process_problem(pid: str, p: dict[str, Any]) -> str | None:
    """Why one traced process has no (or not all) GPU start times, or None when it has them.

    A CUPTI error inside the program (another profiler subscribed first, a CUPTI that does not
    match the driver) is reported by the collector itself. A process whose final flush ran
    (BYE) with fewer kernel records than launch callbacks, nothing dropped, lost its records to
    another CUPTI client: CUPTI's activity API is process-wide, so a profiler inside the program
    that registers its own buffer callbacks, or turns kernel activity off when it stops, takes
    them (graph launches make more kernels than callbacks, so this never fires wrongly; it may
    miss a takeover in a graph-heavy program)."""
    if p.get("errors"):
        return f"pid {pid}: not available: {'; '.join(p['errors'])}"
    st = p.get("stats") or {}
    launches, kernels = st.get("launch_callbacks", 0), p.get("kernel_records", 0)
    dropped = sum(st.get(k, 0) for k in ("dropped_ring", "dropped_pipe", "dropped_cupti", "dropped_staging"))
    if p.get("exited_cleanly") and kernels + dropped < launches:
        return (f"pid {pid}: partly available: {launches - kernels - dropped} of {launches} launches have "
                "no kernel record though the collector's final flush ran and dropped nothing: another "
                "CUPTI client in the program (a profiler such as torch.profiler) took CUPTI's activity "
                "records or turned kernel activity off")
    return None


def status_line(procs: dict[str, Any], reason: str | None) -> str:
    """One sentence: are GPU start times available, and if not, why (every process's reason)."""
    if reason is not None and not procs:
        return f"not available: {reason}"
    problems = [m for pid, p in procs.items() if (m := process_problem(pid, p))]
    if problems:
        return "; ".join(problems)
    return "available" if procs else "not available: no record came from the collector"


def prepare_this_process(mode: str = "auto") -> DeviceSide | None:
    """Load the collector into *this* process, which has not initialised CUDA yet (the queue
    harness's ``--ebpf-trace``): the driver reads CUDA_INJECTION64_PATH at cuInit. Returns the
    side to hand to ``TraceSession(device_side=...)``, or None when CUDA is already up."""
    from aorta_tui.trace.probes.cuda import DEVICE_METRICS

    side = DeviceSide(mode, probe_set="cuda", device_metrics=DEVICE_METRICS)
    torch = sys.modules.get("torch")  # never imported here: only asked, if the caller has it
    if torch is not None and getattr(torch, "cuda", None) is not None and torch.cuda.is_initialized():
        side._unavailable("CUDA was initialised in this process before the collector could be loaded",
                          "start the trace before the first CUDA call")
        return side
    os.environ.update(side.prepare(None, children=True))
    side.in_process = side.active
    return side
