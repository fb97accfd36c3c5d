"""The trial detail of a trial run as a Slurm job says where it ran (job, node, GPU, state)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from tui_support import FIXED_FACTS, async_test, wait_for

from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.matrix_state import TrialView
from aorta_tui.tui.screens.matrix import MatrixScreen
from aorta_tui.tui.screens.trial import read_result, trial_facts
from tests.engine_support import aorta, only_run_dir
from tests.executor.test_slurm_executor import _slurm_problem


def test_the_detail_names_the_job_and_the_node(tmp_path: Path) -> None:
    problem = _slurm_problem()
    if problem is not None:
        if os.environ.get("AORTA_REQUIRE_SLURM") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\nticket: t\ntrials: 1\nmitigation_axis: [none]\n"
                      "diagnostic_axis: [none]\nexecutor: {kind: slurm, gres: 'gpu:1'}\n")
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot", "--",
                 sys.executable, "-c", "print('hi')")
    assert proc.returncode == 0, proc.stderr
    run = only_run_dir(tmp_path / "out")
    view = TrialView(trial_id="none-none/trial-000", cell="none-none", trial=0, state="pass")
    result = read_result(run, view)
    facts = result["process"]["executor"]
    text = "\n".join(trial_facts(view, result))
    assert f"ran as job {facts['job_id']} on {facts['node']}, GPU " in text and "COMPLETED" in text


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_the_matrix_of_a_finished_slurm_run_sums_failures_up_per_node(tmp_path: Path) -> None:
    problem = _slurm_problem()
    if problem is not None:
        if os.environ.get("AORTA_REQUIRE_SLURM") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\nticket: t\ntrials: 1\n"
                      "mitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\n"
                      "executor: slurm\n")
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot", "--",
                 "sh", "-c", '[ -z "$CUDA_LAUNCH_BLOCKING" ]')
    assert proc.returncode == 0, proc.stderr
    run = only_run_dir(tmp_path / "out")
    node = json.loads(next(run.glob("trials/*/*/result.json")).read_text())["process"]["executor"]["node"]
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "out", start_run=run, machine_facts=FIXED_FACTS)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MatrixScreen), what="the matrix")
        screen = app.screen
        assert isinstance(screen, MatrixScreen)
        await wait_for(pilot, lambda: screen.state is not None and screen.state.status == "completed")
        # every result.json is read by the node worker; the summary is redrawn when it answers
        await wait_for(pilot, lambda: "per node (Slurm)" in str(screen.query_one("#matrix-summary").render()),
                       what="the per-node summary")
        summary = str(screen.query_one("#matrix-summary").render())
        assert f"per node (Slurm): {node}: 1 pass, 1 fail, 0 error" in summary, summary


def test_a_hang_is_its_summary_line_not_the_reports_raw_dict() -> None:
    """The trial detail printed tier 2's report as a Python dict ({'signals': ...})."""
    from aorta_tui.trial.hang import HangReport

    report = HangReport(signals={"output_silence": 31.0, "gpu_idle": None, "io_idle": 30.5},
                        unavailable={"gpu_idle": "no GPU context"}, window_s=30.0, grace_s=60.0,
                        elapsed_s=95.25, cpu_s_in_window=0.5)
    view = TrialView(trial_id="a/trial-000", cell="a", trial=0, state="fail")
    result = {"process": {"exit_code": None, "hang": report.to_dict()}}
    text = "\n".join(trial_facts(view, result))
    assert "hang after 95.2 s: output silence 31.0 s, io idle 30.5 s" in text
    assert "gpu_idle not available (no GPU context)" in text and "{" not in text
    damaged = {"process": {"hang": {"signals": {"io_idle": "long"}}}}
    shown = "\n".join(trial_facts(view, damaged))
    assert "hang (its report is damaged: " in shown and "signals.io_idle" in shown
