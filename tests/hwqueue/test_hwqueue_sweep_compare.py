"""Scaling analysis and noise-aware comparison on constructed inputs with known answers."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.errors import UsageError
from aorta_tui.hwqueue.compare import bootstrap_ci, compare
from aorta_tui.hwqueue.result import SUMMARY_FIELDS
from aorta_tui.hwqueue.sweep import analyse, parse_stream_counts
from tests.hwqueue.fake_results import fake_result

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def test_scaling_efficiency_peak_and_knee() -> None:
    a = analyse([(1, 10.0), (2, 19.0), (4, 30.0), (8, 31.0)])
    assert a["efficiency"] == pytest.approx({"1": 1.0, "2": 0.95, "4": 0.75, "8": 31 / 80})
    assert a["peak_streams"] == 8 and a["peak_throughput"] == 31.0
    assert a["knee_streams"] == 4  # 4 -> 8 gains only 3.3%


def test_knee_is_the_last_point_when_scaling_never_flattens() -> None:
    assert analyse([(1, 1.0), (2, 2.0), (4, 4.0)])["knee_streams"] == 4


def test_points_without_throughput_are_explained() -> None:
    assert analyse([(1, None)])["reason"] == "no point has a throughput"


def test_stream_list_parsing() -> None:
    assert parse_stream_counts("8,1,2,2") == [1, 2, 8]
    for bad in ("", "0,1", "a,b"):
        with pytest.raises(UsageError):
            parse_stream_counts(bad)


NOISY = [10.0, 12.0, 9.0, 11.0, 13.0, 8.0, 10.5, 11.5, 9.5, 10.0] * 3


def test_change_inside_the_spread_is_unchanged() -> None:
    base = fake_result(NOISY, NOISY)
    test = fake_result([x * 1.04 for x in NOISY], [x * 1.04 for x in NOISY])  # +4%, noise is ~15%
    rep = compare(base, test, min_change=0.02)
    rows = {r["metric"]: r for r in rep["rows"]}
    assert rows["throughput"]["verdict"] == "unchanged"
    assert rows["throughput"]["change"] == pytest.approx(1 / 1.04 - 1)
    assert rows["latency_mean_ms"]["verdict"] == "unchanged"
    assert rep["regressions"] == []


def test_change_outside_the_spread_is_a_regression_or_improvement() -> None:
    base = fake_result(NOISY, NOISY)
    slow = fake_result([x * 2 for x in NOISY], [x * 2 for x in NOISY])
    rep = compare(base, slow)
    assert "throughput" in rep["regressions"] and "latency_p50_ms" in rep["regressions"]
    rep = compare(slow, base)
    assert "throughput" in rep["improvements"] and rep["regressions"] == []


def test_missing_figures_are_not_comparable_and_notes_flag_mismatches() -> None:
    base = fake_result(NOISY, NOISY)
    other = copy.deepcopy(base)
    other["workload"]["name"] = "v"
    rep = compare(base, other)
    row = {r["metric"]: r for r in rep["rows"]}["switch_overhead_us"]
    assert row["verdict"] == "not comparable" and "both" in row["reason"]
    assert any("different workloads" in n for n in rep["notes"])
    # the row carries each run's own reason for the missing figure
    other["summary"]["throughput"] = None
    other["unavailable"] = {"throughput": "no GEMMs (gemms_per_stream=0)"}
    row = {r["metric"]: r for r in compare(base, other)["rows"]}["throughput"]
    assert row["verdict"] == "not comparable"
    assert row["reason"] == "not available in TEST (no GEMMs (gemms_per_stream=0))"


def test_figures_without_samples_are_changed_not_regressed() -> None:
    base = fake_result(NOISY, NOISY)
    test = copy.deepcopy(base)
    base["summary"]["launch_delay_p50_us"] = 10.0
    test["summary"]["launch_delay_p50_us"] = 20.0
    row = {r["metric"]: r for r in compare(base, test)["rows"]}["launch_delay_p50_us"]
    assert row["verdict"] == "changed" and row["spread"] == "none recorded"


@given(st.lists(st.floats(0.1, 100.0), min_size=2, max_size=40))
def test_bootstrap_interval_brackets_the_sample_range(xs: list[float]) -> None:
    ci = bootstrap_ci(xs, lambda v: sum(v) / len(v), resamples=200)
    assert ci is not None
    assert min(xs) - 1e-9 <= ci[0] <= ci[1] <= max(xs) + 1e-9


def test_a_zero_base_gives_no_relative_change_and_valid_json() -> None:
    import json

    base, test = fake_result(NOISY, NOISY), fake_result(NOISY, NOISY)
    base["summary"]["achieved_concurrency"] = 0.0
    base["samples"]["iteration_concurrency"] = [0.0] * len(NOISY)
    rep = compare(base, test)
    row = {r["metric"]: r for r in rep["rows"]}["achieved_concurrency"]
    assert row["change"] is None and row["change_reason"].startswith("the base value is 0")
    assert row["verdict"] == "improved"  # 0 -> 2 streams: a change, in the good direction
    json.loads(json.dumps(rep, allow_nan=False))  # no Infinity in the report


def test_two_sweeps_compare_point_by_point_on_the_common_stream_counts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json
    import subprocess
    import sys

    from aorta_tui.hwqueue.compare import compare_files
    from aorta_tui.hwqueue.harness import QueueRunConfig
    from aorta_tui.hwqueue.sweep import run_sweep

    base_cfg = QueueRunConfig(workload="tiny_kernel_stress", streams=1, iterations=3, warmup=0,
                              device="cpu", size="tiny")
    a = run_sweep(base_cfg, [1, 2], output=tmp_path / "a.json")
    b = run_sweep(QueueRunConfig(**{**base_cfg.__dict__, "run_id": ""}), [2, 4], output=tmp_path / "b.json")
    report = compare_files(a, b)
    assert report["streams"] == [2]
    assert {r["streams"] for r in report["rows"]} == {2}
    assert {r["metric"] for r in report["rows"]} == set(SUMMARY_FIELDS)
    assert any("1, 4" in n for n in report["notes"])  # the counts only one sweep measured
    with pytest.raises(UsageError, match="share no stream count"):
        compare_files(a, run_sweep(QueueRunConfig(**{**base_cfg.__dict__, "run_id": ""}), [4]))
    with pytest.raises(UsageError, match="one file is a stream sweep"):
        compare_files(a, a.points[0])
    # the CLI takes the files as they were written
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "compare", str(tmp_path / "a.json"),
                           str(tmp_path / "b.json"), "--no-fail", "--json"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["streams"] == [2]


def test_one_rule_decides_changed_for_every_figure() -> None:
    # issue 28: -16.5% was "changed" for cost_us_per_kernel and "unchanged" for wall_s
    from aorta_tui.hwqueue.compare import RULE, compare

    base = fake_result([10.0] * 20, [5.0] * 20)
    test = fake_result([10.0] * 20, [5.0] * 20)
    base["summary"].update(wall_s=1.0, cost_us_per_kernel=100.0)
    test["summary"].update(wall_s=0.835, cost_us_per_kernel=83.5)
    rows = {r["metric"]: r for r in compare(base, test, min_change=0.05)["rows"]}
    for key in ("wall_s", "cost_us_per_kernel"):  # no spread recorded for either: same rule
        assert rows[key]["change"] == pytest.approx(-0.165)
        assert rows[key]["verdict"] == "changed", key
    test["summary"].update(wall_s=0.98, cost_us_per_kernel=98.0)  # below --min-change
    rows = {r["metric"]: r for r in compare(base, test, min_change=0.05)["rows"]}
    assert rows["wall_s"]["verdict"] == rows["cost_us_per_kernel"]["verdict"] == "unchanged"
    assert "the same rule for every figure" in RULE


def test_compare_help_states_the_rule(tmp_path) -> None:
    from tests.engine_support import aorta

    out = aorta("queue", "compare", "--help", cwd=tmp_path, env={"COLUMNS": "200"}).stdout
    assert "One rule for every figure" in out and "--min-change" in out
