"""plan.json as a typed value (store/plan_doc.py): the plan writes the bytes the untyped
serializer wrote; plans aorta-tui wrote read back to their own bytes; any plan round-trips; a
damaged plan is a located exit 2 naming the file and the field, an oversize one is refused;
the readers that forgive a damaged plan (the resume's count, the node summary, the TUI's grid,
the analysis frames) see none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.core.secrets import mask_env
from aorta_tui.executor.placement import node_summary
from aorta_tui.store.plan_doc import (
    PlanDoc,
    PlannedCell,
    PlannedTrial,
    plan_or_none,
    read_plan,
    read_plan_or_none,
)
from aorta_tui.sweep.plan import CellPlan, Plan, TrialSpec
from aorta_tui.tui.matrix_state import MatrixState
from tests.engine_support import set_at_path

FIXTURES = Path(__file__).parents[1] / "tui" / "fixtures" / "aorta-out" / "TUI-DEMO"
WRITTEN = sorted(FIXTURES.glob("*/plan.json"))


def _old_to_dict(plan: Plan) -> dict[str, Any]:
    """``Plan.to_dict`` before the type, verbatim."""
    return {
        "order": plan.order,
        "seed": plan.seed,
        "baseline_cell": plan.baseline_cell,
        "cells": [
            {
                "name": c.name,
                "mitigations": list(c.mitigations),
                "environment": c.environment,
                "docker": c.docker,
                "env": mask_env(c.env),  # plan.json: never a token (core/secrets.py)
                "switches": list(c.switches),
                "trials": c.trials,
                "steps": c.steps,
            }
            for c in plan.cells
        ],
        "trials": [
            {"trial_id": t.trial_id, "cell": t.cell, "trial": t.trial, "order": t.order}
            for t in plan.trials
        ],
    }


# -- the bytes -----------------------------------------------------------------------------

_text = st.text(max_size=10)
_name = st.text("abc_-", min_size=1, max_size=8)
# secrets' names among them: the masking must stay what it was
_env = st.dictionaries(st.sampled_from(["HF_TOKEN", "API_KEY", "CUDA_LAUNCH_BLOCKING", "PATH"])
                       | _name, _text, max_size=3)
_cell_plans = st.builds(
    CellPlan, name=_name, mitigations=st.lists(_name, max_size=2).map(tuple), environment=_name,
    docker=st.none() | _text, env=_env, switches=st.lists(_text, max_size=2).map(tuple),
    trials=st.integers(0, 9), steps=st.none() | st.integers(1, 999),
    workload_config=st.none() | st.dictionaries(_name, st.integers(), max_size=2))
_plans = st.builds(
    Plan, cells=st.lists(_cell_plans, max_size=3).map(tuple),
    trials=st.lists(st.builds(TrialSpec, _text, _name, st.integers(0, 99), st.integers(0, 999)),
                    max_size=4).map(tuple),
    order=st.sampled_from(["interleaved", "sequential", "random"]), seed=st.integers(0, 2**63),
    baseline_cell=st.none() | _name)


@given(_plans)
def test_the_plan_writes_the_untyped_serializers_bytes(plan: Plan) -> None:
    old = json_bytes(_old_to_dict(plan))
    assert json_bytes(plan.to_dict()) == old
    again = PlanDoc.from_dict(json.loads(old))
    assert again == plan.document() and json_bytes(again.to_dict()) == old


@pytest.mark.parametrize("path", WRITTEN, ids=[p.parent.name for p in WRITTEN])
def test_plans_the_untyped_serializer_wrote_read_back_to_the_same_bytes(path: Path) -> None:
    plan = read_plan(path.parent)
    assert json_bytes(plan.to_dict()) == path.read_bytes()
    assert plan.baseline_cell == "none-none" and len(plan.trials) == 9
    assert plan.cells[1].env == {"CUDA_LAUNCH_BLOCKING": "1"}
    assert plan.trial_ids == {f"{c.name}/trial-{k:03d}" for c in plan.cells for k in range(3)}


# -- properties ----------------------------------------------------------------------------

_opt_int = st.none() | st.integers(-(2**63), 2**63)
_docs = st.builds(
    PlanDoc, order=_text, seed=_opt_int, baseline_cell=st.none() | _text,
    cells=st.lists(st.builds(PlannedCell, _text, st.lists(_text, max_size=2).map(tuple), _text,
                             st.none() | _text, st.dictionaries(_text, _text, max_size=2),
                             st.lists(_text, max_size=2).map(tuple), st.integers(0, 99),
                             _opt_int), max_size=3).map(tuple),
    trials=st.lists(st.builds(PlannedTrial, _text, st.none() | _text, _opt_int, _opt_int),
                    max_size=4).map(tuple))


@given(_docs)
def test_any_plan_reads_back_to_itself_and_its_bytes(doc: PlanDoc) -> None:
    written = json_bytes(doc.to_dict())
    again = PlanDoc.from_dict(json.loads(written))
    assert again == doc
    assert json_bytes(again.to_dict()) == written


def test_a_plan_of_trial_ids_only_reads() -> None:
    # what a hand-made plan holds (tests/executor/test_executor_placement.py writes one)
    doc = PlanDoc.from_dict({"trials": [{"trial_id": "a/trial-000"}]})
    assert doc.trial_ids == {"a/trial-000"} and doc.cells == () and doc.seed is None
    assert doc.trials[0] == PlannedTrial("a/trial-000", None, None, None)


# -- damage ----------------------------------------------------------------------------------

DAMAGED = [
    (("trials",), "all", "trials: expected an array"),
    (("trials", 1), "a/trial-001", r"trials\[1\]: expected an object"),
    (("trials", 2, "trial"), "two", r"trials\[2\]\.trial: expected an integer"),
    (("trials", 0, "trial_id"), None, r"trials\[0\]\.trial_id: expected a string"),
    (("cells", 0, "env", "CUDA_LAUNCH_BLOCKING"), 1,
     r"cells\[0\]\.env\.CUDA_LAUNCH_BLOCKING: expected a string"),
    (("cells", 1, "mitigations"), "x", r"cells\[1\]\.mitigations: expected an array"),
    (("seed",), 1.5, "seed: expected an integer"),
    (("baseline_cell",), 3, "baseline_cell: expected a string"),
]


def _damaged_run(tmp_path: Path, path: tuple[Any, ...], value: object) -> Path:
    doc = json.loads(WRITTEN[0].read_text())
    set_at_path(doc, path, value)
    run = tmp_path / "run"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps(doc))
    return run


@pytest.mark.parametrize(("path", "value", "message"), DAMAGED, ids=[m for _p, _v, m in DAMAGED])
def test_a_damaged_plan_names_the_file_and_the_field(
        tmp_path: Path, path: tuple[Any, ...], value: object, message: str) -> None:
    run = _damaged_run(tmp_path, path, value)
    with pytest.raises(UsageError, match=f"^{run / 'plan.json'}: {message}") as caught:
        read_plan(run)
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint
    # the readers that forgive it see no plan: no summary, no grid from it, the journal's ids
    assert read_plan_or_none(run) is None and node_summary(run) == []
    assert MatrixState.for_run(run).trials == {}


@pytest.mark.parametrize("doc", [{}, {"cells": []}, [], "plan"])
def test_a_plan_without_its_trials_is_none(tmp_path: Path, doc: object) -> None:
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=f"^{tmp_path / 'plan.json'}: "):
        read_plan(tmp_path)
    assert plan_or_none(doc) is None and read_plan_or_none(tmp_path) is None


def test_an_oversize_plan_is_refused_before_it_is_read(tmp_path: Path) -> None:
    with (tmp_path / "plan.json").open("wb") as fh:
        fh.truncate(INPUT_LIMITS["plan"] + 1)  # sparse: nothing to read if it were read
    with pytest.raises(UsageError, match="over the 64.0 MiB limit") as caught:
        read_plan(tmp_path)
    assert str(tmp_path / "plan.json") in caught.value.message
    assert read_plan_or_none(tmp_path) is None


def test_a_missing_plan_is_none(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="plan.json: no such file"):
        read_plan(tmp_path)
    assert read_plan_or_none(tmp_path) is None and read_plan_or_none(tmp_path / "no") is None


def test_the_tui_grid_starts_from_the_typed_plan() -> None:
    state = MatrixState.for_run(WRITTEN[0].parent)
    assert len(state.trials) == 9 and state.cells[0] == "none-none"
    view = state.trials[("hip_launch_blocking-none", 0)]
    assert view.trial_id == "hip_launch_blocking-none/trial-000"
