"""`aorta-tui agent` end to end on CPU: a probe command whose failure depends on variables a
mitigation sets, so the builtin proposer must find it; Ctrl-C and --resume; bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aorta_tui.core.events import (
    Event,
    Progress,
    ResultWritten,
    RunFinished,
    RunStarted,
    RunWarning,
    event_from_dict,
)
from tests.engine_support import REPO, aorta

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

RECIPE = """\
schema_version: 1
mode: probe
ticket: T-AG
trials: {trials}
timeout_per_trial: 30
mitigation_axis: [none]
diagnostic_axis: [none]
"""
CANDIDATES = "amd_log_level_4,hip_launch_blocking,hsa_no_sdma,xnack"
NEEDS_SDMA_OFF = '[ "$HSA_ENABLE_SDMA" = 0 ] || exit 3'


def _recipe(tmp_path: Path, trials: int = 1) -> Path:
    p = tmp_path / "probe.yaml"
    p.write_text(RECIPE.format(trials=trials))
    return p


def _agent(tmp_path: Path, *args: str, script: str = NEEDS_SDMA_OFF):
    return aorta("agent", "probe.yaml", "--no-snapshot", "--candidates", CANDIDATES, *args,
                 "--", "sh", "-c", script, cwd=tmp_path)


def _state(tmp_path: Path) -> tuple[Path, dict]:
    (d,) = list((tmp_path / "aorta-out" / "T-AG").glob("agent-*"))
    return d, json.loads((d / "agent.json").read_text())


def test_the_builtin_proposer_finds_the_mitigation(tmp_path):
    _recipe(tmp_path, trials=2)
    proc = _agent(tmp_path, "--budget", "20", "--per-iteration", "2")
    assert proc.returncode == 0, proc.stderr
    d, state = _state(tmp_path)
    rec = state["recommendation"]
    assert state["status"] == "goal_met"
    assert rec["mitigations"] == ["hsa_no_sdma"] and rec["cell"] == "hsa_no_sdma-none"
    assert rec["evidence"]["failure_rate"] == 0 and rec["evidence"]["baseline"]["failure_rate"] == 1
    assert rec["confidence"] == 1.0
    # every iteration is an ordinary run directory of the same ticket
    runs = [it["run_dir"] for it in state["iterations"]]
    assert len(runs) == 3 and all((Path(r) / "matrix.json").is_file() for r in runs)
    assert state["trials_used"] == 2 + 4 + 4  # baseline, 2 singles, 2 more (one finds it)
    assert "hsa_no_sdma" in (d / "agent.md").read_text()
    assert "recommendation: hsa_no_sdma" in proc.stdout


def test_pairs_of_the_best_singles_when_no_single_works(tmp_path):
    _recipe(tmp_path)
    script = '[ "$HSA_ENABLE_SDMA" = 0 ] && [ "$HSA_XNACK" = 1 ] || exit 3'
    proc = _agent(tmp_path, "--budget", "30", "--per-iteration", "4", script=script)
    assert proc.returncode == 0, proc.stderr
    _d, state = _state(tmp_path)
    assert state["recommendation"]["mitigations"] == ["hsa_no_sdma", "xnack"]
    pair_iteration = state["iterations"][-1]
    assert all(len(c) == 2 for c in pair_iteration["proposed"])
    assert all("pair of two of the best singles" in r for r in pair_iteration["reasons"])


def _events(stdout: str) -> list[Event]:
    """Every stdout line an event of the one stream (core/events.py), nothing else."""
    return [event_from_dict(json.loads(line)) for line in stdout.splitlines()]


def test_json_is_the_event_stream_with_the_document_last(tmp_path):
    """`agent --json` speaks the one dialect (docs/cli.md): only event lines, run_started
    naming the agent's directory first, a progress line per iteration started and finished,
    each iteration's matrix, run_finished last with agent.json whole. It printed agent.json
    alone, which no event reader takes; the start line with the resume command is on stderr."""
    _recipe(tmp_path)
    proc = _agent(tmp_path, "--budget", "10", "--per-iteration", "4", "--json")
    assert proc.returncode == 0, proc.stderr
    d, state = _state(tmp_path)
    events = _events(proc.stdout)
    first, last = events[0], events[-1]
    assert isinstance(first, RunStarted) and first.source == "agent"
    assert first.run_dir == str(d.resolve()) and first.total == 10 and not first.resumed
    assert isinstance(last, RunFinished) and last.status == "completed" and last.exit_code == 0
    assert last.summary["result"] == state and state["status"] == "goal_met"
    assert {e.run_id for e in events} == {d.name}
    progress = [e for e in events if isinstance(e, Progress)]
    assert [p.message.split(":")[0] for p in progress] == ["iteration 0"] * 2 + ["iteration 1"] * 2
    assert [(p.done, p.total) for p in progress] == [(0, 10), (1, 10), (1, 10), (5, 10)]
    matrices = [e.path for e in events if isinstance(e, ResultWritten)]
    assert matrices == [str(Path(it["run_dir"]) / "matrix.json") for it in state["iterations"]]
    assert f"aorta-tui agent --resume {d.relative_to(tmp_path)}" in proc.stderr


@pytest.mark.parametrize("args, needle", [
    (["probe.yaml", "--goal", "speedup > 2", "--", "true"], "speedup"),
    (["probe.yaml", "--budget", "1", "--", "true"], "the least budget is 2"),
    (["--resume", "no-such-agent"], "not an agent directory"),
])
def test_a_refused_agent_json_run_ends_failed_with_its_exit_code(tmp_path, args, needle):
    """A run refused before its loop began still speaks in events: run_started, the error as
    a warning, run_finished failed with the code it exits with (it printed nothing)."""
    _recipe(tmp_path, trials=2)
    proc = aorta("agent", "--json", "--no-snapshot", *args, cwd=tmp_path)
    assert proc.returncode == 2 and needle in proc.stderr
    started, warning, finished = _events(proc.stdout)
    assert isinstance(started, RunStarted) and started.source == "agent"
    assert isinstance(warning, RunWarning) and warning.code == "error" and needle in warning.message
    assert isinstance(finished, RunFinished) and (finished.status, finished.exit_code) == ("failed", 2)
    assert needle in finished.summary["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.yaml"]


def test_budget_spent_and_baseline_meets_goal_recommend_nothing_with_the_reason(tmp_path):
    _recipe(tmp_path)
    proc = _agent(tmp_path, "--budget", "3", "--per-iteration", "2", script="exit 3")
    assert proc.returncode == 0, proc.stderr
    d, state = _state(tmp_path)
    assert state["status"] == "budget_spent" and state["trials_used"] == 3
    assert state["recommendation"]["mitigations"] == []
    assert "no cell met the goal" in state["recommendation"]["reason"]
    for p in (tmp_path / "aorta-out").rglob("agent-*"):
        subprocess.run(["rm", "-rf", str(p)], check=True)
    proc = _agent(tmp_path, "--budget", "5", script="exit 0")
    assert proc.returncode == 0, proc.stderr
    _d, state = _state(tmp_path)
    assert state["status"] == "baseline_meets_goal"
    assert state["recommendation"]["mitigations"] == []
    assert "nothing to mitigate" in state["recommendation"]["reason"]


def _interrupted_in_iteration_1(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    """The agent started, SIGINT to its group inside a trial of iteration 1: exit code,
    stdout, stderr."""
    _recipe(tmp_path, trials=2)
    script = "sleep 0.5; " + NEEDS_SDMA_OFF
    proc = subprocess.Popen(
        [sys.executable, "-m", "aorta_tui", "agent", "probe.yaml", "--no-snapshot",
         "--candidates", CANDIDATES, "--budget", "20", "--per-iteration", "4", *extra, "--",
         "sh", "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            _d, state = _state(tmp_path)
        except (ValueError, FileNotFoundError):
            state = {"iterations": []}
        its = state["iterations"]
        if len(its) == 2 and its[1]["status"] == "running" and its[1]["run_dir"]:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("iteration 1 never started")
    time.sleep(0.8)  # inside a trial of iteration 1
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_ctrl_c_keeps_finished_iterations_and_resume_continues(tmp_path):
    code, _out, err = _interrupted_in_iteration_1(tmp_path)
    assert code == 130, err
    d, state = _state(tmp_path)
    assert [it["status"] for it in state["iterations"]] == ["done", "interrupted"]
    interrupted_run = state["iterations"][1]["run_dir"]
    again = aorta("agent", "--resume", str(d), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    _d, state = _state(tmp_path)
    assert state["status"] == "goal_met" and state["recommendation"]["mitigations"] == ["hsa_no_sdma"]
    assert state["iterations"][1]["run_dir"] == interrupted_run  # the same sweep, resumed
    assert len(list((tmp_path / "aorta-out" / "T-AG").glob("2*"))) == 2


def test_json_ctrl_c_ends_interrupted_with_the_state_and_a_resume_says_it_resumed(tmp_path):
    code, out, err = _interrupted_in_iteration_1(tmp_path, "--json")
    assert code == 130, err
    d, state = _state(tmp_path)
    last = _events(out)[-1]
    assert isinstance(last, RunFinished) and (last.status, last.exit_code) == ("interrupted", 130)
    assert last.summary["result"] == state and state["status"] == "interrupted"
    again = aorta("agent", "--resume", str(d), "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    events = _events(again.stdout)
    first, last = events[0], events[-1]
    assert isinstance(first, RunStarted) and first.resumed and first.already_done == 2
    assert isinstance(last, RunFinished) and last.status == "completed"
    assert last.summary["result"]["status"] == "goal_met"
    assert last.summary["result"] == _state(tmp_path)[1]


@pytest.mark.parametrize("args, code, needle", [
    (["--goal", "speedup > 2"], 2, "speedup"),
    (["--goal", "failure_rate =="], 2, "--goal"),
    (["--budget", "0"], 2, "--budget 0"),
    (["--candidates", "hsa_no_sdmaa"], 2, "hsa_no_sdmaa"),
    (["--output", "no/such/out"], 2, "does not exist"),
    (["--proposer", "llm"], 2, "needs a model"),
    (["--proposer", "llm", "--llm-model", "m"], 2, "stdin is not a terminal"),
    (["--proposer", "magic"], 2, "magic"),
])
def test_bad_input_runs_nothing(tmp_path, args, code, needle):
    _recipe(tmp_path, trials=2)
    proc = aorta("agent", "probe.yaml", "--no-snapshot", *args, "--", "sh", "-c", "exit 0",
                 cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.yaml"]


def test_a_budget_below_the_baseline_is_refused(tmp_path):
    _recipe(tmp_path, trials=3)
    proc = aorta("agent", "probe.yaml", "--budget", "2", "--", "sh", "-c", "exit 0", cwd=tmp_path)
    assert proc.returncode == 2 and "baseline recipe alone runs 3 trials" in proc.stderr
    assert not (tmp_path / "aorta-out").exists()
    # the message names the real minimum, and that minimum is accepted (issue 28)
    assert "the least budget is 3" in proc.stderr and "fix: --budget 3 or more" in proc.stderr
    ok = aorta("agent", "probe.yaml", "--no-snapshot", "--budget", "3", "--", "sh", "-c",
               "exit 3", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "agent budget_spent" in ok.stdout


def test_the_agent_engine_imports_no_front_end():
    code = ("import sys, aorta_tui.agent.loop, aorta_tui.agent.proposer, aorta_tui.agent.page; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_triage_recipe_gets_cells_copied_from_its_baseline(tmp_path):
    (tmp_path / "tri.yaml").write_text(
        "schema_version: 1\nmode: triage\nticket: T-AG\nworkload: gpu_smoke\ntrials: 1\n"
        "steps: 3\nworkload_config: {size: 32}\nconfound: {baseline_cell: baseline}\n"
        "cells:\n  - {name: baseline, mitigations: [none], environment: local}\n")
    proc = aorta("agent", "tri.yaml", "--budget", "3", "--no-snapshot", "--candidates",
                 "tf32_off,deterministic", "--goal", "step_time_p50_s < 0", cwd=tmp_path,
                 timeout=180)
    assert proc.returncode == 0, proc.stderr
    d, state = _state(tmp_path)
    assert state["status"] == "budget_spent" and state["trials_used"] == 3
    assert [c["mitigations"] for c in state["iterations"][1]["cells"]] == [["tf32_off"],
                                                                           ["deterministic"]]
    assert all(c["step_time_ratio"] is not None for c in state["iterations"][1]["cells"])
    assert "environment: local" in (d / "iter-01.yaml").read_text()


def test_conflicting_pairs_are_never_proposed(tmp_path):
    _recipe(tmp_path)
    proc = aorta("agent", "probe.yaml", "--no-snapshot", "--candidates",
                 "hsa_disable_cache,hsa_enable_cache", "--budget", "20", "--", "sh", "-c",
                 "exit 3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _d, state = _state(tmp_path)
    assert state["status"] == "exhausted" and state["trials_used"] == 3
    assert "conflicts" in state["stop_reason"]
    assert state["recommendation"]["mitigations"] == []


def test_a_recipe_without_a_ticket_is_filed_as_the_sweep_files_it(tmp_path):
    """It was exit 70 (AttributeError on the missing ticket); the sweep names it 'untitled'."""
    (tmp_path / "p.yaml").write_text("schema_version: 1\nmode: probe\ntrials: 1\n"
                                     "mitigation_axis: [none]\ndiagnostic_axis: [none]\n")
    proc = aorta("agent", str(tmp_path / "p.yaml"), "--budget", "1", "-o", str(tmp_path / "out"),
                 "--no-snapshot", "--", "true", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "out" / "untitled").glob("agent-*/agent.json"))) == 1
