"""Issue 16 item 5 (audit): the matrix screen's confound column says what matrix.md says.

A cell outside the threshold whose difference is inside 2 SE is "within noise" in matrix.md;
the screen showed "—" there (now "in noise"), which its own legend reads as inside the threshold."""

from __future__ import annotations

from aorta_tui.core.aggregate import confound_check
from aorta_tui.core.process_record import ProcessRecord
from aorta_tui.core.trial_contract import TrialResult
from aorta_tui.tui.widgets.matrix_grid import IN_NOISE, confound_text


def _trials(cell: str, means: list[float]) -> list[TrialResult]:
    return [TrialResult(f"{cell}/trial-{i:03d}", cell, i, "pass", process=ProcessRecord(wall_s=1.0),
                        step_times_s=[m] * 3, step_time_source="workload")
            for i, m in enumerate(means)]


BASE = _trials("b", [1.0e-2, 1.01e-2, 0.99e-2])


def test_outside_the_threshold_but_inside_2_se_reads_within_noise() -> None:
    # mean x1.5 of the baseline, but the trials spread from 1 ms to 30 ms: not beyond 2 SE
    confound = confound_check(_trials("n", [1e-3, 3e-2, 1.5e-2]), BASE, 1.15)
    assert confound["flag"] is None and confound["significant"] is False
    # issue 38 item 14: the row says why: the noise band the difference falls inside
    assert confound_text({"confound": confound}) == f"{IN_NOISE} ±{confound['noise_s'] * 1e3:.1f}ms"


def test_a_p50_far_below_the_baseline_in_noise_shows_the_spread_that_explains_it() -> None:
    from aorta_tui.sweep.matrix_report import _within_noise

    # issue 38 item 14: 125 us against a baseline whose trials spread from 0.4 ms to 96 ms
    base = _trials("b", [9.6e-2, 4e-4, 4.8e-2])
    confound = confound_check(_trials("c", [1.25e-4, 1.3e-4, 1.2e-4]), base, 1.15)
    assert confound["significant"] is False
    assert confound_text({"confound": confound}).startswith(f"{IN_NOISE} ±")
    assert "ms" in confound_text({"confound": confound})
    text = _within_noise(confound)
    assert text.startswith("within noise (x1/") and "noise ±" in text and " ms)" in text


def test_a_significant_change_shows_its_flag_and_inside_the_band_a_dash() -> None:
    slower = confound_check(_trials("s", [1.2e-2] * 3), BASE, 1.15)
    assert confound_text({"confound": slower}) == "speed (+20%)"
    inside = confound_check(_trials("i", [1.02e-2] * 3), BASE, 1.15)
    assert confound_text({"confound": inside}) == "—"
    assert confound_text({}) == "—"  # no aggregate yet
