"""The trial detail of a trial run as a Slurm job says where it ran (job, node, GPU, state)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from aorta_tui.tui.matrix_state import TrialView
from aorta_tui.tui.screens.trial import read_result, trial_facts
from tests.engine.conftest import aorta, only_run_dir
from tests.engine.test_slurm_executor import _slurm_problem


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
