"""Classic Prometheus histogram buckets for the trace metrics, chosen from each metric's unit.

prometheus_client writes classic (``le``-bucketed) histograms, not native ones, so every
metric gets fixed bounds that suit its unit. The trace engine's log-linear (HDR) buckets are
at most 6.25 % wide; each is counted in the first classic bucket whose bound is at least the
largest value the HDR bucket can hold, so a classic bucket never counts a value above its
bound and a value is at most one HDR bucket (<= 6.25 %) early in the next one. The exact
percentiles stay in the tool's own output (``-o``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from aorta_tui.trace.hdr import bucket_bounds


def _decades(lo_exp: int, hi_exp: int, steps: Iterable[float] = (1.0, 2.5, 5.0)) -> tuple[float, ...]:
    out = [s * 10.0 ** e for e in range(lo_exp, hi_exp) for s in steps]
    out.append(10.0 ** hi_exp)
    return tuple(out)


# durations and intervals, in seconds: 100 ns .. 10 s, 1-2.5-5 per decade (a launch->start on an
# idle H200 is a few us; a hung queue is seconds)
SECONDS = _decades(-7, 1)
SECONDS_TEXT = "100 ns to 10 s, 1-2.5-5 per decade"
# copy sizes, in bytes: 64 B .. 4 GiB, powers of 4
BYTES = tuple(float(64 * 4 ** i) for i in range(14))
BYTES_TEXT = "64 B to 4 GiB, powers of 4"
# counts (kernels per graph launch): 1 .. 4096, powers of 2
COUNTS = tuple(float(2 ** i) for i in range(13))
COUNTS_TEXT = "1 to 4096, powers of 2"


def bounds_for(unit: str) -> tuple[tuple[float, ...], float, str]:
    """(bounds in the exported unit, base units per exported unit, the bounds in words) of a
    trace metric's unit (``us``: recorded in ns, exported in seconds)."""
    if unit == "us":
        return SECONDS, 1e9, SECONDS_TEXT
    if unit == "bytes":
        return BYTES, 1.0, BYTES_TEXT
    return COUNTS, 1.0, COUNTS_TEXT


def exported_unit(unit: str) -> str:
    """The suffix Prometheus convention gives a metric of ``unit``."""
    return {"us": "seconds", "bytes": "bytes"}.get(unit, "count")


def rebucket(hdr_counts: dict[int, int], bounds: tuple[float, ...], per_unit: float) -> list[int]:
    """Cumulative counts per bound, plus the ``+Inf`` total last, from HDR bucket counts."""
    per_bucket = [0] * (len(bounds) + 1)
    scaled = [b * per_unit for b in bounds]
    for index, count in hdr_counts.items():
        if count <= 0:
            continue
        _low, high = bucket_bounds(int(index))
        largest = high - 1  # integer values: the HDR bucket holds [low, high - 1]
        per_bucket[bisect.bisect_left(scaled, largest)] += count
    out, running = [], 0
    for c in per_bucket:
        running += c
        out.append(running)
    return out
