"""Calibration arithmetic: a probe cost hidden by timing noise is reported as unknown, not 0."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.trace.calibrate import _difference

NS = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


@given(probed=NS, base=NS)
def test_probe_cost_is_the_difference_or_none_with_a_reason(probed: float, base: float) -> None:
    result: dict = {"reasons": {}}
    cost = _difference(result, "cuda", probed, base)
    if probed > base:
        assert cost == probed - base and "cuda" not in result["reasons"]
    else:
        assert cost is None
        assert "not resolved" in result["reasons"]["cuda"] and "noise" in result["reasons"]["cuda"]
