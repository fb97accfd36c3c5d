"""How many trials the default prepares ahead, bounded by cores and free memory."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.trial.prepared import MAX_AHEAD, default_ahead


def test_the_two_core_box_prepares_one_and_the_h200_box_eight():
    assert default_ahead(cpus=2, mem_available_gib=24.0) == 1
    assert default_ahead(cpus=16, mem_available_gib=120.0) == 8
    assert default_ahead(cpus=16, mem_available_gib=5.0) == 2  # memory bounds it: 2 GiB each


@given(st.integers(min_value=0, max_value=4096),
       st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e6, allow_nan=False)))
def test_ahead_is_always_between_one_and_the_cap(cpus, mem):
    n = default_ahead(cpus=cpus, mem_available_gib=mem)
    assert 1 <= n <= MAX_AHEAD
    assert n <= max(1, cpus // 2)
