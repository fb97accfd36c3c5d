"""The trial detail says where a trial's time went: the timeline result.json records, read from a
real headless sweep's run directory (issue 15 item 1)."""

from __future__ import annotations

import json
from pathlib import Path

from tui_support import run_probe_sweep

from aorta_tui.tui.matrix_state import TrialView
from aorta_tui.tui.screens.trial import read_result, timeline_facts


def test_the_detail_lists_the_phases_the_supervisor_saw_and_why_the_rest_are_missing(tmp_path: Path) -> None:
    run = run_probe_sweep(tmp_path, trials=1)
    result_path = next(run.glob("trials/*/trial-000/result.json"))
    cell = result_path.parent.parent.name
    view = TrialView(trial_id=f"{cell}/trial-000", cell=cell, trial=0, state="pass")
    result = read_result(run, view)
    assert result == json.loads(result_path.read_text())
    text = "\n".join(timeline_facts(result))
    assert "timeline" in text
    for phase in ("spawned", "exited", "reaped"):  # a probe trial: what the supervisor sees
        assert phase in text
    # and, in short, why nothing inside it is known
    assert "marks not available (an opaque command (mode" in text and len(text.splitlines()) == 1
