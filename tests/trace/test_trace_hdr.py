from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.trace.hdr import (
    SUB_COUNT,
    LogLinearHistogram,
    bucket_bounds,
    bucket_index,
    bucket_index_scalar,
)

values = st.integers(min_value=0, max_value=(1 << 52))


@given(st.lists(values, min_size=1, max_size=200))
def test_vector_and_scalar_bucket_index_agree_and_bounds_contain_value(vals: list[int]) -> None:
    idx = bucket_index(np.array(vals, dtype=np.int64))
    for v, i in zip(vals, idx.tolist(), strict=False):
        assert i == bucket_index_scalar(v)
        low, high = bucket_bounds(i)
        assert low <= v < high


@given(values)
def test_bucket_width_is_at_most_one_sixteenth_of_its_value(v: int) -> None:
    low, high = bucket_bounds(bucket_index_scalar(v))
    if v >= SUB_COUNT:
        assert (high - low) * SUB_COUNT <= low


def test_buckets_are_contiguous_and_increasing() -> None:
    prev_high = 0
    for i in range(0, 40 * SUB_COUNT):
        low, high = bucket_bounds(i)
        assert low == prev_high
        assert high > low
        prev_high = high


@settings(max_examples=50)
@given(st.lists(st.integers(min_value=1, max_value=10**9), min_size=1, max_size=500),
       st.sampled_from([50.0, 90.0, 99.0, 99.9]))
def test_histogram_percentile_is_within_one_bucket_of_exact(vals: list[int], q: float) -> None:
    h = LogLinearHistogram()
    h.add_array(np.array(vals))
    exact = float(np.percentile(np.array(vals), q, method="inverted_cdf"))
    got = h.percentile(q)
    assert got is not None
    low, high = bucket_bounds(bucket_index_scalar(int(exact)))
    assert exact <= got <= max(high, exact)
    assert h.total == len(vals) and h.max == max(vals) and h.min == min(vals)


def test_empty_histogram_has_no_percentiles() -> None:
    assert LogLinearHistogram().percentile(50) is None
