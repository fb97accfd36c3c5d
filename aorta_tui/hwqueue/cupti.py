"""Kernel-level device timestamps from the PyTorch profiler (CUPTI on CUDA, roctracer on ROCm).

CUDA events time a *stream*: the start marker fires when the stream reaches it, which on an
idle stream is before the kernel was even submitted, and on a stream whose kernels wait for
free SMs is long before the kernel runs. Only the profiler sees when each kernel really ran.
``--timing cupti`` runs the measured loop under ``torch.profiler`` and turns every device
activity into a :class:`LaunchRecord` of its own: host interval = the runtime call that
launched it (``cudaLaunchKernel``), device interval = the kernel. The metric functions are then
exactly HTA's (launch delay = kernel start minus end of its runtime call).

The profiler's clock is mapped onto ``perf_counter_ns`` with marker annotations whose host
time is bracketed by two clock reads; the tightest bracket gives the offset and its error.
"""

from __future__ import annotations

import bisect
import json
import os
import tempfile
import time
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from aorta_tui.hwqueue.metrics import LaunchRecord

if TYPE_CHECKING:  # torch is imported when a capture starts, not to name its types
    from torch.profiler import profile

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "hip_runtime"}
MARKER = "aorta_hwq_clock_marker_"
IMPLAUSIBLE_US = 1.0  # slack for the trace's microsecond rounding


def clock_markers(torch: ModuleType, rounds: int, start: int = 0) -> list[tuple[float, float, str]]:
    """Profiler annotations with the host clock read just before and after each one opens."""
    out = []
    for i in range(start, start + rounds):
        name = f"{MARKER}{i}"
        rf = torch.profiler.record_function(name)
        t0 = time.perf_counter_ns()
        rf.__enter__()
        t1 = time.perf_counter_ns()
        rf.__exit__(None, None, None)
        out.append((float(t0), float(t1), name))
    return out


def estimate_offset(trace: dict[str, Any], markers: Sequence[tuple[float, float, str]]) -> tuple[float, float]:
    """(trace_ns - perf_ns, uncertainty_ns) from the tightest marker."""
    ts = {e["name"]: float(e["ts"]) * 1e3 for e in trace.get("traceEvents", [])
          if e.get("ph") == "X" and e.get("cat") == "user_annotation"
          and str(e.get("name", "")).startswith(MARKER)}
    best: tuple[float, float] | None = None
    for t0, t1, name in markers:
        if name in ts and (best is None or t1 - t0 < best[1]):
            best = (ts[name] - (t0 + t1) / 2.0, t1 - t0)
    if best is None:
        raise RuntimeError("the profiler trace has no clock markers; cannot align its clock")
    return best[0], best[1] / 2.0


class ProfilerCapture:
    """``with ProfilerCapture(torch) as cap: <measured loop>``; then ``cap.trace()``."""

    def __init__(self, torch: ModuleType) -> None:
        self.torch = torch
        self.markers: list[tuple[float, float, str]] = []
        self._prof: profile | None = None  # set when the capture is entered

    def __enter__(self) -> ProfilerCapture:
        from torch.profiler import ProfilerActivity, profile

        self._prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        with warnings.catch_warnings():
            # torch warns on every later session that events are not accumulated: we want that
            warnings.filterwarnings("ignore", message=".*Profiler clears events")
            self._prof.__enter__()
        self.markers += clock_markers(self.torch, 25)
        return self

    def __exit__(self, *exc: object) -> None:
        self.markers += clock_markers(self.torch, 25, start=25)
        assert self._prof is not None, "__exit__ of a capture that was entered"
        self._prof.__exit__(*exc)

    def trace(self, keep: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """The chrome trace as a dict; with ``keep`` also left at that path (written atomically,
        readable by Perfetto and chrome://tracing)."""
        where = os.path.dirname(os.path.abspath(keep)) if keep else None
        fd, path = tempfile.mkstemp(prefix=".aorta-hwq-", suffix=".json", dir=where)
        os.close(fd)
        try:
            assert self._prof is not None, "trace() of a capture that was entered"
            self._prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            if keep:
                os.replace(path, keep)
            return data
        finally:
            if os.path.exists(path):
                os.unlink(path)


def activity_records(trace: dict[str, Any], offset_ns: float,
                     launches: Sequence[LaunchRecord]) -> tuple[list[LaunchRecord], dict[str, Any]]:
    """One record per device activity, attributed to the launch whose host call issued it.

    ``launches`` are the harness's launch records (host intervals in perf_counter ns, in issue
    order). Activities whose runtime call lies outside every launch (warm-up, setup) are
    dropped; counts of what was kept and dropped come back with the records.
    """
    events = trace.get("traceEvents", [])
    runtime = {e["args"]["correlation"]: e for e in events
               if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and "correlation" in e.get("args", {})}
    starts = [la.host_start_ns for la in launches]
    out: list[LaunchRecord] = []
    no_runtime = outside = implausible = 0
    launches_hit: set[int] = set()
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in DEVICE_CATS:
            continue
        rt = runtime.get(e.get("args", {}).get("correlation"))
        if rt is None:
            no_runtime += 1
            continue
        if float(e["ts"]) < float(rt["ts"]) - IMPLAUSIBLE_US:
            # a kernel cannot start before the call that launched it began (same clock): CUPTI
            # hands back such records when its timestamp callback is re-registered (pytorch#192021)
            implausible += 1
            continue
        rt0 = float(rt["ts"]) * 1e3 - offset_ns
        rt1 = (float(rt["ts"]) + float(rt.get("dur", 0.0))) * 1e3 - offset_ns
        k = bisect.bisect_right(starts, rt0) - 1
        if k < 0 or rt0 > launches[k].host_end_ns:
            outside += 1
            continue
        la = launches[k]
        g0 = float(e["ts"]) * 1e3 - offset_ns
        out.append(LaunchRecord(la.iteration, la.stream, str(e.get("name", la.label))[:80], rt0, rt1,
                                g0, g0 + float(e.get("dur", 0.0)) * 1e3))
        launches_hit.add(k)
    info = {"activities": len(out), "without_runtime_call": no_runtime,
            "outside_measured_launches": outside, "launches_with_activity": len(launches_hit),
            "launches": len(launches), "implausible_timestamps_dropped": implausible}
    return out, info
