"""The per-node failure summary of the batch output, over real result files."""

from __future__ import annotations

import json
from pathlib import Path

from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.executor.placement import node_summary, placement_text


def _run_dir(tmp_path: Path, trials: list[tuple[str, str, str]]) -> Path:
    """A run directory whose journal and result files say: (trial id, node, verdict)."""
    run = tmp_path / "run"
    run.mkdir()
    atomic_write_json(run / "plan.json", {"trials": [{"trial_id": t} for t, _, _ in trials]})
    lines = []
    for tid, node, verdict in trials:
        cell = tid.split("/")[0]
        result = {"trial_id": tid, "cell": cell, "trial": int(tid[-3:]), "verdict": verdict,
                  "process": {"executor": {"kind": "slurm", "job_id": "7_1", "node": node,
                                           "state": "COMPLETED", "queue_wait_s": 1.25,
                                           "gpus": {"CUDA_VISIBLE_DEVICES": "2"}}}}
        atomic_write_json(run / "trials" / tid / "result.json", result)
        lines.append({"event": "trial_finished", "run_id": "r", "ts": 1.0, "trial_id": tid,
                      "cell": cell, "trial": int(tid[-3:]), "verdict": verdict, "wall_s": 1.0})
    (run / "journal.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run


def test_a_cell_failing_only_on_one_node_is_the_finding(tmp_path):
    run = _run_dir(tmp_path, [
        ("a/trial-000", "n1", "pass"), ("a/trial-001", "n2", "fail"), ("a/trial-002", "n2", "fail"),
        ("a/trial-003", "n3", "pass"), ("b/trial-000", "n1", "fail"), ("b/trial-001", "n2", "fail"),
    ])
    lines = node_summary(run)
    assert lines[0] == "per node (Slurm):"
    assert "  n2: 0 pass, 3 fail, 0 error" in lines
    findings = [ln for ln in lines if "finding" in ln]
    assert findings == ["  finding: cell a failed only on n2 (2 of 2 trials there; 2 passed on other nodes)"]


def test_local_runs_have_no_summary_and_no_placement(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert node_summary(run) == []  # no plan: nothing, never an exception
    assert placement_text({"process": {"pid": 1}}) == ""
    assert placement_text({"process": {"executor": {"kind": "slurm", "job_id": "9_0", "node": "n1",
                                                    "state": "TIMEOUT", "queue_wait_s": 0.5,
                                                    "gpus": {}}}}) == " [job 9_0 on n1, TIMEOUT, queued 0.5 s]"
