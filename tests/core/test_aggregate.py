"""Per-cell statistics and the noise-aware confound flag."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.aggregate import aggregate, confound_check
from aorta_tui.core.process_record import ProcessRecord
from aorta_tui.core.stats import percentile
from aorta_tui.core.trial_contract import TrialResult


def rec(cell: str, trial: int, steps: list[float] | None, verdict: str = "pass", detectors=()) -> TrialResult:
    return TrialResult(f"{cell}/trial-{trial:03d}", cell, trial, verdict,
                       detections=[{"id": d, "severity": "fail"} for d in detectors],
                       process=ProcessRecord(wall_s=1.0), step_times_s=steps,
                       step_time_source="workload" if steps else "none")


def test_counts_rates_and_detectors():
    records = [rec("a", 0, [1.0], "pass"), rec("a", 1, [1.0], "fail", ["nonzero_exit", "cuda_error"]),
               rec("a", 2, None, "error", ["timeout"]), rec("a", 3, [1.0], "fail", ["cuda_error"])]
    (s,) = aggregate(records, ["a"], baseline_cell="a", threshold=1.15)
    assert (s.trials, s.passed, s.failed, s.errored) == (4, 1, 2, 1)
    assert s.failure_rate == 0.5 and s.error_rate == 0.25
    assert s.top_detectors[0] == ("cuda_error", 2)
    assert s.confound["reason"] == "this is the baseline"


def test_step_stats_match_numpy():
    steps = [0.1, 0.4, 0.2, 0.9, 0.3, 0.5]
    (s,) = aggregate([rec("a", 0, steps[:3]), rec("a", 1, steps[3:])], ["a"], baseline_cell=None, threshold=1.15)
    for q in (50, 90, 99):
        assert abs(s.step_time[f"p{q}"] - float(np.percentile(steps, q))) < 1e-12
    assert abs(s.step_time["mean"] - float(np.mean(steps))) < 1e-12
    assert s.step_count == len(steps) and "n" not in s.step_time  # a count is not a time


def test_confound_flags_real_slowdown():
    base = [rec("b", i, [1.0 + 0.01 * i] * 5) for i in range(4)]
    slow = [rec("s", i, [1.5 * (1.0 + 0.01 * i)] * 5) for i in range(4)]
    out = confound_check(slow, base, 1.15)
    assert out["flag"] == "speed (+50%)" and out["significant"] is True


def test_confound_within_noise_is_not_flagged():
    base = [rec("b", i, [v]) for i, v in enumerate([1.0, 2.0, 0.5, 1.5])]
    noisy = [rec("s", i, [v]) for i, v in enumerate([1.2, 2.5, 0.6, 1.8])]
    out = confound_check(noisy, base, 1.15)
    assert out["ratio"] > 1.15
    assert out["flag"] is None and out["significant"] is False
    assert "within noise" in out["reason"]


def test_confound_single_trial_is_no_flag_and_says_why():
    # issue 28: a speed flag needs its spread, or no flag
    out = confound_check([rec("s", 0, [2.0])], [rec("b", 0, [1.0])], 1.15)
    assert out["flag"] is None and out["significant"] is None and out["spread_unknown"] is True
    assert "not flagged: its noise is unknown with 1 trial(s)" in out["reason"]
    assert out["ratio"] == 2.0 and out["direction"] == "slower"


def test_two_loaded_trials_cannot_flag_x6_by_chance():
    # issue 28: the quickstart (2 trials a cell) flagged x6.36 under load, the next run x1.36;
    # one of the cell's two trials ran under load. 2 x SE called it significant; Welch's t
    # with its ~1 degree of freedom does not.
    base = [rec("b", 0, [1.0]), rec("b", 1, [1.1])]
    loaded = [rec("s", 0, [6.0]), rec("s", 1, [7.0])]
    out = confound_check(loaded, base, 1.15)
    assert out["ratio"] > 6 and 2 * out["se_s"] < 6.5 - 1.05  # beyond the old rule's 2 SE
    assert out["flag"] is None and out["significant"] is False
    assert out["df"] < 1.1 and out["t_critical"] > 12
    assert "within noise" in out["reason"] and "Welch" in out["reason"]


def test_t_critical_values_are_the_table_and_fall_to_1_96():
    from aorta_tui.core.stats import t_critical_95

    assert [round(t_critical_95(d), 3) for d in (1, 2, 5, 30)] == [12.706, 4.303, 2.571, 2.042]
    assert t_critical_95(0.5) == 12.706 and abs(t_critical_95(1e9) - 1.96) < 1e-6
    xs = [t_critical_95(d / 4) for d in range(4, 2000)]
    assert all(a >= b for a, b in zip(xs, xs[1:], strict=False))  # more degrees of freedom, less noise


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=50),
       st.floats(min_value=0, max_value=100))
def test_percentile_matches_numpy(values, q):
    got = percentile(sorted(values), q)
    assert abs(got - float(np.percentile(values, q))) <= 1e-9 * max(1.0, max(values))


def test_errored_trials_do_not_count_as_speed():
    base = [rec("b", i, [1.0]) for i in range(3)]
    cell = [rec("c", 0, [1.0]), rec("c", 1, [1.0]), rec("c", 2, [30.0], "error", ["timeout"])]
    stats = {s.cell: s for s in aggregate(base + cell, ["b", "c"], baseline_cell="b", threshold=1.15)}
    assert stats["c"].step_time["mean"] == 1.0
    assert stats["c"].confound["flag"] is None
    assert stats["c"].errored == 1


def test_plain_eta_uses_this_sessions_pace_only():
    import io

    from aorta_tui.cli.sinks import PlainSink
    from aorta_tui.core.events import RunStarted, TrialFinished

    out = io.StringIO()
    sink = PlainSink(out)
    sink.emit(RunStarted("r", source="sweep", run_dir="d", total=10, resumed=True, already_done=8))
    sink._t0 -= 4.0  # this session has run 4 s
    sink.emit(TrialFinished("r", trial_id="a/trial-008", cell="a", trial=8, verdict="pass", wall_s=4.0))
    line = out.getvalue().splitlines()[-1]
    assert line.startswith("[9/10] a/trial-008: pass")
    # one trial in ~4 s, one left: ~4 s, not 8 done trials' worth of a faster pace
    eta = int(line.rsplit("ETA ", 1)[1].rstrip("s"))
    assert 3 <= eta <= 6


def test_minimal_snapshots_hash_their_variables(tmp_path):
    from aorta_tui.core.rundir_fs import RunDirFS
    from aorta_tui.envsnap import snapshot_hash as envsnap_hash
    from aorta_tui.sweep import snapshots
    from aorta_tui.sweep.snapshots import _write_minimal

    fs = RunDirFS(tmp_path)

    def snapshot_hash(path):
        return snapshots.snapshot_hash(fs, path, envsnap_hash)

    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    _write_minimal(fs, a, "docker:x", {"A": "1"}, note="n")
    _write_minimal(fs, b, "docker:x", {"A": "2"}, note="n")
    _write_minimal(fs, c, "docker:x", {"A": "1"}, note="n")
    assert snapshot_hash(a) == snapshot_hash(c) != snapshot_hash(b)
    assert snapshot_hash(tmp_path / "missing.json") is None
