"""The timeline of trials that have no torch or no process of their own: a plugin workload
(no torch) in its own process and in the orchestrator (trial_isolation: in_process)."""

from __future__ import annotations

import json

import pytest

from aorta_tui.trial import timeline
from tests.engine_support import aorta, only_run_dir
from tests.registry.test_plugins import RECIPE, make_plugin


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_marks_that_cannot_exist_say_why(tmp_path, isolation):
    env = make_plugin(tmp_path / "plug")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(isolation=isolation))
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot", env=env)
    assert proc.returncode == 0, proc.stderr
    run = only_run_dir(tmp_path / "out")
    for p in run.glob("trials/*/trial-*/result.json"):
        tl = json.loads(p.read_text())["timeline"]
        assert timeline.is_ordered(tl)
        why = tl["unavailable"]
        assert why["torch_imported"] == "the workload did not import torch during the trial"
        assert why["device_ready"] == "the workload created no torch tensor during setup"
        for name in ("first_step", "last_step", "workload_start", "workload_end", "result_write"):
            assert name in tl["marks"], (name, why)
        if isolation == "process":
            assert {"spawn", "spawned", "interpreter_up", "result_written", "exited", "reaped"} <= set(tl["marks"])
        else:
            for name in timeline.SUPERVISOR_MARKS:
                assert why[name].startswith("in-process trial")
            assert why["interpreter_up"].startswith("in-process trial")
            assert "result_written" not in tl["marks"]
