"""The matrix grid of a Slurm run says where each trial ran and how its job ended.

A real sweep through the one-node Slurm of scripts/slurm-local.sh (one cell passes, one fails,
one trial's job is cancelled), then the TUI opens the run at 80x24 and 160x48: each trial's cell
reads its verdict symbol, its node and, for a job that did not complete, its state code. A local
run's grid keeps its look (the snapshot tests under __snapshots__ cover it; here, the text).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from tui_support import FIXED_FACTS, async_test, run_probe_sweep, wait_for

from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.matrix_state import MatrixState, parse_placement
from aorta_tui.tui.screens.matrix import MatrixScreen
from aorta_tui.tui.widgets.matrix_grid import MatrixGrid, placement_text
from tests.engine_support import aorta, only_run_dir
from tests.executor.test_slurm_executor import _slurm_problem

RECIPE = ("schema_version: 1\nmode: probe\nticket: t\ntrials: 2\n"
          "mitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\n"
          "executor: {kind: slurm, gres: 'gpu:1'}\n")


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    problem = _slurm_problem()
    if problem is not None:
        if os.environ.get("AORTA_REQUIRE_SLURM") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    tmp = tmp_path_factory.mktemp("slurm-grid")
    (tmp / "r.yaml").write_text(RECIPE)
    proc = aorta("--batch", str(tmp / "r.yaml"), "--output", str(tmp / "out"), "--no-snapshot", "--",
                 sys.executable, "-c", "import os, sys; sys.exit(1 if os.environ.get('CUDA_LAUNCH_BLOCKING') else 0)",
                 timeout=180)
    assert proc.returncode == 0, proc.stderr
    return only_run_dir(tmp / "out")


def _facts(run: Path) -> dict[str, dict]:
    out = {}
    for p in run.glob("trials/*/trial-*/result.json"):
        d = json.loads(p.read_text())
        out[d["trial_id"]] = d["process"]["executor"]
    return out


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_the_job_map_holds_each_trials_node_and_final_state(slurm_run: Path) -> None:
    state = MatrixState.for_run(slurm_run)
    assert state.read_placement() and not state.read_placement()  # re-read only on change
    facts = _facts(slurm_run)
    assert state.placement == {t: (f["node"], f["state"]) for t, f in facts.items()}
    assert all(s == "COMPLETED" for _n, s in state.placement.values())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@async_test
async def test_the_grid_shows_node_and_job_state_per_trial(slurm_run: Path, size: tuple[int, int]) -> None:
    node = next(iter(_facts(slurm_run).values()))["node"]
    app = AortaApp(cwd=slurm_run.parent, output_dir=slurm_run.parent.parent, start_run=slurm_run,
                   machine_facts=FIXED_FACTS)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MatrixScreen), what="the matrix")
        screen = app.screen
        assert isinstance(screen, MatrixScreen)
        await wait_for(pilot, lambda: screen.state is not None and screen.state.status == "completed")
        # slurm/jobs.json is read by the screen's placement worker, not by the grid
        await wait_for(pilot, lambda: screen.state is not None and bool(screen.state.placement),
                       what="the job map read")
        screen.refresh_view()
        await pilot.pause()
        grid = screen.query_one(MatrixGrid)
        cells = {(cell, t): str(grid.get_cell(cell, f"t{t}")) for cell in ("none-none", "cuda_launch_blocking-none")
                 for t in (0, 1)}
        assert all(text == f" ✓ {node} " for (c, _t), text in cells.items() if c == "none-none"), cells
        assert all(text == f" ✗ {node} " for (c, _t), text in cells.items() if c != "none-none"), cells
        # what the grid draws at this size (its visible lines), not only its cells' content
        lines = ["".join(s.text for s in grid.render_line(y)) for y in range(grid.size.height)]
        drawn = "\n".join(lines)
        assert f"✓ {node}" in drawn and f"✗ {node}" in drawn, drawn
        assert grid.size.width <= size[0]


@async_test
async def test_a_local_runs_grid_keeps_its_look(tmp_path: Path) -> None:
    run = run_probe_sweep(tmp_path, trials=2)
    assert not (run / "slurm").exists()
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "out", start_run=run, machine_facts=FIXED_FACTS)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MatrixScreen), what="the matrix")
        screen = app.screen
        assert isinstance(screen, MatrixScreen)
        await wait_for(pilot, lambda: screen.state is not None and screen.state.status is not None)
        screen.refresh_view()
        await pilot.pause()
        grid = screen.query_one(MatrixGrid)
        texts = {str(grid.get_cell(c, "t0")) for c in screen.state.cells}
        assert texts <= {" ✓ ", " ✗ ", " ! "}, texts
        assert screen.state.placement == {}


def test_pending_running_and_ended_jobs_read_as_codes() -> None:
    data = {"batches": {"b0": {"job_id": "7"}, "b1": {"job_id": None}},
            "trials": {"a/trial-000": {"batch": "b0", "task": 0},
                       "a/trial-001": {"batch": "b0", "task": 1, "state": "RUNNING", "node": "gpu-node-0042.cluster"},
                       "a/trial-002": {"batch": "b0", "task": 2, "state": "TIMEOUT", "node": "n1"},
                       "a/trial-003": {"batch": "b1", "task": 0},
                       "a/trial-004": {"batch": "b0", "task": 3, "cancelled_by_orchestrator": True},
                       "a/trial-005": "junk", 7: {}}}
    got = {t: placement_text(*w) for t, w in parse_placement(data).items()}
    assert got == {"a/trial-000": "PD", "a/trial-001": "gpu-node-…", "a/trial-002": "n1 TO",
                   "a/trial-003": "", "a/trial-004": "CA"}
    assert parse_placement([1, 2]) == {} and parse_placement({"trials": 3}) == {}
