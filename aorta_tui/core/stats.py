"""The one percentile of the project, and the spread and noise marker of a set of step times.

Every percentile of plain values in the project is :func:`percentile` (the aggregate of a sweep,
the queue metrics and their bootstrap intervals, the workloads' latency figures through
:func:`percentile_ms`, the GPU check scripts); a test keeps any other module from defining one.
Two definitions exist, named by ``method``:

- ``linear`` (numpy's default): interpolate between the two closest ranks;
- ``nearest`` (nearest rank, numpy's ``inverted_cdf``): the smallest value with at least q% of
  the values at or below it, so the answer is always one of the values.

numpy arrays of traced events keep ``np.percentile`` with the same two method names, because
sorting millions of values in Python would cost seconds. A histogram's quantile
(``trace/hdr.py``) is a different thing, read from bucket counts, but it uses the nearest-rank
convention: it answers the upper edge of the bucket holding the ``nearest`` percentile.

Noise marker (:func:`noise_marker`), checked in this order on a cell's pooled step times:

- ``few samples``: fewer than ``MIN_SAMPLES`` step times; no spread is judged from so few;
- ``bimodal``: the sorted times split, at their widest gap, into two groups each holding at
  least ``BIMODAL_MIN_SHARE`` of the samples (and at least 2), whose nearest members differ by
  a factor of ``BIMODAL_RATIO`` or more (e.g. 30 µs steps among 16 ms scheduler stalls): the
  mean and the p50 then describe neither group;
- ``dispersed``: the interquartile range exceeds ``DISPERSED_REL_IQR`` times the median.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

METHODS = ("linear", "nearest")
MIN_SAMPLES = 5
BIMODAL_RATIO = 3.0
BIMODAL_MIN_SHARE = 0.1
DISPERSED_REL_IQR = 0.5


def percentile(values: Sequence[float], q: float, *, method: str = "linear", presorted: bool = False) -> float:
    """The q-th percentile (q in 0..100) of ``values``; ``presorted`` skips the sort.

    Raises ``ValueError`` for no values, a q outside 0..100 or an unknown method.
    """
    if method not in METHODS:
        raise ValueError(f"unknown percentile method {method!r} (one of {', '.join(METHODS)})")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} is outside 0..100")
    xs = values if presorted else sorted(values)
    if not xs:
        raise ValueError("percentile of no values")
    if method == "nearest":
        rank = max(1, math.ceil(q / 100.0 * len(xs)))
        return xs[min(rank, len(xs)) - 1]
    if len(xs) == 1:
        return float(xs[0])
    # numpy's own arithmetic, operation for operation: the index (n - 1) * (q / 100), and its
    # two-sided lerp (from the nearer end: a + d*t for t < 0.5, b - d*(1 - t) above), so the
    # figures agree to the bit (a + d*t alone was 2 ulps of 16777217 off numpy's near b). Both
    # forms are exactly a when a == b (a * (1 - f) + b * f can be off by an ulp, which put a
    # bootstrap interval's lower end above its upper end); the clamp keeps it between them.
    pos = (len(xs) - 1) * (q / 100.0)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    a, b = float(xs[lo]), float(xs[hi])
    t = pos - lo
    d = b - a
    x = b - d * (1 - t) if t >= 0.5 else a + d * t
    return min(max(x, a), b)


def percentile_ms(seconds: Sequence[float], q: float) -> float | None:
    """A workload's latency figure: the nearest-rank q-th percentile of ``seconds``, in ms;
    ``None`` for no values (a run stopped before its first timed step).

    Nearest rank, because a latency percentile names a step that happened (an interpolated p99
    between a 2 ms step and a 40 ms stall is a time no step took), and because it is the
    convention of the trace histograms (``trace/hdr.py``, numpy's ``inverted_cdf``), so a
    workload's p99 and a trace's p99 of the same steps agree.
    """
    return percentile(seconds, q, method="nearest") * 1e3 if seconds else None


def spread(values: Sequence[float]) -> dict[str, float | int | None]:
    """p25, p50, p75, the IQR and the count of ``values`` (``None`` figures for no values)."""
    xs = sorted(values)
    if not xs:
        return {"p25": None, "p50": None, "p75": None, "iqr": None, "n": 0}
    p25, p50, p75 = (percentile(xs, q, presorted=True) for q in (25, 50, 75))
    return {"p25": p25, "p50": p50, "p75": p75, "iqr": p75 - p25, "n": len(xs)}


def _widest_split(xs: list[float]) -> tuple[int, float] | None:
    """(index, ratio) of the widest multiplicative gap between neighbours where both sides keep
    enough samples to be a group of their own; ``None`` when no split is allowed."""
    n = len(xs)
    side = max(2, math.ceil(BIMODAL_MIN_SHARE * n))
    best: tuple[int, float] | None = None
    for i in range(side, n - side + 1):
        lo, hi = xs[i - 1], xs[i]
        ratio = hi / lo if lo > 0 else (math.inf if hi > 0 else 1.0)
        if best is None or ratio > best[1]:
            best = (i, ratio)
    return best


def noise_marker(values: Sequence[float]) -> dict[str, Any]:
    """``{"flag": None | "few samples" | "bimodal" | "dispersed", "reason": str, ...}``; see the
    module docstring for the definitions."""
    xs = sorted(values)
    n = len(xs)
    if n < MIN_SAMPLES:
        return {"flag": "few samples", "reason": f"{n} step time(s) < {MIN_SAMPLES}: spread not judged"}
    split = _widest_split(xs)
    if split is not None and split[1] >= BIMODAL_RATIO:
        i, ratio = split
        low, high = percentile(xs[:i], 50, presorted=True), percentile(xs[i:], 50, presorted=True)
        gap = "inf" if math.isinf(ratio) else f"{ratio:.1f}"
        return {"flag": "bimodal", "groups": [{"n": i, "p50": low}, {"n": n - i, "p50": high}],
                "gap_ratio": None if math.isinf(ratio) else ratio,
                "reason": f"two groups: {i} steps around {_fmt(low)} and {n - i} around {_fmt(high)} "
                          f"(gap x{gap} >= x{BIMODAL_RATIO:g})"}
    s = spread(xs)
    p50, iqr = s["p50"], s["iqr"]
    assert p50 is not None and iqr is not None
    rel = iqr / p50 if p50 > 0 else (math.inf if iqr > 0 else 0.0)
    if rel > DISPERSED_REL_IQR:
        return {"flag": "dispersed", "rel_iqr": None if math.isinf(rel) else rel,
                "reason": f"IQR {_fmt(iqr)} is {rel:.2f} x p50 (> {DISPERSED_REL_IQR:g})"}
    return {"flag": None, "rel_iqr": rel,
            "reason": f"IQR {_fmt(iqr)} is {rel:.2f} x p50 (<= {DISPERSED_REL_IQR:g}), no two groups"}


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


# Two-sided 95% critical values of Student's t by degrees of freedom (the standard table).
_T95 = ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (6, 2.447), (7, 2.365),
        (8, 2.306), (9, 2.262), (10, 2.228), (12, 2.179), (15, 2.131), (20, 2.086),
        (30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980))


def t_critical_95(df: float) -> float:
    """Student's t at 97.5% for ``df`` degrees of freedom (Welch's are fractional): the table,
    exact at its rows, interpolated in 1/df between them (closer than the rows' spacing,
    which matters only below 3 degrees); 1.96 as df -> inf."""
    if df <= _T95[0][0]:
        return _T95[0][1]
    rows = (*_T95, (math.inf, 1.960))
    for (d0, t0), (d1, t1) in zip(rows, rows[1:], strict=False):
        if df <= d1:
            x0, x1, x = 1 / d0, (0.0 if math.isinf(d1) else 1 / d1), 1 / df
            return t1 + (t0 - t1) * (x - x1) / (x0 - x1)
    return 1.960
