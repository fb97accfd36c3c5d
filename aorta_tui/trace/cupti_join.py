"""Launch -> GPU-start delay: join eBPF launch records with the PyTorch profiler's CUPTI kernels.

Only for workloads aorta-tui runs itself under ``torch.profiler`` (CUDA activities on). The
profiler gives, per kernel, the runtime launch call (``cuda_runtime`` events) and the GPU
start time, linked by a correlation id, in the profiler's clock. eBPF gives the driver launch
entry (``CLOCK_MONOTONIC``) and the stream handle. The n-th eBPF launch is paired with the n-th
runtime launch call (both sorted by time, counts must match); the clock offset is the median
of (eBPF entry - runtime call start) over the pairs. Then

    launch -> GPU start = kernel start (CUPTI) - (eBPF entry - offset)

There is no common clock, so the median driver-entry lag is absorbed into the offset: the delay
counts from the runtime launch call's start (cudaLaunchKernel), plus this launch's deviation
from the median lag. eBPF contributes the stream handle of every launch and the exact launch
count the pairing is checked against.
No torch import here: the caller passes the exported Chrome trace (``prof.export_chrome_trace``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from aorta_tui.core.inputs import INPUT_LIMITS, Json, load_json_input, require_type
from aorta_tui.trace.hdr import LogLinearHistogram

_LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                 "cudaGraphLaunch", "cudaLaunchCooperativeKernel")


def load_profiler_trace(path: Path) -> tuple[list[dict[str, Any]], dict[int | str, dict[str, Any]]]:
    """(runtime launch calls sorted by start, kernels by correlation id) from a Chrome trace.
    A kernel without a correlation id pairs with no launch, so it is left out.

    Bounded and type-checked (``core.inputs``): a damaged trace is a UsageError naming the
    event and field, never a KeyError in the join.
    """
    where = str(path)
    data: Json = load_json_input(path, what="profiler trace", limit=INPUT_LIMITS["profiler trace"],
                                 hint=_HINT)
    events = _need_array(data.get("traceEvents") if isinstance(data, dict) else data, where, "traceEvents")
    launches: list[dict[str, Any]] = []
    kernels: dict[int | str, dict[str, Any]] = {}
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            continue  # metadata rows of other shapes carry nothing the join reads
        cat, name = ev.get("cat", ""), ev.get("name", "")
        if not (isinstance(cat, str) and isinstance(name, str)):
            continue
        is_launch = cat == "cuda_runtime" and any(name.startswith(n) for n in _LAUNCH_NAMES)
        if not (is_launch or cat == "kernel"):
            continue
        at = f"traceEvents[{i}]"
        args = _need_object(ev.get("args") or {}, where, f"{at}.args")
        given = args.get("correlation")
        correlation: int | str | None = (
            given if given is None or isinstance(given, (int, str))
            else _need_integer(given, where, f"{at}.args.correlation"))  # raises: the wrong type
        ts = float(_need_number(ev.get("ts"), where, f"{at}.ts"))
        if is_launch:
            launches.append({"ts_us": ts, "correlation": correlation})
        elif correlation is not None:
            kernels[correlation] = {
                "ts_us": ts, "dur_us": float(_need_number(ev.get("dur", 0), where, f"{at}.dur")),
                "stream": args.get("stream"), "name": name}
    launches.sort(key=lambda e: e["ts_us"])
    return launches, kernels


_HINT = "pass the trace written by prof.export_chrome_trace"


# ``value`` when it has the JSON type the join reads, else a UsageError naming the event and field
def _need_array(value: Json, where: str, field: str) -> list[Json]:
    checked: list[Json] = require_type(value, "array", where=where, field=field, what="profiler trace",
                                       hint=_HINT)
    return checked


def _need_object(value: Json, where: str, field: str) -> dict[str, Json]:
    checked: dict[str, Json] = require_type(value, "object", where=where, field=field,
                                            what="profiler trace", hint=_HINT)
    return checked


def _need_number(value: Json, where: str, field: str) -> float:
    checked: float = require_type(value, "number", where=where, field=field, what="profiler trace",
                                  hint=_HINT)
    return checked


def _need_integer(value: Json, where: str, field: str) -> int:
    checked: int = require_type(value, "integer", where=where, field=field, what="profiler trace",
                                hint=_HINT)
    return checked


def join(ebpf_ts_ns: np.ndarray, ebpf_stream: np.ndarray, launches: list[dict[str, Any]],
         kernels: dict[int | str, dict[str, Any]]) -> dict[str, Any]:
    """Launch -> GPU-start delays (us), overall and per stream, with how the join went."""
    order = np.argsort(ebpf_ts_ns, kind="stable")
    ts = ebpf_ts_ns[order].astype(np.float64) / 1000.0
    streams = ebpf_stream[order]
    out: dict[str, Any] = {
        "measures": ("launch -> kernel start on the GPU: CUPTI kernel start (torch.profiler) minus the "
                     "eBPF driver-entry time mapped onto the profiler clock by the median "
                     "entry-to-runtime-call offset (so counted from the runtime launch call's start)"),
        "ebpf_launches": int(len(ts)),
        "profiler_launch_calls": len(launches),
        "profiler_kernels": len(kernels),
    }
    if len(ts) != len(launches) or not len(ts):
        out["delay_us"] = None
        out["reason"] = (f"cannot pair: {len(ts)} eBPF launches vs {len(launches)} profiler launch "
                         "calls in the window (both must cover the same launches)")
        return out
    prof_ts = np.array([e["ts_us"] for e in launches])
    offset = float(np.median(ts - prof_ts))
    delays = []
    per_stream: dict[str, list[float]] = {}
    stream_map: dict[str, Any] = {}
    unmatched = 0
    for i, e in enumerate(launches):
        # a launch without a correlation id has no kernel (None never keys one)
        k = kernels.get(e["correlation"]) if e["correlation"] is not None else None
        if k is None:
            unmatched += 1
            continue
        d = k["ts_us"] - (ts[i] - offset)
        delays.append(d)
        key = hex(int(streams[i]) & 0xFFFFFFFFFFFFFFFF)
        per_stream.setdefault(key, []).append(d)
        stream_map.setdefault(key, k["stream"])
    arr = np.array(delays)
    hist = LogLinearHistogram()
    hist.add_array(np.maximum(arr * 1000.0, 0).astype(np.int64))
    pct = dict(zip(("p50", "p90", "p99", "p99.9"),
                   np.percentile(arr, [50, 90, 99, 99.9]).tolist(), strict=False)) if len(arr) else {}
    out.update({
        "clock_offset_us": offset,
        "launches_without_kernel": unmatched,
        "negative_delays": int((arr < 0).sum()),
        "delay_us": {**pct, "max": float(arr.max()) if len(arr) else None, "count": int(len(arr))},
        "histogram_buckets_us": hist.buckets(1000.0),
        "per_stream": {k: {"cupti_stream": stream_map.get(k), "count": len(v),
                           "p50_us": float(np.percentile(v, 50)), "p99_us": float(np.percentile(v, 99))}
                       for k, v in per_stream.items()},
    })
    return out
