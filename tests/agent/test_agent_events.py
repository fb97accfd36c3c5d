"""The agent loop's events from an iteration's sweep (agent/loop.py ``_follow_sweep``): the
sweep's run directory recorded in agent.json as soon as its ``run_started`` line comes, its
warnings passed on as the agent's, naming the iteration; a line that is not an event is
skipped."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from aorta_tui.agent import loop
from aorta_tui.agent.state import AgentState, Iteration
from aorta_tui.core.events import Event, RunWarning


class _Proc:
    def __init__(self, lines: list[str]) -> None:
        self.stdout = io.StringIO("".join(line + "\n" for line in lines))


def _state(tmp_path: Path, it: Iteration) -> AgentState:
    return AgentState(status="running", created="", proposer="builtin", llm=None,
                      goal=loop.DEFAULT_GOAL, budget=8, per_iteration=2, trials_used=1,
                      recipe="recipe.yaml", recipe_source="", mode="probe", command=(),
                      output=str(tmp_path), candidates=("x",), mitigation_files=(),
                      no_snapshot=True, iterations=(it,))


def test_the_sweeps_run_dir_is_recorded_and_its_warnings_are_the_agents(tmp_path: Path) -> None:
    it = Iteration(index=1, status="running", recipe="iter-01.yaml", run_dir=None)
    events: list[Event] = []
    rec = loop._Record(tmp_path / "agent-x", _state(tmp_path, it), events.append)
    rec.agent_dir.mkdir()
    run_dir = tmp_path / "out" / "T" / "r1"
    lines: list[Any] = [
        {"event": "run_started", "run_id": "r1", "ts": 1.0, "source": "sweep",
         "run_dir": str(run_dir), "total": 1},
        "not json at all",
        {"event": "warning", "run_id": "r1", "ts": 2.0, "message": "no tier 3", "code": "tier3"},
        {"event": "trial_finished", "run_id": "r1", "ts": 3.0},
    ]
    got = loop._follow_sweep(rec, it, _Proc([x if isinstance(x, str) else json.dumps(x)
                                              for x in lines]))  # type: ignore[arg-type]
    assert got.run_dir == str(run_dir.resolve()) and rec.state.iterations == (got,)
    saved = json.loads((rec.agent_dir / "agent.json").read_text())
    assert saved["iterations"][0]["run_dir"] == str(run_dir.resolve())  # saved at once
    assert events == [RunWarning("agent-x", message="iteration 1: no tier 3", code="tier3",
                                 ts=events[0].ts)]
