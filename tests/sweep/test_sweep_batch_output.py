"""Issue 16 item 7: what the headless commands print, run as a user runs them (the real CLI in
subprocesses, a fresh working directory, the default output directory)."""

from __future__ import annotations

import copy
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ENTRY = str(Path(sys.executable).with_name("aorta-tui"))
ENV_FIXTURES = REPO / "tests" / "tui" / "fixtures" / "env"

PROBE = """\
schema_version: 1
mode: probe
ticket: OUT
trials: {trials}
timeout_per_trial: 30
mitigation_axis: [{mitigations}]
diagnostic_axis: [none]
"""
SLEEPY = ["--", "bash", "-c", 'echo "step ok"; sleep "${OUT_SLEEP:-0.05}"']


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENTRY, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    (tmp_path / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "quickstart.yaml", tmp_path / "recipes" / "quickstart.yaml")
    return tmp_path


def test_dry_run_says_how_many_trials_per_cell(fresh: Path) -> None:
    res = cli(fresh, "--batch", "recipes/quickstart.yaml", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "3 cells x 2 trials = 6 trials" in res.stdout
    assert "x trials =" not in res.stdout


def test_json_mode_bad_recipe_ends_the_event_stream_typed(fresh: Path) -> None:
    """Every line an event the reader can type (until issue 36 one untyped ``error`` line):
    run_started without a run directory, the warning, a failed run_finished with exit 2 and
    the recipe's located problems."""
    from aorta_tui.core.events import RunFinished, RunStarted, RunWarning, event_from_dict

    (fresh / "bad.yaml").write_text("schema_version: 1\nmode: triage\nticket: T\nworkload: gpu_smoke\n"
                                    "trials: many\ncells: [{name: a, mitigations: [none], environment: local}]\n")
    res = cli(fresh, "--batch", "bad.yaml", "--json")
    assert res.returncode == 2
    events = [event_from_dict(json.loads(line)) for line in res.stdout.splitlines()]
    assert [type(e) for e in events] == [RunStarted, RunWarning, RunFinished]
    started, warning, finished = events
    assert isinstance(started, RunStarted) and started.run_dir == ""
    assert isinstance(warning, RunWarning) and warning.code == "error"
    assert isinstance(finished, RunFinished)
    assert (finished.status, finished.exit_code) == ("failed", 2)
    problems = {p["path"]: p for p in finished.summary["problems"]}
    assert set(problems) == {"", "trials"}  # every problem: the top level misses `steps`
    problem = problems["trials"]
    assert (problem["line"], problem["column"]) == (5, 9)
    assert problem["source"].endswith("bad.yaml") and problem["hint"]
    assert "error:" in res.stderr  # the paragraph for people stays on stderr
    assert not (fresh / "aorta-out").exists()


def test_interrupted_summary_says_not_run_and_resume_does_not_warn_about_the_redone_trial(fresh: Path) -> None:
    (fresh / "probe.yaml").write_text(PROBE.format(trials=1, mitigations="none, tf32_off, deterministic"))
    proc = subprocess.Popen([ENTRY, "--batch", "probe.yaml", *SLEEPY], cwd=fresh, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OUT_SLEEP": "3"})
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 120
    while "[1/3]" not in seen and time.monotonic() < deadline:
        seen += proc.stdout.readline()
    time.sleep(0.5)  # the second trial is running now
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    out = seen + out
    assert proc.returncode == 130, out + err
    summary = out[out.index("run interrupted"):]
    assert "not run (no trial of this cell finished)" in summary
    assert ": 0 pass, 0 fail, 0 error" not in summary
    assert "  ok  " in summary and "  --  " in summary
    (run,) = sorted((fresh / "aorta-out" / "OUT").iterdir())
    resumed = cli(fresh, "sweep", "run", "--resume", str(run.relative_to(fresh)), *SLEEPY, env={"OUT_SLEEP": "0.05"})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "is gone" not in resumed.stdout + resumed.stderr
    assert "not run" not in resumed.stdout


def test_gpu_smoke_hint_does_not_blame_the_device_for_an_injected_failure(fresh: Path) -> None:
    (fresh / "inject.yaml").write_text(
        "schema_version: 1\nmode: triage\nticket: INJ\nworkload: gpu_smoke\ntrials: 1\nsteps: 2\n"
        "workload_config: {size: 16, inject_error: true}\n"
        "cells: [{name: a, mitigations: [none], environment: local}]\n")
    res = cli(fresh, "--batch", "inject.yaml", "--no-snapshot")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "hint: the failures were injected (workload_config inject_error: true)" in res.stdout
    assert "the device or its runtime is broken" not in res.stdout
    (run,) = sorted((fresh / "aorta-out" / "INJ").iterdir())
    assert "the device is not at fault" in (run / "matrix.md").read_text()


def test_the_progress_bar_on_a_terminal_labels_its_time_column(fresh: Path) -> None:
    (fresh / "probe.yaml").write_text(PROBE.format(trials=2, mitigations="none"))
    master, slave = pty.openpty()
    proc = subprocess.Popen([ENTRY, "--batch", "probe.yaml", "--no-snapshot", *SLEEPY], cwd=fresh,
                            stdin=slave, stdout=slave, stderr=slave, env={**os.environ, "COLUMNS": "120"})
    os.close(slave)
    data = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    proc.wait(30)
    os.close(master)
    text = data.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert "ETA" in text and "run completed" in text


def _snapshot_with(tmp: Path, name: str, edit) -> Path:  # noqa: ANN001
    snap = json.loads((ENV_FIXTURES / "cpu-box-plain.json").read_text())
    snap = copy.deepcopy(snap)
    edit(snap)
    path = tmp / name
    path.write_text(json.dumps(snap))
    return path


def test_env_summary_writes_cupti_as_a_version(tmp_path: Path) -> None:
    def cupti(snap: dict) -> None:
        snap["cuda"]["cupti"]["version"] = {"state": "ok", "value": 130001, "source": "api:cuptiGetVersion"}

    path = _snapshot_with(tmp_path, "h200.json", cupti)
    res = cli(tmp_path, "env", "summary", str(path))
    assert res.returncode == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if "CUPTI" in line)
    assert "13.0.1" in row and "130001" not in row


def test_env_diff_says_unset_like_the_tui(tmp_path: Path) -> None:
    res = cli(tmp_path, "env", "diff", str(ENV_FIXTURES / "cpu-box-plain.json"),
              str(ENV_FIXTURES / "cpu-box-knobs.json"))
    assert "A: unset" in res.stdout and "null" not in res.stdout


def test_the_mitigation_name_of_max_connections_is_accepted_as_the_policy(tmp_path: Path) -> None:
    res = cli(tmp_path, "policy", "sweep", "tiny_kernel_stress", "--policies",
              "baseline,cuda_device_max_connections_1", "--dry-run")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cuda_device_max_connections_1 is the mitigation's name for policy cuda_max_connections_1" in res.stderr
    assert "cuda_max_connections_1" in res.stdout
    twice = cli(tmp_path, "policy", "sweep", "tiny_kernel_stress", "--policies",
                "cuda_max_connections_1,cuda_device_max_connections_1", "--dry-run")
    assert twice.returncode == 2 and "listed twice" in twice.stderr


def test_the_last_lines_say_what_to_do_next_and_each_suggestion_works(fresh: Path) -> None:
    # issue 28: the quickstart's last lines named the matrix and stopped there
    (fresh / "probe.yaml").write_text(PROBE.format(trials=1, mitigations="none"))
    res = cli(fresh, "--batch", "probe.yaml", *SLEEPY)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.rstrip("\n").splitlines()
    at = lines.index("next:")
    assert lines[at - 1].startswith("matrix: aorta-out/")
    commands = [ln.split() for ln in lines[at + 1:] if not ln.lstrip().startswith("#")]
    assert [c[:2] for c in commands] == [["aorta-tui", "attach"], ["aorta-tui", "export"],
                                          ["aorta-tui", "bundle"]]
    run = commands[0][2]
    assert run.startswith("aorta-out/") and (fresh / run / "journal.jsonl").is_file()
    for argv in commands:  # each suggestion runs as printed, from the same directory
        done = subprocess.run([ENTRY, *argv[1:]], cwd=fresh, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, (argv, done.stderr)
