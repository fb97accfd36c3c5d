"""Pure functions from a recorded timeline to the queue metrics.

Nothing here knows about torch or devices: the harness records :class:`LaunchRecord`s (host
and device timestamps on one clock, in nanoseconds) and these functions turn them into
figures. The profiler cross-check builds the same records from CUPTI's kernel timestamps and
calls the same functions, so both sides are computed identically. Definitions are in
``docs/hwqueue.md``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aorta_tui.core.stats import percentile


@dataclass(frozen=True)
class LaunchRecord:
    """One launch: a host call that issued work on one stream, and that work on the device."""

    iteration: int
    stream: int
    label: str
    host_start_ns: float
    host_end_ns: float
    gpu_start_ns: float
    gpu_end_ns: float


def stats(values: Sequence[float]) -> dict[str, float] | None:
    """count, mean, p50, p95, p99 (linear interpolation), min, max, std (population)."""
    if not values:
        return None
    xs = sorted(float(v) for v in values)
    n = len(xs)
    mean = math.fsum(xs) / n
    var = math.fsum((x - mean) ** 2 for x in xs) / n
    return {
        "count": n,
        "mean": mean,
        "p50": percentile(xs, 50.0),
        "p95": percentile(xs, 95.0),
        "p99": percentile(xs, 99.0),
        "min": xs[0],
        "max": xs[-1],
        "std": math.sqrt(var),
    }


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by the union of [start, end] intervals."""
    total = 0.0
    cur_s: float | None = None
    cur_e = 0.0
    for s, e in sorted(intervals):
        if e < s:
            s, e = e, s
        if cur_s is None:
            cur_s, cur_e = s, e
        elif s <= cur_e:
            cur_e = max(cur_e, e)
        else:
            total += cur_e - cur_s
            cur_s, cur_e = s, e
    if cur_s is not None:
        total += cur_e - cur_s
    return total


def per_stream_busy_ns(records: Sequence[LaunchRecord]) -> dict[int, float]:
    """Per stream, the length of the union of its launches' device intervals."""
    by_stream: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for r in records:
        by_stream[r.stream].append((r.gpu_start_ns, r.gpu_end_ns))
    return {s: union_length(iv) for s, iv in sorted(by_stream.items())}


def device_span_ns(records: Sequence[LaunchRecord]) -> float:
    if not records:
        return 0.0
    return max(r.gpu_end_ns for r in records) - min(r.gpu_start_ns for r in records)


def achieved_concurrency(records: Sequence[LaunchRecord]) -> float | None:
    """Sum of per-stream busy time over the device timeline's span (0..number of streams)."""
    span = device_span_ns(records)
    if span <= 0:
        return None
    return math.fsum(per_stream_busy_ns(records).values()) / span


def launch_delays_ns(records: Sequence[LaunchRecord],
                     keep_negative: bool = False) -> tuple[list[float], int]:
    """HTA's launch delay (device start minus host end of the launch call), per launch.

    Returns the measurable delays and how many launches were left out because their device
    start came before the host call returned: with events that means the start marker fired
    on an idle stream before the kernel was submitted, so it does not time the kernel. With
    kernel timestamps (``keep_negative``) a kernel starting before its runtime call returned
    is a real measurement and is kept.
    """
    measured: list[float] = []
    unmeasurable = 0
    for r in records:
        delay = r.gpu_start_ns - r.host_end_ns
        if delay >= 0 or keep_negative:
            measured.append(delay)
        else:
            unmeasurable += 1
    return measured, unmeasurable


def queue_depth(records: Sequence[LaunchRecord], max_points: int = 200) -> dict[str, object] | None:
    """Launches submitted (host end of call) and not yet finished (device end), over time.

    Returns max, time-weighted mean and a down-sampled ``[[t_ms, depth], ...]`` series with
    t relative to the first submission.
    """
    if not records:
        return None
    changes: list[tuple[float, int]] = []
    for r in records:
        submitted = r.host_end_ns
        finished = max(r.gpu_end_ns, submitted)
        changes.append((submitted, +1))
        changes.append((finished, -1))
    # at equal times, finish before submit: an instantaneous launch never counts as queued
    changes.sort(key=lambda c: (c[0], c[1]))
    t0 = changes[0][0]
    depth = 0
    peak = 0
    weighted = 0.0
    last_t = t0
    steps: list[tuple[float, int]] = []
    for t, d in changes:
        weighted += depth * (t - last_t)
        last_t = t
        depth += d
        peak = max(peak, depth)
        if steps and steps[-1][0] == t:
            steps[-1] = (t, depth)
        else:
            steps.append((t, depth))
    span = changes[-1][0] - t0
    mean = weighted / span if span > 0 else 0.0
    stride = max(1, math.ceil(len(steps) / max_points))
    series = [[(t - t0) / 1e6, dep] for t, dep in steps[::stride]]
    return {"max": peak, "mean": mean, "series": series}


@dataclass(frozen=True)
class Gaps:
    intra_ns: list[float]
    inter_ns: list[float]

    @property
    def switch_overhead_ns(self) -> float | None:
        """mean(inter-stream idle gaps) - mean(intra-stream idle gaps); None if either is empty."""
        if not self.intra_ns or not self.inter_ns:
            return None
        return math.fsum(self.inter_ns) / len(self.inter_ns) - math.fsum(self.intra_ns) / len(
            self.intra_ns
        )


def idle_gaps(records: Sequence[LaunchRecord]) -> Gaps:
    """Device-idle gaps, split by whether the work that resumes is on the same stream.

    Launches are taken in device start order. When a launch starts after everything before it
    has finished, the device was idle for ``start - latest_end``; that gap is intra-stream if
    the resuming launch is on the stream whose launch ended latest, inter-stream otherwise.
    """
    ordered = sorted(records, key=lambda r: (r.gpu_start_ns, r.gpu_end_ns))
    intra: list[float] = []
    inter: list[float] = []
    latest_end: float | None = None
    latest_stream = -1
    for r in ordered:
        if latest_end is not None and r.gpu_start_ns > latest_end:
            gap = r.gpu_start_ns - latest_end
            (intra if r.stream == latest_stream else inter).append(gap)
        if latest_end is None or r.gpu_end_ns >= latest_end:
            latest_end = r.gpu_end_ns
            latest_stream = r.stream
    return Gaps(intra, inter)


def iteration_latencies_ns(
    records: Sequence[LaunchRecord], iteration_starts_ns: Sequence[float]
) -> list[float]:
    """Per iteration: latest device end of its launches minus the host time it began."""
    latest: dict[int, float] = {}
    for r in records:
        latest[r.iteration] = max(latest.get(r.iteration, r.gpu_end_ns), r.gpu_end_ns)
    return [latest[i] - start for i, start in enumerate(iteration_starts_ns) if i in latest]


def iteration_periods_ns(iteration_starts_ns: Sequence[float], end_ns: float) -> list[float]:
    """Host time between consecutive iteration starts; the last one ends at ``end_ns``."""
    bounds = [*iteration_starts_ns, end_ns]
    return [b - a for a, b in zip(bounds, bounds[1:], strict=False)]


def scale(d: dict[str, float] | None, factor: float) -> dict[str, float] | None:
    """Divide the time-valued entries of a :func:`stats` dict by ``factor`` (ns -> us/ms)."""
    if d is None:
        return None
    return {k: (v if k == "count" else v / factor) for k, v in d.items()}
