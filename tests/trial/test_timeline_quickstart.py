"""The trial timeline through real sweeps: the quickstart (gpu_smoke on this box's device) in a
fresh directory, as the README runs it, and a probe recipe whose command is opaque.

Counted, not timed: phases are checked for presence, order and that they sum to no more than
the process's measured wall time; no absolute durations are asserted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aorta_tui.trial import timeline
from tests.engine_support import REPO, aorta, only_run_dir

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def _results(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("trials/*/trial-*/result.json"))]


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    cwd = tmp_path_factory.mktemp("quickstart")
    shutil.copy(REPO / "recipes" / "quickstart.yaml", cwd / "quickstart.yaml")
    # exec'd trials: every mark of a trial's life exists in them (the default prepares each
    # trial's process ahead, so its torch import happens before the trial: the test below)
    proc = aorta("--batch", "quickstart.yaml", "--trial-isolation", "exec", cwd=cwd, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, only_run_dir(cwd / "aorta-out")


def test_the_default_prepares_each_trial_ahead_and_says_where_its_import_went(tmp_path):
    """The README's quickstart as a user runs it (default isolation, default aorta-out): each
    trial forked from a zygote of its own (one per trial, none shared), whose torch import the
    timeline names instead of timing it inside the trial; every other mark present, in order."""
    shutil.copy(REPO / "recipes" / "quickstart.yaml", tmp_path / "quickstart.yaml")
    proc = aorta("--batch", "quickstart.yaml", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = only_run_dir(tmp_path / "aorta-out")
    results = _results(run)
    assert len(results) == 6
    zygotes = set()
    for r in results:
        tl = r["timeline"]
        warm = tl["info"]["warm"]
        assert warm["zygote"] == "own" and warm["trial_in_zygote"] == 1
        zygotes.add(warm["zygote_pid"])
        assert set(tl["unavailable"]) == {"torch_import_start", "torch_imported"}, tl["unavailable"]
        assert all("own zygote, prepared ahead" in why for why in tl["unavailable"].values())
        assert timeline.is_ordered(tl), tl["marks"]
        assert {m for m in timeline.MARKS if m not in tl["marks"]} == set(tl["unavailable"])
    assert len(zygotes) == 6  # one zygote per trial
    assert len(list((run / "warm").glob("prepared-*.log"))) == 6


def test_every_phase_is_present_ordered_and_within_the_wall_time(quickstart):
    _proc, run = quickstart
    results = _results(run)
    assert len(results) == 6
    for r in results:
        tl = r["timeline"]
        assert tl["clock"] == "CLOCK_MONOTONIC" and tl["unit"] == "ns"
        assert isinstance(tl["wall_start"], float)
        missing = [m for m in timeline.MARKS if m not in tl["marks"]]
        assert not missing, (r["trial_id"], missing, tl["unavailable"])
        assert tl["unavailable"] == {}
        assert timeline.is_ordered(tl), tl["marks"]
        # phases tile [spawn, reaped]; the supervisor's wall time contains that span
        total_ns = sum(p["end_ns"] - p["start_ns"] for p in tl["phases"])
        assert total_ns == tl["marks"]["reaped"] - tl["marks"]["spawn"]
        assert total_ns <= r["process"]["wall_s"] * 1e9
        assert [p["name"] for p in tl["phases"]] == list(timeline.MARKS[1:])
        # the child's fork time (10 ms ticks) lies within one tick of the supervisor's fork/exec
        info = tl["info"]
        tick = info["process_start_resolution_ns"]
        assert tl["marks"]["spawn"] - tick <= info["process_start_ns"] <= tl["marks"]["spawned"]
        assert info["device"] in ("cpu", "cuda:0")
        # the child's marks travel in workload_result.json and are moved out of it
        assert "timeline" not in (r["workload_result"] or {})
        beside = tl["beside"]
        assert set(beside) == {"gpu_sampler", "hang_monitor", "snapshot_capture"}
        assert beside["hang_monitor"]["calls"] >= 0


def test_snapshot_capture_appears_beside_the_trials_it_overlapped(quickstart):
    _proc, run = quickstart
    captures = [c for r in _results(run) for c in r["timeline"]["beside"]["snapshot_capture"].get("captures", [])]
    assert captures, "the host snapshot capture starts with the first trial: some trial overlaps it"
    for c in captures:
        assert c["environment"] == "host_env"
        assert c["started_ns"] is not None
        assert c["priority"] in ("SCHED_IDLE", "nice 19", "normal") or c["priority"].startswith("normal")


def test_matrix_json_has_the_median_of_each_phase_per_cell(quickstart):
    _proc, run = quickstart
    matrix = json.loads((run / "matrix.json").read_text())
    by_cell: dict[str, list[dict]] = {}
    for r in _results(run):
        by_cell.setdefault(r["cell"], []).append(r)
    for cell in matrix["cells"]:
        tl = cell["timeline"]
        assert tl["trials"] == len(by_cell[cell["cell"]]) == 2
        assert list(tl["phase_median_ms"]) == list(timeline.MARKS[1:])
        for name, median in tl["phase_median_ms"].items():
            values = sorted(p["ms"] for r in by_cell[cell["cell"]] for p in r["timeline"]["phases"]
                            if p["name"] == name)
            assert median == pytest.approx(sum(values) / 2, abs=1e-3)  # median of two


def test_batch_output_names_the_largest_phases_and_timeline_lines_render(quickstart):
    proc, run = quickstart
    trial_lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    assert len(trial_lines) == 6
    for ln in trial_lines:  # "... pass in 2.18s (torch_imported 1.18 s, exited 650 ms, ...)"
        assert any(f"({n} " in ln for n in timeline.MARKS), ln
    lines = timeline.timeline_lines(_results(run)[0])
    assert lines[0].startswith("timeline (CLOCK_MONOTONIC; ")
    assert sum(1 for ln in lines if ln.startswith("  ") and "beside:" not in ln) == len(timeline.MARKS) - 1
    assert any("beside: gpu_sampler" in ln for ln in lines)


PROBE = """\
schema_version: 1
mode: probe
ticket: T-TL
trials: 1
mitigation_axis: [none]
diagnostic_axis: [none]
"""


def test_a_probe_trial_has_the_supervisor_marks_and_says_why_not_the_rest(tmp_path):
    (tmp_path / "probe.yaml").write_text(PROBE)
    proc = aorta("--batch", "probe.yaml", "--no-snapshot", "--", "bash", "-c", "echo hi", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (r,) = _results(only_run_dir(tmp_path / "aorta-out"))
    tl = r["timeline"]
    assert list(tl["marks"]) == list(timeline.SUPERVISOR_MARKS)
    assert timeline.is_ordered(tl)
    assert set(tl["unavailable"]) == set(timeline.CHILD_MARKS)
    assert all(why == timeline.OPAQUE_REASON for why in tl["unavailable"].values())
    assert tl["beside"]["snapshot_capture"]["ran"] is False
    lines = timeline.timeline_lines(r)
    assert any("not available: an opaque command" in ln for ln in lines)


def test_a_result_without_a_timeline_says_so():
    assert timeline.timeline_lines({"trial_id": "x"})[0].startswith("timeline: not recorded")
    assert timeline.summary(None) == ""


def test_child_marks_outside_the_process_life_are_dropped_with_the_reason():
    tl = timeline.build({"spawn": 100, "spawned": 200, "exited": 900, "reaped": 950}, wall_start=1.0,
                        child={"marks": {"interpreter_up": 300, "workload_start": 5}, "unavailable": {}})
    assert tl["marks"]["interpreter_up"] == 300
    assert "workload_start" not in tl["marks"]
    assert "outside the process's life" in tl["unavailable"]["workload_start"]
    assert timeline.is_ordered(tl)


def test_a_child_that_ran_before_the_supervisor_saw_its_exec_keeps_the_phases_forward():
    """On a loaded box Popen can return after the child's first statement (seen once in the
    fast tier under load: the quickstart's timeline was out of order). The exec succeeded
    before that statement, so it bounds ``spawned``; what the supervisor saw is kept."""
    tl = timeline.build({"spawn": 100, "spawned": 400, "exited": 900, "reaped": 950}, wall_start=1.0,
                        child={"marks": {"interpreter_up": 300, "worker_ready": 350}, "unavailable": {}})
    assert tl["marks"]["spawned"] == 300 and tl["info"]["spawned_seen_ns"] == 400
    assert timeline.is_ordered(tl)
    assert all(p["end_ns"] >= p["start_ns"] for p in tl["phases"])
    assert sum(p["end_ns"] - p["start_ns"] for p in tl["phases"]) == 950 - 100
    usual = timeline.build({"spawn": 100, "spawned": 200, "exited": 900, "reaped": 950},
                           wall_start=1.0, child={"marks": {"interpreter_up": 300}, "unavailable": {}})
    assert usual["marks"]["spawned"] == 200 and "spawned_seen_ns" not in usual["info"]
