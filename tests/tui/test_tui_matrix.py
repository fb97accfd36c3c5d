"""Matrix screen on real detached sweeps: live progress, trial detail, re-attach, cancel, resume."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_support import FIXED_FACTS, PROBE_COMMAND, async_test, wait_for, write_probe_recipe

from aorta_tui.relay.launch import launch_detached
from aorta_tui.store.lock import lock_holder
from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.matrix import MatrixScreen
from aorta_tui.tui.widgets.matrix_grid import MatrixGrid

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def _app(tmp_path: Path, run_dir: Path) -> AortaApp:
    return AortaApp(cwd=tmp_path, output_dir=tmp_path / "aorta-out", start_run=run_dir,
                    machine_facts=FIXED_FACTS)


def _matrix(app: AortaApp) -> MatrixScreen:
    screen = app.screen
    assert isinstance(screen, MatrixScreen)
    return screen


@pytest.fixture
def sleep_per_trial(monkeypatch: pytest.MonkeyPatch):
    def set_sleep(seconds: float) -> None:
        monkeypatch.setenv("TUI_TEST_SLEEP", str(seconds))  # the detached sweep inherits it
    return set_sleep


@async_test
async def test_matrix_follows_a_detached_sweep_and_reattaches_after_the_tui_quits(tmp_path, sleep_per_trial) -> None:
    sleep_per_trial(0.8)  # six trials of ~1 s: still running when the first TUI quits
    recipe = write_probe_recipe(tmp_path, trials=3)
    run_dir = launch_detached(recipe, tmp_path / "aorta-out", command=PROBE_COMMAND)

    first = _app(tmp_path, run_dir)
    async with first.run_test(size=(100, 30)) as pilot:
        screen = _matrix(first)
        await wait_for(pilot, lambda: screen.state is not None and screen.state.done >= 1, what="a finished trial")
        assert screen.state.total == 6
        assert screen.state.status is None
    # The TUI is gone; the sweep is not.
    assert lock_holder(run_dir) is not None, "quitting the TUI stopped the sweep"

    second = _app(tmp_path, run_dir)
    async with second.run_test(size=(100, 30)) as pilot:
        screen = _matrix(second)
        await wait_for(pilot, lambda: screen.state is not None and screen.state.status == "completed",
                       timeout=60, what="the run to complete")
        await pilot.pause(0.4)  # one redraw
        state = screen.state
        # Re-attaching read the whole history from the journal, not only what came after.
        assert screen.events_seen >= 1 + 2 * 6
        assert state.count("pass") == 3 and state.count("fail") == 3
        fail_cell = "cuda_launch_blocking-none"
        assert state.cell_stats[fail_cell]["failure_rate"] == 1.0
        grid = screen.query_one(MatrixGrid)
        row = state.cells.index(fail_cell)
        assert grid.get_cell_at((row, 1)).plain.strip() == "✗"
        assert grid.get_cell_at((row, 4)).plain == "100%"
        # The trial detail shows the engine's verdict, exit status and the log tail.
        grid.focus()
        grid.cursor_coordinate = (row, 1)
        await wait_for(pilot, lambda: f"{fail_cell}/trial-000" in str(screen.query_one("#trial-detail").render()),
                       what="the trial's detail")
        detail = str(screen.query_one("#trial-detail").render())
        assert f"{fail_cell}/trial-000" in detail
        assert "exit 3" in detail
        assert "CUDA error: an illegal memory access" in detail
        view = state.trials[(fail_cell, 0)]
        assert view.detectors and all(d in detail for d in view.detectors)


@async_test
async def test_cancel_then_resume_from_the_matrix(tmp_path, sleep_per_trial) -> None:
    sleep_per_trial(0.6)
    recipe = write_probe_recipe(tmp_path, trials=3)
    run_dir = launch_detached(recipe, tmp_path / "aorta-out", command=PROBE_COMMAND)
    app = _app(tmp_path, run_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = _matrix(app)
        await wait_for(pilot, lambda: screen.state is not None and screen.state.done >= 1, what="a finished trial")
        await pilot.press("c", "y")  # c asks first; y confirms
        await wait_for(pilot, lambda: screen.state.status == "interrupted", timeout=30, what="the cancel")
        await wait_for(pilot, lambda: lock_holder(run_dir) is None, what="the orchestrator to exit")
        done_at_cancel = screen.state.done
        assert done_at_cancel < 6
        await wait_for(pilot, lambda: "interrupted (exit code 130)" in str(screen.query_one("#matrix-summary").render()),
                       what="the summary to say interrupted")
        await pilot.press("R")
        await wait_for(pilot, lambda: screen.state.status == "completed", timeout=60, what="the resumed run")
        assert screen.state.resumed
        assert screen.state.done == 6
        assert screen.state.count("pass") == 3 and screen.state.count("fail") == 3


@async_test
async def test_cancel_without_a_running_orchestrator_is_a_notification_not_a_crash(tmp_path) -> None:
    from tui_support import DEMO_RUN, workspace

    ws = workspace(tmp_path)
    app = _app(ws, ws / "aorta-out" / DEMO_RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = _matrix(app)
        await wait_for(pilot, lambda: screen.state is not None and screen.state.status == "completed")
        await pilot.press("c")
        await wait_for(pilot, lambda: any("not running" in str(n.message) for n in app._notifications),
                       what="the error notification")
        assert app.is_running


@async_test
async def test_a_runs_env_snapshots_open_in_the_env_diff(tmp_path) -> None:
    from tui_support import DEMO_RUN, workspace

    from aorta_tui.tui.screens.env_diff import EnvDiffScreen

    ws = workspace(tmp_path)
    app = _app(ws, ws / "aorta-out" / DEMO_RUN)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = _matrix(app)
        await wait_for(pilot, lambda: screen.state is not None and screen.state.status == "completed")
        await pilot.press("E")
        await wait_for(pilot, lambda: isinstance(app.screen, EnvDiffScreen))
        diff = app.screen
        await wait_for(pilot, lambda: "differences" in str(diff.query_one("#diff-summary").render()))
        assert diff.query_one("#snap-a").value.endswith("env/host_env.json")
        assert diff.query_one("#snap-b").value.endswith("env/local.json")
