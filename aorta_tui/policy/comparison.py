"""Comparison statistics: median and a 95% bootstrap confidence interval per metric, and a
difference against the reference called only when the intervals do not overlap.

The interval is the percentile bootstrap of the median (resampling the trials with
replacement, ``n_resamples`` times, seeded). Non-overlapping 95% intervals is a deliberately
conservative test: a policy is reported as "higher"/"lower" only when run-to-run noise cannot
explain the change; everything else is "unchanged (within noise)". With fewer than
``MIN_SAMPLES`` successful trials no interval is computed and no difference is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIN_SAMPLES = 4  # at 3, two samples of one distribution "separate" 10% of the time
DEFAULT_RESAMPLES = 10_000
CONFIDENCE = 0.95

UNCHANGED = "unchanged (within noise)"
HIGHER = "higher"
LOWER = "lower"
NOT_AVAILABLE = "not available"


@dataclass(frozen=True)
class Summary:
    """Median and bootstrap interval of one metric under one policy."""

    n: int
    median: float | None
    ci_low: float | None
    ci_high: float | None
    reason: str = ""  # why median or interval is missing

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n, "median": self.median, "ci_low": self.ci_low,
                               "ci_high": self.ci_high}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Comparison:
    """How a policy's metric relates to the reference's."""

    verdict: str  # HIGHER, LOWER, UNCHANGED, NOT_AVAILABLE
    change_pct: float | None  # (median - reference median) / |reference median| * 100
    assessment: str  # "better", "worse", "neutral", "" (unknown direction or no call)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "change_pct": self.change_pct,
                               "assessment": self.assessment}
        if self.reason:
            out["reason"] = self.reason
        return out


def summarize(samples: Sequence[float], *, seed: int, n_resamples: int = DEFAULT_RESAMPLES,
              confidence: float = CONFIDENCE) -> Summary:
    """Median and the percentile-bootstrap interval of the median of ``samples``."""
    import numpy as np

    values = np.asarray([float(x) for x in samples if x is not None], dtype=float)
    values = values[np.isfinite(values)]
    n = int(values.size)
    if n == 0:
        return Summary(0, None, None, None, "no successful trial measured it")
    median = float(np.median(values))
    if n < MIN_SAMPLES:
        return Summary(n, median, None, None,
                       f"interval needs at least {MIN_SAMPLES} trials, got {n}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    medians = np.median(values[idx], axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(medians, [tail, 100.0 - tail])
    return Summary(n, median, float(low), float(high))


def compare(reference: Summary, candidate: Summary, *, higher_is_better: bool | None) -> Comparison:
    """Call a difference only when both intervals exist and do not overlap."""
    change = None
    if reference.median is not None and candidate.median is not None and reference.median != 0:
        change = (candidate.median - reference.median) / abs(reference.median) * 100.0
    if None in (reference.ci_low, reference.ci_high, candidate.ci_low, candidate.ci_high):
        missing = reference if reference.ci_low is None else candidate
        return Comparison(NOT_AVAILABLE, change, "",
                          missing.reason or "no confidence interval")
    assert reference.ci_low is not None and reference.ci_high is not None
    assert candidate.ci_low is not None and candidate.ci_high is not None
    if candidate.ci_low > reference.ci_high:
        verdict = HIGHER
    elif candidate.ci_high < reference.ci_low:
        verdict = LOWER
    else:
        return Comparison(UNCHANGED, change, "neutral")
    if higher_is_better is None:
        assessment = ""
    else:
        assessment = "better" if (verdict == HIGHER) == higher_is_better else "worse"
    return Comparison(verdict, change, assessment)
