"""Log-linear (HDR-style) histogram over non-negative integers (nanoseconds, bytes).

Values below ``2**SUB_BITS`` get a bucket each; above that every power-of-two octave is split
into ``2**SUB_BITS`` equal buckets, so a bucket is at most 1/2**SUB_BITS (6.25 %) of its value
wide. The same bucket function is generated into bpftrace programs for aggregate mode
(:func:`aorta_tui.trace.program.bucket_statements`), so in-kernel and user-space histograms
have identical buckets and can be merged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SUB_BITS = 4
SUB_COUNT = 1 << SUB_BITS


def bucket_index(values: np.ndarray) -> np.ndarray:
    """Bucket index of every value (int64 array, values >= 0; negatives go to bucket 0)."""
    v = np.asarray(values, dtype=np.int64)
    v = np.maximum(v, 0)
    out = v.copy()
    big = v >= SUB_COUNT
    if np.any(big):
        vb = v[big]
        # frexp is exact for integers below 2**53 (ns durations are far below that).
        _, exp = np.frexp(vb.astype(np.float64))
        e = exp.astype(np.int64) - 1
        sub = np.right_shift(vb, e - SUB_BITS) & (SUB_COUNT - 1)
        out[big] = ((e - SUB_BITS + 1) << SUB_BITS) | sub
    return out


def bucket_index_scalar(value: int) -> int:
    v = max(int(value), 0)
    if v < SUB_COUNT:
        return v
    e = v.bit_length() - 1
    sub = (v >> (e - SUB_BITS)) & (SUB_COUNT - 1)
    return ((e - SUB_BITS + 1) << SUB_BITS) | sub


def bucket_bounds(index: int) -> tuple[int, int]:
    """``[low, high)`` of bucket ``index`` in the value's unit."""
    if index < SUB_COUNT:
        return index, index + 1
    e = (index >> SUB_BITS) + SUB_BITS - 1
    sub = index & (SUB_COUNT - 1)
    shift = e - SUB_BITS
    low = (SUB_COUNT + sub) << shift
    return low, low + (1 << shift)


@dataclass
class LogLinearHistogram:
    """Counts per bucket plus exact count/min/max/sum (exact whatever the bucket width)."""

    counts: dict[int, int] = field(default_factory=dict)
    total: int = 0
    min: int | None = None
    max: int | None = None
    sum: int = 0

    def add_array(self, values: np.ndarray) -> None:
        if len(values) == 0:
            return
        v = np.asarray(values, dtype=np.int64)
        idx, cnt = np.unique(bucket_index(v), return_counts=True)
        for i, c in zip(idx.tolist(), cnt.tolist(), strict=False):
            self.counts[i] = self.counts.get(i, 0) + c
        self.total += int(len(v))
        lo, hi = int(v.min()), int(v.max())
        self.min = lo if self.min is None else min(self.min, lo)
        self.max = hi if self.max is None else max(self.max, hi)
        self.sum += int(v.sum())

    def add_bucket_counts(self, counts: dict[int, int]) -> None:
        """Merge bucket counts computed elsewhere (the kernel, in aggregate mode)."""
        for i, c in counts.items():
            if c:
                self.counts[int(i)] = self.counts.get(int(i), 0) + int(c)
                self.total += int(c)

    def replace_bucket_counts(self, counts: dict[int, int]) -> None:
        """Aggregate mode prints cumulative maps: each print replaces the previous one."""
        self.counts = {}
        self.total = 0
        self.add_bucket_counts(counts)

    def percentile(self, q: float) -> float | None:
        """Value at quantile ``q`` (0..100): the upper edge of the bucket that holds it.

        The answer is within one bucket width (<= 6.25 %) of the exact percentile; the
        maximum is capped at the exact maximum when it is known.
        """
        if self.total == 0:
            return None
        rank = max(1, int(np.ceil(q / 100.0 * self.total)))
        seen = 0
        for i in sorted(self.counts):
            seen += self.counts[i]
            if seen >= rank:
                high = float(bucket_bounds(i)[1])
                return min(high, float(self.max)) if self.max is not None else high
        return float(self.max) if self.max is not None else None

    def buckets(self, scale: float = 1.0) -> list[list[float]]:
        """``[low, high, count]`` triples for the non-empty buckets, divided by ``scale``."""
        out = []
        for i in sorted(self.counts):
            low, high = bucket_bounds(i)
            out.append([low / scale, high / scale, self.counts[i]])
        return out
