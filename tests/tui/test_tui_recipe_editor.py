"""Recipe editor on the real recipe engine: validation as you type, plan, save, reload, launch."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Input
from tui_support import FIXED_FACTS, PROBE_RECIPE, app_in, async_test, wait_for
from tui_support import open_in_editor as _open

from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.matrix import MatrixScreen
from aorta_tui.tui.screens.recipe_editor import RecipeEditorScreen

GOOD = PROBE_RECIPE.format(trials=2)
BAD = GOOD.replace("trials: 2\n", "trials: 2\nbogus_key: 1\n")


def _issues(screen: RecipeEditorScreen) -> list[list[str]]:
    table = screen.query_one("#recipe-issues", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_errors_at_line_and_column_then_a_plan_once_fixed(tmp_path: Path) -> None:
    path = tmp_path / "probe.yaml"
    path.write_text(BAD)
    app = app_in(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(app, pilot, path)
        await wait_for(pilot, lambda: bool(screen.issues), what="the engine's issues")
        line, column, where, problem = _issues(screen)[0]
        assert (line, column, where) == ("5", "1", "bogus_key")
        assert "unknown key 'bogus_key'" in problem
        # Selecting the issue puts the cursor on it.
        table = screen.query_one("#recipe-issues", DataTable)
        table.focus()
        await pilot.press("enter")
        assert screen.editor.cursor_location == (4, 0)
        # Fix it by typing: delete the offending line.
        screen.editor.focus()
        screen.editor.select_line(4)
        checks = screen.checks_done  # before the keys: a fast check could finish before a read after
        await pilot.press("backspace", "backspace")
        await wait_for(pilot, lambda: screen.checks_done > checks and not screen.issues, what="a clean check")
        assert "✓ valid" in str(screen.query_one("#recipe-status").render())
        plan = screen.plan_text
        assert "4 trials over 2 cells" in plan
        assert "CUDA_LAUNCH_BLOCKING=1" in plan
        # Typing a YAML error is caught as you type, with its position.
        screen.editor.move_cursor((0, 0))
        await pilot.press(*"x: [")
        await wait_for(pilot, lambda: bool(screen.issues) and "YAML" in screen.issues[0].message)
        assert screen.issues[0].line >= 1


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_save_writes_the_buffer_and_an_outside_change_reloads(tmp_path: Path) -> None:
    path = tmp_path / "probe.yaml"
    path.write_text(GOOD)
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot, path)
        screen.editor.move_cursor((0, 0))
        await pilot.press("e")  # the editor opens viewing: e starts editing
        await pilot.press(*"# edited", "enter")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not screen.has_unsaved, what="the save")  # written by a worker
        assert path.read_text().startswith("# edited\n")
        assert "modified" not in str(screen.query_one("#recipe-file").render())
        # Another editor changes the file: with no local edits, the buffer follows it.
        changed = path.read_text().replace("trials: 2", "trials: 3")
        path.write_text(changed)
        await wait_for(pilot, lambda: screen.editor.text == changed, what="the reload")
        await wait_for(pilot, lambda: "6 trials" in screen.plan_text, what="the new plan")
        # With local edits, the buffer is kept and the user is told.
        screen.editor.move_cursor((0, 0))
        await pilot.press(*"# mine", "enter")
        path.write_text(GOOD)
        await wait_for(pilot, lambda: any("changed on disk" in str(n.message) for n in app._notifications))
        assert screen.editor.text.startswith("# mine\n")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_launch_opens_the_matrix_of_the_new_detached_run(tmp_path: Path) -> None:
    path = tmp_path / "probe.yaml"
    path.write_text(GOOD)
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "aorta-out", machine_facts=FIXED_FACTS)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot, path)
        screen.query_one("#probe-command", Input).value = "bash -c 'echo hi; exit 0'"
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: isinstance(app.screen, MatrixScreen), timeout=30, what="the matrix")
        matrix = app.screen
        await wait_for(pilot, lambda: matrix.state is not None and matrix.state.status == "completed",
                       timeout=60, what="the launched run")
        assert matrix.state.count("pass") == 4
        assert matrix.run_dir.parent.parent == tmp_path / "aorta-out"
