"""`aorta-tui attach --plain RUN_DIR`: the journal as lines, followed until the run ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WRITER = HERE / "tui_journal_writer.py"


def _attach(run_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", "attach", str(run_dir), *extra],
                          capture_output=True, text=True, cwd=REPO, timeout=60, check=False)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_attach_follows_a_running_sweep_to_its_end(tmp_path: Path) -> None:
    run_dir = tmp_path / "T" / "run"
    writer = subprocess.Popen([sys.executable, str(WRITER), str(run_dir), "a,bad", "2", "0.2"],
                              stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "started"
    out = _attach(run_dir, "--plain")
    writer.wait(10)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, out.stderr
    assert lines[0].startswith("run run started: 4 trials over 2 cells")
    assert sum(1 for ln in lines if ln.strip().startswith(("pass", "fail"))) == 4
    assert lines[-1] == "run run completed (exit code 0)"


def test_attach_without_a_tty_prints_plain_lines_of_a_finished_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "T" / "done"
    subprocess.run([sys.executable, str(WRITER), str(run_dir), "a", "1", "0"], check=True, cwd=REPO,
                   capture_output=True)
    out = _attach(run_dir)  # stdout is a pipe: plain mode without asking
    assert out.returncode == 0
    assert "\x1b[" not in out.stdout
    assert out.stdout.splitlines()[-1] == "run done completed (exit code 0)"


def test_attach_to_an_interrupted_run_says_how_to_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "T" / "dead"
    subprocess.run([sys.executable, str(WRITER), str(run_dir), "a", "1", "0", "--die-before-finish"],
                   check=True, cwd=REPO, capture_output=True)
    out = _attach(run_dir, "--plain")
    assert out.returncode == 130
    assert f"--resume {run_dir}" in out.stdout


def test_attach_to_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    out = _attach(tmp_path, "--plain")
    assert out.returncode == 2
    assert "not a run directory" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_attach_plain_follows_a_real_detached_sweep(tmp_path: Path, monkeypatch) -> None:
    from tui_support import PROBE_COMMAND, write_probe_recipe

    from aorta_tui.relay.launch import launch_detached

    monkeypatch.setenv("TUI_TEST_SLEEP", "0.3")
    run_dir = launch_detached(write_probe_recipe(tmp_path, trials=2), tmp_path / "aorta-out",
                              command=PROBE_COMMAND)
    out = _attach(run_dir, "--plain")
    lines = out.stdout.splitlines()
    assert out.returncode == 0, out.stderr
    assert lines[0] == f"run {run_dir.name} started: 4 trials over 2 cells"
    fails = [ln for ln in lines if ln.strip().startswith("fail ")]
    assert len(fails) == 2 and all("exit 3" in ln for ln in fails)
    assert "cell cuda_launch_blocking-none: failure rate 100%" in lines
    assert lines[-1] == f"run {run_dir.name} completed (exit code 0)"
