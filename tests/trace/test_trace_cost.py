"""What the traced program pays (issue 34, aorta_tui/trace/cost.py): a share of its wall time from
the added time per launch x launches, with its interval; where it cannot be estimated, why."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.trace.cost import ADDED_NS_PER_LAUNCH, program_cost, share_text


def test_the_default_mode_uses_its_measured_cost_with_the_interval_and_says_it_is_a_lower_bound() -> None:
    med, lo, hi = ADDED_NS_PER_LAUNCH["activity"]
    c = program_cost("activity", 1_000_000, 10.0)
    assert c["share"] == pytest.approx(1_000_000 * med / 1e9 / 10.0)
    assert c["share_ci95"] == pytest.approx([1_000_000 * lo / 1e9 / 10.0, 1_000_000 * hi / 1e9 / 10.0])
    assert c["lower_bound"] and "not calibrated on this machine" in c["source"]
    assert c["training_step_ratio"]["median"] > 1.0
    text = share_text(c)
    assert "of the program's time" in text and "% of a CPU" not in text and "training step" in text


def test_ebpf_only_uses_the_calibration_and_says_it_has_no_interval() -> None:
    c = program_cost("ebpf-only", 1000, 1.0, calibrated_per_launch_ns=900.0)
    assert c["share"] == pytest.approx(1000 * 900 / 1e9) and c["share_ci95"] is None
    assert "calibrated on this machine" in c["source"]


@pytest.mark.parametrize("source", ["cross-check", "ebpf-only", None])
def test_unmeasured_modes_say_why_instead_of_a_figure(source) -> None:  # noqa: ANN001
    c = program_cost(source, 10, 1.0)
    assert c["share"] is None and "was not measured" in c["reason"]
    assert share_text(c).startswith("not estimated:")


def test_no_wall_time_is_no_figure() -> None:
    assert program_cost("activity", 10, 0.0)["share"] is None


@given(st.integers(0, 10**9), st.floats(1e-3, 1e6))
def test_the_interval_always_holds_the_figure(launches, wall) -> None:  # noqa: ANN001
    c = program_cost("activity", launches, wall)
    lo, hi = c["share_ci95"]
    assert lo <= c["share"] <= hi
