"""Issue 16 item 6, driven as a user drives the app: Pilot keypresses on fixture runs and a
real policy sweep that fails, and the real program under tmux for the layout of the nav line."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from tmux_support import ENTRY, Tmux
from tui_support import DEMO_RUN, FIXED_FACTS, FIXTURES, LIVE_RUN, async_test, wait_for, workspace

from aorta_tui.core.events import (
    CellAggregated,
    RunFinished,
    RunStarted,
    TrialFinished,
    TrialStarted,
)
from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.matrix_state import MatrixState
from aorta_tui.tui.screens.dialogs import ConfirmScreen, WarningsScreen
from aorta_tui.tui.widgets.matrix_grid import cell_figures

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def _app(ws: Path, **kw: object) -> AortaApp:
    return AortaApp(cwd=ws, output_dir=ws / "aorta-out", machine_facts=FIXED_FACTS, **kw)  # type: ignore[arg-type]


@async_test
async def test_tab_moves_between_the_home_panes_and_runs_show_their_failures(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    app = _app(ws)
    async with app.run_test(size=(120, 30)) as pilot:
        runs = app.screen.query_one("#runs")
        await wait_for(pilot, lambda: runs.row_count >= 2, what="the run list")
        assert app.focused is runs
        await pilot.press("tab")
        assert app.focused is app.screen.query_one("#recipes")
        await pilot.press("tab")
        assert app.focused is runs
        await pilot.press("shift+tab")
        assert app.focused is app.screen.query_one("#recipes")
        rows = {runs.get_row_at(i)[1].plain: runs.get_row_at(i) for i in range(runs.row_count)}
        live = rows[LIVE_RUN]
        assert [c.plain for c in live[2:4]] == ["3/9", "1 fail, 1 error"]
        demo = rows[DEMO_RUN]
        assert demo[0].plain == "finished" and "fail" in demo[3].plain


@async_test
async def test_c_asks_before_cancelling_and_w_lists_the_warnings(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = ws / "aorta-out" / LIVE_RUN
    with (run / "journal.jsonl").open("a") as fh:
        for message in ("snapshot of 'local' failed: [x] disk full", "second warning"):
            fh.write(json.dumps({"event": "warning", "run_id": run.name, "ts": time.time(),
                                 "message": message, "code": "snapshot"}) + "\n")
    app = _app(ws, start_run=run)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.state is not None and len(screen.state.warnings) == 2)
        await wait_for(pilot, lambda: "2 warnings (w)" in str(screen.query_one("#matrix-summary").render()),
                       what="the warnings count in the summary")
        await pilot.press("w")
        assert isinstance(app.screen, WarningsScreen)
        shown = " ".join(str(s.render()) for s in app.screen.query(".warning-item"))
        assert "[x] disk full" in shown and "second warning" in shown
        await pilot.press("escape")
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause(0.2)
        assert app.screen is screen
        assert not any("cancel sent" in str(n.message) for n in app._notifications)
        await pilot.press("c", "y")
        await wait_for(pilot, lambda: any("not running" in str(n.message) or "cancel sent" in str(n.message)
                                          for n in app._notifications), what="the cancel to be sent")


def test_a_resumed_run_shows_live_figures_not_the_last_sessions_n_a(tmp_path: Path) -> None:
    state = MatrixState(run_dir=tmp_path)
    state.apply_all([
        RunStarted("r", source="sweep", run_dir=str(tmp_path), total=2, cells=["a", "b"]),
        TrialStarted("r", trial_id="a/trial-000", cell="a", trial=0, attempt=1, pid=1),
        TrialFinished("r", trial_id="a/trial-000", cell="a", trial=0, verdict="pass", mean_step_s=0.002),
        CellAggregated("r", cell="a", stats={"failure_rate": 0.0, "step_time_s": {"p50": 0.002}}),
        CellAggregated("r", cell="b", stats={"failure_rate": None, "step_time_s": {"p50": None}}),
        RunFinished("r", status="interrupted", exit_code=130),
        RunStarted("r", source="sweep", run_dir=str(tmp_path), total=2, cells=["a", "b"], resumed=True),
        TrialFinished("r", trial_id="b/trial-000", cell="b", trial=0, verdict="fail", mean_step_s=0.004),
    ])
    fail, step, *_ = cell_figures(state, "b")
    assert (fail, step) == ("~1/1", "~4.0ms")  # not the interrupted session's "n/a"


@async_test
async def test_opening_a_report_fills_the_form_and_a_failed_rerun_clears_the_old_table(tmp_path: Path) -> None:
    from textual.widgets import DataTable, Input

    ws = workspace(tmp_path)
    (ws / "aorta-policy" / "old").mkdir(parents=True)
    shutil.copy(FIXTURES / "policy" / "policy.json", ws / "aorta-policy" / "old" / "policy.json")
    app = _app(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("6")
        screen = app.screen
        await pilot.press("o")
        await pilot.pause(0.2)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.report is not None, what="the report")
        form = {i: screen.query_one(f"#pol-{i}", Input).value for i in ("workload", "policies", "streams", "trials", "extra")}
        assert form == {"workload": "tiny_kernel_stress", "policies": "baseline,cuda_max_connections_1",
                        "streams": "2", "trials": "3", "extra": "--device cpu --iterations 5"}
        status = str(screen.query_one("#policy-status").render())
        assert "CPU emulation: streams run one after another" in status  # policy.md's note, here too
        assert screen.query_one("#policy-table", DataTable).row_count > 0
        screen.query_one("#pol-workload", Input).value = "no_such_workload"
        await pilot.press("escape", "r")
        await wait_for(pilot, lambda: "sweep failed" in str(screen.query_one("#policy-status").render()),
                       timeout=60, what="the failed sweep")
        assert screen.query_one("#policy-table", DataTable).row_count == 0
        assert screen.report is None


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_the_nav_line_breaks_between_items_under_tmux(tmp_path: Path, size: tuple[int, int]) -> None:
    tmux = Tmux(f"smaller-{size[0]}-{time.monotonic_ns()}")
    tmux.start([ENTRY], tmp_path, size)
    try:
        screen = tmux.wait_settled("ctrl+q quit")
        lines = screen.splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip().startswith("1 home"))
        nav = [line.strip() for line in lines[start:start + 3] if line.strip() and not line.startswith("╭")]
        nav = nav[: 1 if size[0] >= 120 else 2]
        joined = "  ".join(nav)
        for item in ("1 home", "2 recipe editor", "4 trace monitor", "5 env diff", "? help",
                     "ctrl+p commands", "ctrl+q quit"):
            assert item in joined, (item, nav, screen)
        assert all(len(line) <= size[0] for line in nav)
        assert not any(line.endswith(("?", "ctrl+p", "ctrl+q", "1", "2", "3", "4", "5", "6")) for line in nav), nav
    finally:
        tmux.kill()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_recipe_problem_messages_are_shown_whole_under_tmux(tmp_path: Path, size: tuple[int, int]) -> None:
    (tmp_path / "bad.yaml").write_text("schema_version: 1\nmode: triage\nticket: T\nworkload: gpu_smoke\n"
                                       "steps: 2\ncells:\n  - name: a\n    mitigations: [none]\n"
                                       "    environment: local\n")
    tmux = Tmux(f"problems-{size[0]}-{time.monotonic_ns()}")
    tmux.start([ENTRY, "edit", "bad.yaml"], tmp_path, size)
    try:
        screen = tmux.wait_settled("problem(s)")
        # the message and its fix, to the last word, wrapped inside the pane
        words = " ".join(line.split("▎")[-1].strip() for line in screen.splitlines())
        assert "required key 'trials' is missing — add `trials: 3` (trials per cell)" in " ".join(words.split()), screen
    finally:
        tmux.kill()
