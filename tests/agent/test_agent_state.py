"""agent.json as a typed value (agent/state.py): the format is what it was, byte for byte, the
one reader takes back what the one serializer writes, and a damaged agent.json is a located
UsageError (exit 2) on --resume, never a traceback.

The goldens (tests/agent/fixtures/golden-state, see its README) are the agent.json and agent.md
of two real CPU agent runs, written by the agent code before its state was typed.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.agent import loop
from aorta_tui.agent.page import render_markdown
from aorta_tui.agent.state import (
    AgentState,
    Baseline,
    CellResult,
    Evidence,
    EvidenceFigures,
    Iteration,
    LlmSettings,
    Recommendation,
)
from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from tests.engine_support import aorta, json_paths, set_at_path

GOLDEN = Path(__file__).parent / "fixtures" / "golden-state"
CASES = ("goal_met", "budget_spent")


@pytest.mark.parametrize("case", CASES)
def test_a_real_agent_json_reads_and_writes_back_to_the_same_bytes(case: str) -> None:
    state = AgentState.from_json(GOLDEN / case / "agent.json")
    assert json_bytes(state.to_json()) == (GOLDEN / case / "agent.json").read_bytes()
    assert render_markdown(state) == (GOLDEN / case / "agent.md").read_text(encoding="utf-8")


def test_the_typed_value_holds_what_the_agent_found() -> None:
    met = AgentState.from_json(GOLDEN / "goal_met" / "agent.json")
    assert met.status == "goal_met" and met.recommendation is not None
    assert met.recommendation.mitigations == ("hsa_no_sdma",)
    assert met.recommendation.evidence is not None
    assert met.recommendation.evidence.baseline.failure_rate == 1.0
    assert met.baseline is not None and met.baseline.cell == "none-none"
    assert [it.index for it in met.iterations] == list(range(len(met.iterations)))
    spent = AgentState.from_json(GOLDEN / "budget_spent" / "agent.json")
    assert spent.recommendation is not None and spent.recommendation.cell is None
    assert spent.trials_used == spent.budget == 8


def test_save_writes_the_typed_state_as_the_agent_wrote_it(tmp_path: Path) -> None:
    typed = loop.save(tmp_path, AgentState.from_json(GOLDEN / "goal_met" / "agent.json"))
    assert (tmp_path / "agent.json").read_bytes() == (GOLDEN / "goal_met" / "agent.json").read_bytes()
    assert (tmp_path / "agent.md").read_text() == (GOLDEN / "goal_met" / "agent.md").read_text()
    assert loop.load_state(tmp_path) == typed


# -- damaged documents ---------------------------------------------------------------------

def _golden_doc(case: str = "goal_met") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((GOLDEN / case / "agent.json").read_bytes())
    return doc


TYPED_FIELDS = [
    (("status",), "status"), (("budget",), "budget"), (("trials_used",), "trials_used"),
    (("command", 1), "command[1]"), (("candidates", 0), "candidates[0]"),
    (("no_snapshot",), "no_snapshot"), (("baseline",), "baseline"),
    (("baseline", "failure_rate"), "baseline.failure_rate"),
    (("iterations",), "iterations"), (("iterations", 1, "status"), "iterations[1].status"),
    (("iterations", 1, "proposed", 0, 0), "iterations[1].proposed[0][0]"),
    (("iterations", 1, "cells", 0, "meets_goal"), "iterations[1].cells[0].meets_goal"),
    (("iterations", 2, "cells", 1, "step_time_ratio"), "iterations[2].cells[1].step_time_ratio"),
    (("recommendation", "confidence"), "recommendation.confidence"),
    (("recommendation", "evidence", "baseline"), "recommendation.evidence.baseline"),
    (("recommendation", "evidence", "baseline", "run_dir"),
     "recommendation.evidence.baseline.run_dir"),
    (("secret_candidates",), "secret_candidates"),
]


@pytest.mark.parametrize(("path", "field"), TYPED_FIELDS, ids=[f for _p, f in TYPED_FIELDS])
def test_a_wrongly_typed_field_is_named_with_the_file(tmp_path: Path, path: tuple[Any, ...],
                                                      field: str) -> None:
    doc = _golden_doc()
    # no typed field is an array of arrays; `iterations` is an array of objects: a number
    set_at_path(doc, path, 7 if field == "iterations" else [["not", "this"]])
    (tmp_path / "agent.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError) as caught:
        loop.load_state(tmp_path)
    assert caught.value.message.startswith(f"{tmp_path / 'agent.json'}: {field}: expected ")
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint


def test_resume_of_a_damaged_agent_json_is_exit_2_naming_the_field(tmp_path: Path) -> None:
    d = tmp_path / "out" / "T-AG" / "agent-1"
    d.mkdir(parents=True)
    doc = _golden_doc()
    doc["status"] = "interrupted"  # so the resume reads everything and would run on
    doc["iterations"][1]["cells"] = {"none-none": 1}
    (d / "agent.json").write_text(json.dumps(doc))
    proc = aorta("agent", "--resume", str(d), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "agent.json: iterations[1].cells: expected an array" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_missing_field_and_another_kind_are_refused() -> None:
    doc = _golden_doc()
    del doc["iterations"][0]["index"]
    with pytest.raises(UsageError, match=r"agent\.json: iterations\[0\]\.index: missing"):
        AgentState.from_dict(doc)
    with pytest.raises(UsageError, match="not an agent state"):
        AgentState.from_dict({**_golden_doc(), "kind": "aorta-tui/policy-report"})


# -- properties ----------------------------------------------------------------------------

_text = st.text(max_size=10)
_opt_text = st.none() | _text
_opt_number = st.none() | st.floats(min_value=-1e300, max_value=1e300, allow_nan=False) \
    | st.integers(-2**53, 2**53)
_ints = st.integers(-2**31, 2**31)
_opt_int = st.none() | _ints
_names = st.lists(_text, max_size=3).map(tuple)
_figures = {"trials": _opt_int, "failure_rate": _opt_number, "error_rate": _opt_number,
            "step_time_mean_s": _opt_number, "step_time_p50_s": _opt_number,
            "step_time_ratio": _opt_number}
_cells = st.builds(CellResult, cell=_opt_text, mitigations=_names, run_dir=_opt_text,
                   meets_goal=st.booleans(), **_figures)
_iterations = st.builds(Iteration, index=_ints, status=_text, recipe=_text, run_dir=_opt_text,
                        proposed=st.lists(_names, max_size=2).map(tuple), reasons=_names,
                        note=_text, cells=st.lists(_cells, max_size=2).map(tuple), trials=_ints)
_evidence = st.builds(
    Evidence,
    cell=st.builds(EvidenceFigures, run_dir=_opt_text, trials=_opt_int, failure_rate=_opt_number,
                   error_rate=_opt_number, step_time_ratio=_opt_number,
                   step_time_p50_s=_opt_number, cell=st.none()),
    baseline=st.builds(EvidenceFigures, run_dir=_opt_text, trials=_opt_int,
                       failure_rate=_opt_number, error_rate=_opt_number,
                       step_time_ratio=st.none(), step_time_p50_s=_opt_number, cell=_opt_text))
_states = st.builds(
    AgentState, status=_text, created=_text, proposer=_text,
    llm=st.none() | st.builds(LlmSettings, model=_text, base_url=_opt_text,
                              timeout_s=_opt_number),
    goal=_text, budget=_ints, per_iteration=_ints, trials_used=_ints, recipe=_text,
    recipe_source=_text, mode=_text, command=_names, output=_text, candidates=_names,
    mitigation_files=_names, no_snapshot=st.booleans(),
    baseline=st.none() | st.builds(Baseline, cell=_opt_text, run_dir=_opt_text,
                                   mitigations=_names, **_figures),
    iterations=st.lists(_iterations, max_size=2).map(tuple),
    recommendation=st.none() | st.builds(Recommendation, mitigations=_names, cell=_opt_text,
                                         confidence=_opt_number, reason=_text,
                                         evidence=st.none() | _evidence,
                                         confidence_meaning=_opt_text),
    secret_candidates=st.dictionaries(_text, _text, max_size=2), stop_reason=_opt_text,
    schema_version=_ints)
_json = st.recursive(st.none() | st.booleans() | _opt_number | _text,
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_text, inner, max_size=3), max_leaves=6)

PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(state=_states)
def test_the_reader_takes_back_what_the_serializer_writes(state: AgentState) -> None:
    assert AgentState.from_dict(state.to_json()) == state
    assert AgentState.from_dict(json.loads(json_bytes(state.to_json()))) == state


GOLDEN_PATHS = [(case, p) for case in CASES for p in json_paths(_golden_doc(case))]


@PROPERTY
@given(where=st.sampled_from(GOLDEN_PATHS), value=_json)
def test_any_value_anywhere_is_read_or_refused_with_a_located_error(
        where: tuple[str, tuple[Any, ...]], value: Any) -> None:
    case, path = where
    doc = copy.deepcopy(_golden_doc(case))
    set_at_path(doc, path, value)
    try:
        state = AgentState.from_dict(doc, where="agent.json")
    except UsageError as exc:
        assert exc.message.startswith("agent.json")
        assert exc.exit_code == ExitCode.USAGE
    else:
        assert AgentState.from_dict(state.to_json()) == state
        render_markdown(state)  # the page renders whatever the reader took


@PROPERTY
@given(doc=_json)
def test_any_json_document_is_read_or_refused_never_a_traceback(doc: Any) -> None:
    for candidate in (doc, {**_golden_doc(), "iterations": doc},
                      {**_golden_doc(), "recommendation": doc}):
        try:
            AgentState.from_dict(candidate, where="agent.json")
        except UsageError as exc:
            assert exc.message.startswith("agent.json")
