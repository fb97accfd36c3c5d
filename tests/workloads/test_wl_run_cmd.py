"""`aorta-tui run --workload NAME`: refused before any process starts, or run as a one-cell sweep."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from aorta_tui.cli.main import app
from aorta_tui.registry.workload import LaunchSpec
from aorta_tui.workloads.race import Race

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aorta_tui", "run", *args], capture_output=True,
                          text=True, timeout=200, cwd=cwd)


@pytest.mark.parametrize(("args", "says"), [
    (["--workload", "trainin"], "did you mean training"),
    (["--workload", "training", "--config", "model.kindd=mlp"], "workload_config.model.kindd"),
    (["--workload", "race", "--config", "mode=fsdpp"], "workload_config.mode: expected one of"),
    (["--workload", "race", "--mitigations", "none,tf32_of"], "did you mean tf32_off"),
    (["--workload", "race", "--config", "drop_wait"], "is not key=value"),
])
def test_bad_requests_exit_2_before_any_process(tmp_path, args, says):
    p = _cli(*args, "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert says in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "out").exists()


def test_world_size_below_the_minimum_is_refused(monkeypatch, tmp_path):
    class TwoRanks(Race):
        launch = LaunchSpec(mode="torchrun", min_world_size=2)

    monkeypatch.setattr("aorta_tui.registry.registry.load_workload", lambda name: TwoRanks)
    r = CliRunner().invoke(app, ["run", "--workload", "race", "-o", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert "needs at least 2 ranks" in r.output and "world_size=2" in r.output
    assert not (tmp_path / "o").exists()


def test_a_failing_workload_runs_under_torchrun_and_exits_1(tmp_path):
    p = _cli("--workload", "race", "--steps", "2", "--config", "drop_wait=h2d",
             "--config", "alltoall_tensor_size=64", "--mitigations", "tf32_off",
             "--no-snapshot", "--output", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "corruption: iteration 1 on rank 0: buffer a2a_output" in p.stdout
    assert "drop_wait=h2d" in p.stdout
    [result] = list(tmp_path.glob("run-race/*/trials/tf32_off/trial-000/result.json"))
    record = json.loads(result.read_text())
    assert record["argv"][1:3] == ["-m", "aorta_tui.trial.worker"]  # one rank: no torchrun launcher
    wres = record["workload_result"]
    assert wres["applied_switches"][0].startswith("torch.tf32_off")
    assert wres["metrics"]["drop_wait"] == "h2d" and not wres["passed"]


def test_json_mode_streams_the_events_of_a_passing_run(tmp_path):
    p = _cli("--workload", "inference", "--steps", "2", "--config", "model.vocab_size=64",
             "--json", "--no-snapshot", "--output", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in p.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    [finished] = [e for e in events if e["event"] == "trial_finished"]
    assert finished["verdict"] == "pass" and finished["cell"] == "none"
    assert events[-1]["exit_code"] == 0
