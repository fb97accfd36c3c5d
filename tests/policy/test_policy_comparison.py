"""Bootstrap intervals and the "call a difference only when intervals separate" rule."""

from __future__ import annotations

import numpy as np
import pytest

from aorta_tui.policy import comparison


def _normal(seed: int, loc: float, scale: float, n: int) -> list[float]:
    return list(np.random.default_rng(seed).normal(loc, scale, n))


def test_interval_contains_median_and_is_seeded() -> None:
    samples = _normal(1, 10.0, 1.0, 12)
    a = comparison.summarize(samples, seed=7)
    b = comparison.summarize(samples, seed=7)
    assert a == b
    assert a.median == pytest.approx(float(np.median(samples)))
    assert a.ci_low is not None and a.ci_high is not None
    assert a.ci_low <= a.median <= a.ci_high
    assert a.ci_low >= min(samples) and a.ci_high <= max(samples)


@pytest.mark.parametrize("seed", range(20))
def test_identical_distributions_are_unchanged(seed: int) -> None:
    ref = comparison.summarize(_normal(seed, 100.0, 5.0, 10), seed=seed)
    cand = comparison.summarize(_normal(seed + 1000, 100.0, 5.0, 10), seed=seed + 1)
    cmp = comparison.compare(ref, cand, higher_is_better=True)
    assert cmp.verdict == comparison.UNCHANGED
    assert cmp.assessment == "neutral"


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_clear_shift_is_called_with_the_right_sign(higher_is_better: bool) -> None:
    ref = comparison.summarize(_normal(3, 100.0, 2.0, 8), seed=1)
    up = comparison.summarize(_normal(4, 130.0, 2.0, 8), seed=2)
    down = comparison.summarize(_normal(5, 70.0, 2.0, 8), seed=3)

    cmp_up = comparison.compare(ref, up, higher_is_better=higher_is_better)
    assert cmp_up.verdict == comparison.HIGHER
    assert cmp_up.change_pct == pytest.approx(30.0, abs=3.0)
    assert cmp_up.assessment == ("better" if higher_is_better else "worse")

    cmp_down = comparison.compare(ref, down, higher_is_better=higher_is_better)
    assert cmp_down.verdict == comparison.LOWER
    assert cmp_down.change_pct == pytest.approx(-30.0, abs=3.0)
    assert cmp_down.assessment == ("worse" if higher_is_better else "better")


def test_no_direction_means_no_assessment() -> None:
    ref = comparison.summarize([1.0, 1.1, 0.9, 1.0], seed=0)
    cand = comparison.summarize([5.0, 5.1, 4.9, 5.0], seed=0)
    cmp = comparison.compare(ref, cand, higher_is_better=None)
    assert cmp.verdict == comparison.HIGHER and cmp.assessment == ""


def test_overlapping_noisy_shift_is_not_called() -> None:
    # A 2% shift under 10% noise with 5 trials cannot be told apart from noise.
    ref = comparison.summarize(_normal(11, 100.0, 10.0, 5), seed=0)
    cand = comparison.summarize(_normal(12, 102.0, 10.0, 5), seed=0)
    assert comparison.compare(ref, cand, higher_is_better=True).verdict == comparison.UNCHANGED


def test_too_few_samples_give_no_interval_and_no_call() -> None:
    three = comparison.summarize([1.0, 2.0, 3.0], seed=0)
    assert three.median == 2.0 and three.ci_low is None and "at least 4" in three.reason
    many = comparison.summarize([10.0, 10.1, 10.2, 10.3], seed=0)
    assert many.ci_low is not None
    cmp = comparison.compare(many, three, higher_is_better=True)
    assert cmp.verdict == comparison.NOT_AVAILABLE and "at least 4" in cmp.reason


def test_missing_values_are_not_zero() -> None:
    empty = comparison.summarize([], seed=0)
    assert empty.median is None and empty.n == 0 and empty.reason
    nan = comparison.summarize([float("nan"), 1.0, 2.0, 3.0], seed=0)
    assert nan.n == 3 and nan.median == 2.0


@pytest.mark.parametrize(("n", "limit"), [(4, 0.06), (5, 0.03), (7, 0.03)])
def test_false_call_rate_on_identical_distributions_is_small(n: int, limit: float) -> None:
    # Exact for n <= 5, where the interval is the sample range: 2 / C(2n, n) = 2.9% (n=4),
    # 0.8% (n=5). The limit leaves room for the simulation's own spread (400 pairs).
    rng = np.random.default_rng(n)
    called = 0
    for i in range(300):
        a = comparison.summarize(list(rng.normal(0.0, 1.0, n)), seed=i)
        b = comparison.summarize(list(rng.normal(0.0, 1.0, n)), seed=i + 10_000)
        called += comparison.compare(a, b, higher_is_better=True).verdict != comparison.UNCHANGED
    assert called / 300 <= limit


def test_a_real_shift_is_found_with_five_trials() -> None:
    rng = np.random.default_rng(99)
    found = 0
    for i in range(200):
        a = comparison.summarize(list(rng.normal(0.0, 1.0, 5)), seed=i)
        b = comparison.summarize(list(rng.normal(4.0, 1.0, 5)), seed=i + 1)
        found += comparison.compare(a, b, higher_is_better=True).verdict == comparison.HIGHER
    assert found / 200 >= 0.9
