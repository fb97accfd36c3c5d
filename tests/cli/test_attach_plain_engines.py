"""`attach --plain` on the run directories of the other engines on RunStore (a queue sweep's,
a policy sweep's): their trial lines are events, not "invalid trial_id" damage, and a run that
stopped is resumed with its own engine's command. Real runs through the CLI (CPU emulation)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

pytest.importorskip("torch")
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
TINY = ["--device", "cpu", "--size", "tiny", "-i", "2", "-w", "0"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=180)


def _stopped_copy(run_dir: Path, to: Path) -> Path:
    """The run as an orchestrator killed before its last line leaves it (no run_finished)."""
    shutil.copytree(run_dir, to)
    journal = to / "journal.jsonl"
    lines = [ln for ln in journal.read_text().splitlines() if json.loads(ln)["event"] != "run_finished"]
    journal.write_text("\n".join(lines) + "\n")
    return to


@pytest.mark.parametrize("engine", ["queue", "policy"])
def test_attach_plain_reads_another_engines_run_and_names_its_resume(tmp_path: Path, engine: str) -> None:
    if engine == "queue":
        made = _cli("queue", "sweep", "tiny_kernel_stress", "--streams", "1,2", *TINY,
                    "--run-dir", "run", cwd=tmp_path)
        resume = "aorta-tui queue resume"
        trial_ids = ["s0001", "s0002"]
    else:
        made = _cli("policy", "sweep", "tiny_kernel_stress", "--policies", "xnack_off", "--trials", "1",
                    "--streams", "2", "--device", "cpu", "--size", "tiny", "--iterations", "3",
                    "--warmup", "1", "-o", "run", cwd=tmp_path)
        resume = "aorta-tui policy resume"
        trial_ids = ["001-baseline-t1", "002-xnack_off-t1"]
    assert made.returncode == 0, made.stderr
    attached = _cli("attach", "--plain", "run", cwd=tmp_path)
    assert attached.returncode == 0, attached.stdout + attached.stderr
    assert "invalid trial_id" not in attached.stdout + attached.stderr
    assert trial_ids and all(t in attached.stdout for t in trial_ids), attached.stdout

    stopped = _stopped_copy(tmp_path / "run", tmp_path / "stopped")
    again = _cli("attach", "--plain", str(stopped), cwd=tmp_path)
    assert again.returncode == 130, again.stdout
    assert f"{resume} {stopped}" in again.stdout and "sweep run --resume" not in again.stdout


def test_attach_plain_exits_as_the_runs_own_command_did(tmp_path: Path) -> None:
    """Every trial errored (a command that is not there): --batch exits 1, and so does an
    attach to the finished run - not 0 because the run "completed"."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\nticket: T-ATT\ntrials: 1\n"
                      "mitigation_axis: [none]\ndiagnostic_axis: [none]\n")
    made = _cli("--batch", "r.yaml", "--no-snapshot", "--", "./no-such-command", cwd=tmp_path)
    assert made.returncode == 1, made.stdout + made.stderr
    (run,) = [p.parent for p in (tmp_path / "aorta-out").glob("*/*/journal.jsonl")]
    attached = _cli("attach", "--plain", str(run.relative_to(tmp_path)), cwd=tmp_path)
    assert attached.returncode == 1, attached.stdout + attached.stderr
    assert "completed (exit code 1)" in attached.stdout
    passing = tmp_path / "ok"
    passing.mkdir()
    ok = _cli("--batch", "../r.yaml", "--no-snapshot", "--", "true", cwd=passing)
    assert ok.returncode == 0, ok.stderr
    (run_ok,) = [p.parent for p in (passing / "aorta-out").glob("*/*/journal.jsonl")]
    assert _cli("attach", "--plain", str(run_ok), cwd=tmp_path).returncode == 0
