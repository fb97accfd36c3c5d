"""`agent --env-candidate VAR=VALUE`: variables no registered mitigation sets, searched like
mitigations (singles, then pairs that never set one variable twice), end to end on CPU."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aorta_tui.agent import env_candidates
from aorta_tui.core.errors import UsageError
from aorta_tui.registry.registry import MITIGATION_NAME_RE
from tests.engine_support import aorta

RECIPE = """\
schema_version: 1
mode: probe
ticket: T-AGENV
trials: 1
timeout_per_trial: 30
mitigation_axis: [none]
diagnostic_axis: [none]
"""


def _run(tmp_path: Path, *args: str, script: str):
    (tmp_path / "probe.yaml").write_text(RECIPE)
    return aorta("agent", "probe.yaml", "--no-snapshot", *args, "--", "sh", "-c", script, cwd=tmp_path)


def _state(tmp_path: Path) -> tuple[Path, dict]:
    (d,) = list((tmp_path / "aorta-out" / "T-AGENV").glob("agent-*"))
    return d, json.loads((d / "agent.json").read_text())


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_variable_no_mitigation_sets_is_found(tmp_path):
    proc = _run(tmp_path, "--budget", "10", "--candidates", "hsa_no_sdma",
                "--env-candidate", "MY_FIX=0", "--env-candidate", "MY_FIX=1",
                script='[ "$MY_FIX" = 1 ] || exit 3')
    assert proc.returncode == 0, proc.stderr
    d, state = _state(tmp_path)
    assert state["status"] == "goal_met"
    assert state["recommendation"]["mitigations"] == ["env.MY_FIX.1"]
    assert state["candidates"] == ["hsa_no_sdma", "env.MY_FIX.0", "env.MY_FIX.1"]
    sidecar = d / env_candidates.SIDECAR_NAME
    assert json.loads(sidecar.read_text())["env.MY_FIX.1"]["env"] == {"MY_FIX": "1"}
    assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
    # the trial really ran with the variable set: its run's resolved mitigation says so
    run = Path(state["iterations"][-1]["run_dir"])
    matrix = json.loads((run / "matrix.json").read_text())
    winner = next(c for c in matrix["cells"] if c["cell"] == "env.MY_FIX.1-none")
    assert winner["failure_rate"] == 0


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_pairs_mix_a_mitigation_and_a_variable_and_skip_two_values_of_one_variable(tmp_path):
    script = '[ "$MY_FIX" = 1 ] && [ "$HSA_ENABLE_SDMA" = 0 ] || exit 3'
    proc = _run(tmp_path, "--budget", "30", "--per-iteration", "8", "--candidates", "hsa_no_sdma",
                "--env-candidate", "MY_FIX=0", "--env-candidate", "MY_FIX=1", script=script)
    assert proc.returncode == 0, proc.stderr
    _d, state = _state(tmp_path)
    assert state["recommendation"]["mitigations"] == ["env.MY_FIX.1", "hsa_no_sdma"]
    proposed = [tuple(c) for it in state["iterations"] for c in it["proposed"]]
    assert ("env.MY_FIX.0", "env.MY_FIX.1") not in proposed  # one variable, two values


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize(("arg", "says"), [
    ("NOEQUALS", "expected VAR=VALUE"),
    ("X;touch /tmp/PWN=1", "not a valid environment variable name"),
    ("1BAD=1", "not a valid environment variable name"),
    ("A=line\nbreak", "line break"),
])
def test_a_bad_setting_is_exit_2_and_creates_nothing(tmp_path, arg, says):
    proc = _run(tmp_path, "--env-candidate", arg, script="true")
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "aorta-out").exists()


def test_the_same_setting_twice_is_refused():
    with pytest.raises(UsageError, match="given twice"):
        env_candidates.parse(["A=1", "A=1"])


_values = st.text(st.characters(blacklist_characters="\x00\n\r", blacklist_categories=("Cs",)),
                  max_size=300)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=300, deadline=None)
@given(var=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,40}", fullmatch=True), a=_values, b=_values)
def test_names_are_registry_names_and_tell_values_apart(var, a, b, attack_tally):
    na, nb = env_candidates.candidate_name(var, a), env_candidates.candidate_name(var, b)
    ok = (MITIGATION_NAME_RE.fullmatch(na) is not None and "--" not in na
          and na.startswith(f"env.{var}"[:90]) and (a == b) == (na == nb))
    attack_tally.record("agent env-candidate names (hypothesis)", cases=1, failures=int(not ok),
                        promise="a valid registry name, never '--', distinct values -> distinct names")
    assert ok, (var, a, b, na, nb)


def _record(tmp_path):
    """The loop's record of a fresh agent (the typed state _read_iteration reads into)."""
    from aorta_tui.agent import loop
    from aorta_tui.agent.state import AgentState

    state = AgentState(status="running", created="", proposer="builtin", llm=None,
                       goal=loop.DEFAULT_GOAL, budget=8, per_iteration=2, trials_used=0,
                       recipe="recipe.yaml", recipe_source="", mode="probe", command=(),
                       output=str(tmp_path), candidates=(), mitigation_files=(),
                       no_snapshot=True)
    return loop._Record(tmp_path, state, lambda _event: None)


def _baseline_iteration(run):
    from aorta_tui.agent.state import Iteration

    return Iteration(index=0, status="running", recipe="recipe.yaml", run_dir=str(run))


def test_a_cell_with_no_finished_trial_never_meets_the_goal(tmp_path):
    """matrix.json gives such a cell failure_rate None: it is not 0.0, so not a winner."""
    from aorta_tui.agent import loop
    from aorta_tui.agent.proposer import cell_figures, score

    run = tmp_path / "run"
    run.mkdir()
    cells = [{"cell": "none-none", "trials": 2, "failure_rate": 1.0, "error_rate": 0.0},
             {"cell": "x-none", "mitigations": ["x"], "trials": 0, "failure_rate": None,
              "error_rate": None}]
    (run / "matrix.json").write_text(json.dumps({"baseline_cell": "none-none", "cells": cells}))
    rec = _record(tmp_path)
    it = loop._read_iteration(rec, _baseline_iteration(run), loop.check_goal(loop.DEFAULT_GOAL))
    empty = next(c for c in it.cells if c.cell == "x-none")
    assert empty.failure_rate is None and empty.meets_goal is False
    assert rec.state.trials_used == 2 and rec.state.iterations == (it,)
    assert cell_figures(empty) == "no finished trial: rates not available"
    assert score(empty) == (float("inf"), float("inf"))


def test_a_baseline_with_no_finished_trial_is_an_error(tmp_path):
    from aorta_tui.agent import loop
    from aorta_tui.core.errors import AortaError

    run = tmp_path / "run"
    run.mkdir()
    (run / "matrix.json").write_text(json.dumps({"baseline_cell": "none-none", "cells": [
        {"cell": "none-none", "trials": 0, "failure_rate": None, "error_rate": None}]}))
    with pytest.raises(AortaError, match="finished no trial"):
        loop._read_iteration(_record(tmp_path), _baseline_iteration(run),
                             loop.check_goal(loop.DEFAULT_GOAL))


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_two_secret_values_of_one_variable_never_share_a_cell(tmp_path):
    """The sidecar holds the mask for both: the pair rule compares the values in memory."""
    a, b = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2", "hf_" + "Z9y8X7w6V5u4T3s2R1q0P9o8"
    script = f'[ "$HF_TOKEN" = "{b}" ] && [ "$HSA_ENABLE_SDMA" = 0 ] || exit 3'
    proc = _run(tmp_path, "--budget", "30", "--candidates", "hsa_no_sdma",
                "--env-candidate", f"HF_TOKEN={a}", "--env-candidate", f"HF_TOKEN={b}",
                script=script)
    assert proc.returncode == 0, proc.stderr
    _d, state = _state(tmp_path)
    assert state["recommendation"]["mitigations"] == ["env.HF_TOKEN.secret-2", "hsa_no_sdma"]
    proposed = [tuple(c) for it in state["iterations"] for c in it["proposed"]]
    assert ("env.HF_TOKEN.secret-1", "env.HF_TOKEN.secret-2") not in proposed
    assert a not in proc.stdout + proc.stderr and b not in proc.stdout + proc.stderr


@pytest.mark.parametrize(("extra", "says"), [
    ("env_passthrough_mode: file\n", "writes every variable into probe.env"),
    ("executor:\n  kind: slurm\n", "writes each trial's environment into its job spec"),
])
def test_a_secret_setting_where_the_run_would_write_it_is_refused(tmp_path, extra, says):
    """probe.env and a Slurm trial's job spec hold every trial variable in the run."""
    (tmp_path / "probe.yaml").write_text(RECIPE + extra)
    proc = aorta("agent", "probe.yaml", "--no-snapshot", "--env-candidate",
                 "DB_PASSWORD=hunter2-hunter2", "--", "sh", "-c", "true", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "--env-candidate DB_PASSWORD=...: a secret's value is kept in memory only" in proc.stderr
    assert says in proc.stderr
    assert "hunter2" not in proc.stdout + proc.stderr
    assert not (tmp_path / "aorta-out").exists()


_env_maps = st.dictionaries(
    st.text(min_size=1, max_size=40),
    st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True),
                    st.text(st.characters(blacklist_categories=("Cs",)), max_size=200000 // 50),
                    max_size=4),
    max_size=6)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=60, deadline=None)
@given(values=_env_maps)
@example(values={"env.HF_TOKEN.secret-1": {"HF_TOKEN": "x" * 300_000}})  # > a pipe's 64 KiB
def test_secret_values_cross_the_pipe_whole(values):
    """What the agent sends each sweep through its pipe arrives as it was sent, larger than a
    pipe's buffer too (a thread writes)."""
    from aorta_tui.core.secrets import receive_secret_values, send_secret_values

    assert receive_secret_values(send_secret_values(values)) == values


@pytest.mark.parametrize("body", [b"", b"[]", b'{"m": {"A": 1}}', b"not json", b'{"m": "x"}'])
def test_what_is_not_the_agents_secret_values_is_refused_unechoed(body):
    import os

    from aorta_tui.core.secrets import receive_secret_values

    read_fd, write_fd = os.pipe()
    os.write(write_fd, body)
    os.close(write_fd)
    with pytest.raises(UsageError, match="not the agent's secret values") as err:
        receive_secret_values(read_fd)
    assert body.decode() not in err.value.message or not body
