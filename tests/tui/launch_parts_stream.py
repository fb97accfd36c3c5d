"""A fake collector's record stream (the default mode's KERNEL_LAT and STREAM records, as
cupti_collector.c writes them; only the GPU is made up) through the real join and the real
per-metric statistics, turned into the snapshots the trace engine streams: what the trace
monitor receives live from a default-mode trace of a backlog (a long kernel, then tiny ones)."""

from __future__ import annotations

import dataclasses

import numpy as np

from aorta_tui.core.events import HistogramSnapshot
from aorta_tui.trace.cost import program_cost
from aorta_tui.trace.device.attach import ACTIVITY_WORDING
from aorta_tui.trace.device.join import DispatchJoin
from aorta_tui.trace.device.records import Rec, pack, parse
from aorta_tui.trace.probes.cuda import DEVICE_METRICS, CudaProbes
from aorta_tui.trace.stream_stats import MetricStats

PID = 4242
HANDLE = 0x7F3A2C000D00
T0 = 10**12


def records(tiny: int = 300) -> bytes:
    """One 10 ms kernel, then ``tiny`` kernels queued behind it (queued -> submitted 3.3 us,
    submitted -> start 0.54 us for the first; the backlog's wait sits in push, as on the H200)."""
    out = [pack(Rec.HELLO, PID, 130001, 100, 0, 1, 0, 0, 1), pack(Rec.STREAM, PID, 13, HANDLE, 1, 0),
           pack(Rec.KERNEL_LAT, PID, 1, T0 + 3_840, T0 + 10_003_840, 1 << 32, 13, T0, T0 + 3_300)]
    for i in range(tiny):
        q = T0 + 20_000 + 9_000 * i
        start = T0 + 10_004_000 + 2_000 * i
        out.append(pack(Rec.KERNEL_LAT, PID, 2 + i, start, start + 1_500, 1 << 32, 13, q, start - 540))
    return b"".join(out)


def snapshots(tiny: int = 300) -> list[HistogramSnapshot]:
    metrics = {m.name: m for m in (*DEVICE_METRICS, CudaProbes.metrics[0])}
    metrics = {n: dataclasses.replace(m, measures=ACTIVITY_WORDING.get(n, m.measures)) for n, m in metrics.items()}
    stats = {n: MetricStats(m) for n, m in metrics.items()}

    def emit(name: str, ts: np.ndarray, pid: np.ndarray, key: np.ndarray, value: np.ndarray) -> None:
        stats[name].add(ts, pid, key, np.maximum(value, 0), None)

    def launches(ts: np.ndarray, pid: np.ndarray, _tid: np.ndarray, stream: np.ndarray) -> None:
        stats["launch"].add(ts, pid, stream, np.zeros(len(ts), dtype=np.int64), None)

    join = DispatchJoin(emit, launches="activity", on_launches=launches)
    join.add_device(parse(records(tiny)))
    wall = 2.0
    cost = {"program_cost": program_cost("activity", stats["launch"].count, wall)}
    clock = {**join.clock.to_dict(), "launch_time": "CUPTI queued timestamp"}
    out = []
    for name in ("launch", "launch_to_start", "launch_push", "launch_gpu_queue", "launch_host", "queued"):
        s = stats[name].summary(wall)
        out.append(s.snapshot(
            "tui-queue", f"cuda.{name}", events_per_s=s.count / wall, lost_events=0, malformed_lines=0,
            observer_cost=cost, clock=clock if name in ("launch_to_start", "queued", "launch_host") else {}))
    return out
