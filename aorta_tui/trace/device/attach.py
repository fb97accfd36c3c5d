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

import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.trace.device.records import Parsed
from aorta_tui.trace.metrics import Metric

MODES = ("auto", "on", "off")
LAUNCH_METRICS = ("launch", "launch_call")  # eBPF records whose entry time the join uses
TWO_CLOCK_METRICS = ("launch_to_start", "queued")
HIP_SETS = ("hip", "hip_calls")  # their device half is the rocprofiler-sdk collector


def _looks_like_python(exe: str) -> bool:
    return os.path.basename(exe).startswith("python")


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


class DeviceSide:
    def __init__(self, mode: str, *, probe_set: str, device_metrics: tuple[Metric, ...]) -> None:
        if mode not in MODES:
            raise UsageError(f"--device-timestamps {mode!r} is not one of {', '.join(MODES)}")
        self.mode = mode
        self.probe_set = probe_set
        self.vendor = "hip" if probe_set in HIP_SETS else "cuda"  # which collector
        self.device_metrics = device_metrics
        self.build: Any = None
        self.channel: Any = None
        self.join: Any = None
        self.reason: str | None = None  # why there are no device timestamps
        self.fix: str | None = None
        self.mids: dict[str, int] = {}
        self._launch_mids: set[int] = set()
        self._stats: dict[int, Any] = {}
        self._lock: Any = threading.Lock()  # the session's lock once bound
        # (metric name, ts, pid, key, value) of every joined value, for --raw and --perfetto
        self.raw_sink: Any = None
        # the collector is loaded in this very process (prepare_this_process): stop() detaches it
        self.in_process = False
        self.detach_result: str | None = None

    @property
    def active(self) -> bool:
        return self.channel is not None

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
            self.build = (_prebuilt(prebuilt) if (prebuilt := os.environ.get("AORTA_CUPTI_COLLECTOR"))
                          else build_collector(target_python=command[0] if command and _looks_like_python(command[0])
                                               else None))
        except EnvironmentProblem as exc:
            self._unavailable(exc.message, exc.hint)
            return {}
        self.join = DispatchJoin(self._emit)
        self.channel = DeviceChannel(self._on_records)
        # read from now on: a program may launch (and fill the FIFO) before the trace attaches
        self.channel.start()
        return self.channel.env(self.build.library)

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
            self.build = (_prebuilt(prebuilt, "AORTA_ROCPROF_COLLECTOR") if (prebuilt := os.environ.get("AORTA_ROCPROF_COLLECTOR"))
                          else build_rocprof_collector())
        except EnvironmentProblem as exc:
            self._unavailable(exc.message, exc.hint)
            return {}
        self.join = DispatchJoin(self._emit, source="rocprofiler")
        self.channel = DeviceChannel(self._on_records)
        self.channel.start()
        return {"ROCP_TOOL_LIBRARIES": str(self.build.library), "AORTA_ROCPROF_FIFO": str(self.channel.path)}

    def bind(self, program: Any, stats: dict[int, Any], lock: Any, make_stats: Any) -> None:
        """Register the device metrics beside the program's, and remember the launch metric ids."""
        with self._lock:
            self._lock = lock
        self._stats = stats
        if not self.active:
            return
        next_id = max([*program.metric_ids, -1]) + 1
        for m in self.device_metrics:
            mid = next_id
            next_id += 1
            program.metric_ids[mid] = (self.probe_set, m)
            program.attached.add(mid)
            stats[mid] = make_stats(m)
            self.mids[m.name] = mid
        self._launch_mids = {mid for mid, (ps, m) in program.metric_ids.items()
                             if ps == self.probe_set and m.name in LAUNCH_METRICS}
        with lock:
            # launches before the uprobes attached have no eBPF record: counted apart, not as misses
            self.join.trace_started(time.monotonic_ns())

    # -- the two inputs (both called with the session's lock held or taking it) -------------------
    def on_batch(self, batch: Any) -> None:
        """eBPF records, called with the session lock held."""
        if not self.active or not self._launch_mids:
            return
        if len(batch):
            sel = np.isin(batch.metric, list(self._launch_mids))
            if sel.any():
                self.join.add_launches(batch.ts[sel], batch.pid[sel], batch.tid[sel], batch.key[sel])
        if batch.heartbeats:  # after the launches: they are stamped before it
            self.join.add_heartbeat(max(batch.heartbeats))

    def _on_records(self, parsed: Parsed) -> None:
        with self._lock:
            self.join.add_device(parsed)

    def _emit(self, name: str, ts: np.ndarray, pid: np.ndarray, key: np.ndarray, value: np.ndarray) -> None:
        mid = self.mids.get(name)
        if mid is not None and len(ts):
            self._stats[mid].add(ts, pid, key, np.maximum(value, 0), None)
            if self.raw_sink is not None:
                self.raw_sink(name, ts, pid, key, value)

    # -- end ----------------------------------------------------------------------------------------
    def stop(self) -> None:
        if not self.active:
            return
        if self.in_process:
            self._detach()
        self.channel.stop()
        with self._lock:
            self.join.finish()

    def _detach(self) -> None:
        """Give CUPTI back in this process: it allows one subscriber, and the program's own
        profiler (the queue harness's detail pass runs torch.profiler) subscribes after the trace.
        Only when the collector really started here (its HELLO record came from this pid):
        loading the library just to ask would put libcupti into a process that never had it."""
        import ctypes

        with self._lock:
            started = os.getpid() in self.join.procs
        if not started:
            self.detach_result = "not needed: the collector never started in this process"
            return
        try:
            rc = ctypes.CDLL(str(self.build.library)).aorta_cupti_detach()
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
        return sum(p.stats.get(k, 0) for p in list(self.join.procs.values()) for k in keys)

    def clock_for(self, metric_name: str) -> dict[str, Any]:
        if not self.active or metric_name not in TWO_CLOCK_METRICS:
            return {}
        return self.join.clock.to_dict()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "available": self.active}
        if self.vendor == "hip":
            out["hardware"] = "never run on AMD hardware"
        if not self.active:
            out.update(reason=self.reason, fix=self.fix, status=f"not available: {self.reason}")
            return out
        out["collector"] = self.build.to_dict()
        out.update(self.join.summary())
        out["reader_errors"] = list(self.channel.errors)
        out["fifo_bytes"] = self.channel.pipe_bytes
        procs = out.get("processes", {})
        if self.detach_result is not None:
            out["detach"] = self.detach_result
        if not procs:
            out["warning"] = ("no record came from the collector: the program never initialised CUDA, "
                              "or it is not dynamically linked to libcuda" if self.vendor == "cuda" else
                              "no record came from the collector: the program never started the HIP "
                              "runtime, or its rocprofiler-register did not load ROCP_TOOL_LIBRARIES")
        out["status"] = status_line(procs, self.reason)
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
