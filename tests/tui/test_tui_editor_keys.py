"""The recipe editor as a user drives it (issue 16 items 3 and 4): screen keys never become
text and text keys never switch screens, unsaved changes are never dropped unasked, recipes
open from Home (recursively listed), from ctrl+o, and from `aorta-tui edit FILE`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable
from tui_support import FIXED_FACTS, REPO, async_test, wait_for

from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.recipe_files import find_recipes
from aorta_tui.tui.screens.dialogs import ConfirmScreen
from aorta_tui.tui.screens.help import HelpScreen
from aorta_tui.tui.screens.home import HomeScreen
from aorta_tui.tui.screens.matrix import MatrixScreen
from aorta_tui.tui.screens.pickers import PathPicker
from aorta_tui.tui.screens.recipe_editor import RecipeEditorScreen

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

ENTRY = Path(sys.executable).with_name("aorta-tui")
EXAMPLE = "recipes/examples/probe-bash.yaml"


def _cwd(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    return tmp_path


def _app(cwd: Path, **kwargs) -> AortaApp:  # noqa: ANN003
    return AortaApp(cwd=cwd, output_dir=cwd / "aorta-out", machine_facts=FIXED_FACTS, **kwargs)


async def _open_from_home(app: AortaApp, pilot, name: str) -> RecipeEditorScreen:  # noqa: ANN001
    home = app.screen
    assert isinstance(home, HomeScreen)
    await wait_for(pilot, lambda: bool(getattr(home, "_recipe_paths", None)), what="Home's recipes")
    shown = [home.display_path(p) for p in home._recipe_paths]
    table = home.query_one("#recipes", DataTable)
    table.focus()
    table.move_cursor(row=shown.index(name))
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, RecipeEditorScreen), what="the editor")
    editor = app.screen
    await wait_for(pilot, lambda: editor.path is not None and editor.checks_done > 0, what="the recipe")
    return editor


@async_test
async def test_screen_keys_after_opening_from_home_switch_screens_and_type_nothing(tmp_path: Path) -> None:
    cwd = _cwd(tmp_path)
    app = _app(cwd)
    async with app.run_test(size=(120, 40)) as pilot:
        editor = await _open_from_home(app, pilot, EXAMPLE)  # recipes/examples/: listed recursively
        text = (cwd / EXAMPLE).read_text()
        assert editor.editor.text == text and not editor.editing
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "3")
        assert isinstance(app.screen, MatrixScreen)
        await pilot.press("2")
        assert app.screen is editor and editor.editor.text == text, "a screen key became text"


@async_test
async def test_digits_typed_while_editing_stay_text_and_switch_nothing(tmp_path: Path) -> None:
    cwd = _cwd(tmp_path)
    app = _app(cwd)
    async with app.run_test(size=(120, 40)) as pilot:
        editor = await _open_from_home(app, pilot, "recipes/quickstart.yaml")
        lines = editor.editor.text.splitlines()
        row = lines.index("trials: 2")
        editor.editor.move_cursor((row, len("trials: 2")))
        await pilot.press("e")  # start editing
        assert editor.editing
        await pilot.press("1", "2", "3", "4", "5", "6", "question_mark")
        assert app.screen is editor, "a digit typed into the recipe switched screens"
        assert editor.editor.text.splitlines()[row] == "trials: 2123456?"
        for _ in range(7):
            await pilot.press("backspace")
        await pilot.press("1")
        assert editor.editor.text.splitlines()[row] == "trials: 21"
        # escape stops editing; the next digit is a screen key again, and it asks first.
        await pilot.press("escape")
        assert not editor.editing
        await pilot.press("3")
        assert isinstance(app.screen, ConfirmScreen), "left the editor with unsaved changes unasked"
        await pilot.press("n")  # keep editing
        assert app.screen is editor and editor.editor.text.splitlines()[row] == "trials: 21"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not editor.has_unsaved, what="the save")  # written by a worker
        assert "trials: 21\n" in (cwd / "recipes/quickstart.yaml").read_text()
        await pilot.press("3")  # saved: no question
        assert isinstance(app.screen, MatrixScreen)


@async_test
async def test_leaving_with_unsaved_changes_and_saying_yes_discards_them(tmp_path: Path) -> None:
    cwd = _cwd(tmp_path)
    app = _app(cwd)
    async with app.run_test(size=(100, 30)) as pilot:
        editor = await _open_from_home(app, pilot, "recipes/quickstart.yaml")
        disk = (cwd / "recipes/quickstart.yaml").read_text()
        editor.editor.move_cursor((0, 0))
        await pilot.press("enter", *"# mine", "escape")  # enter starts editing too
        assert editor.editor.text.startswith("# mine") and editor.has_unsaved
        await pilot.press("1")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        assert isinstance(app.screen, HomeScreen)
        assert editor.editor.text == disk and not editor.has_unsaved
        assert (cwd / "recipes/quickstart.yaml").read_text() == disk


@async_test
async def test_ctrl_q_with_unsaved_changes_asks_before_quitting(tmp_path: Path) -> None:
    cwd = _cwd(tmp_path)
    app = _app(cwd)
    async with app.run_test(size=(100, 30)) as pilot:
        editor = await _open_from_home(app, pilot, "recipes/quickstart.yaml")
        await pilot.press("e", "x", "ctrl+q")
        assert isinstance(app.screen, ConfirmScreen) and app.is_running
        await pilot.press("n")
        assert app.screen is editor and app.is_running and editor.editor.text.startswith("x")
        await pilot.press("escape", "1", "n", "ctrl+q")  # from another screen too: Home never shows
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause(0.2)
    assert app.return_code == 0
    assert not (cwd / "recipes/quickstart.yaml").read_text().startswith("x")


@async_test
async def test_ctrl_o_opens_a_typed_recipe_and_a_new_name_is_created_on_save(tmp_path: Path) -> None:
    cwd = _cwd(tmp_path)
    app = _app(cwd)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2", "ctrl+o")
        picker = app.screen
        assert isinstance(picker, PathPicker)
        await pilot.press(*"recipes/examples/triage-gpu", "enter")  # narrowed to one entry
        editor = app.screen
        assert isinstance(editor, RecipeEditorScreen)
        assert editor.path == cwd / "recipes/examples/triage-gpu-smoke.yaml"
        assert editor.editor.text == editor.path.read_text()
        await pilot.press("ctrl+o", *"recipes", "enter")  # a directory: refused in the dialog
        picker = app.screen
        assert isinstance(picker, PathPicker)
        await wait_for(pilot, lambda: "directory" in picker.message, what="the refusal")  # checked by a worker
        await pilot.press(*"mine.yaml", "enter")
        await wait_for(pilot, lambda: app.screen is editor and editor.path == cwd / "mine.yaml",
                       what="the new file")
        assert editor.new_file
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not editor.new_file, what="the save")
        assert (cwd / "mine.yaml").read_text() == editor.editor.text


@async_test
async def test_the_app_started_by_edit_opens_the_file_viewing(tmp_path: Path) -> None:
    cwd = _cwd(tmp_path)
    app = _app(cwd, start_recipe=cwd / "new.yaml")
    async with app.run_test(size=(80, 24)) as pilot:
        editor = app.screen
        assert isinstance(editor, RecipeEditorScreen)
        await wait_for(pilot, lambda: editor.path == cwd / "new.yaml", what="the new file")
        assert "ctrl+s creates it" in str(editor.query_one("#recipe-file").render())
        await pilot.press("1")  # viewing: a screen key; nothing typed, nothing to lose
        assert isinstance(app.screen, HomeScreen)
        assert not (cwd / "new.yaml").exists()


def test_find_recipes_is_recursive_under_recipes_and_bounded(tmp_path: Path) -> None:
    recipe = "schema_version: 1\nworkload: gpu_smoke\n"
    (tmp_path / "top.yaml").write_text(recipe)
    (tmp_path / "notes.yaml").write_text("just: yaml\n")
    deep = tmp_path / "recipes" / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (tmp_path / "recipes" / "a" / "b" / "c" / "ok.yaml").write_text(recipe)
    (deep / "too-deep.yaml").write_text(recipe)
    (tmp_path / "recipes" / ".git").mkdir()
    (tmp_path / "recipes" / ".git" / "hidden.yaml").write_text(recipe)
    (tmp_path / "recipes" / "loop").symlink_to(tmp_path / "recipes")  # never entered
    os.mkfifo(tmp_path / "recipes" / "fifo.yaml")  # never opened
    found = [p.relative_to(tmp_path).as_posix() for p in find_recipes(tmp_path)]
    assert found == ["top.yaml", "recipes/a/b/c/ok.yaml"]
    many = tmp_path / "recipes" / "many"
    many.mkdir()
    for i in range(300):
        (many / f"r{i:03d}.yaml").write_text(recipe)
    assert len(find_recipes(tmp_path)) == 200
    assert len(find_recipes(tmp_path, max_entries=50)) < 50


@pytest.mark.parametrize("setup, expected", [
    (lambda d: None, "its directory nope does not exist"),
    (lambda d: (d / "nope").mkdir() or (d / "nope" / "x.yaml").mkdir(), "is a directory"),
    (lambda d: (d / "nope").mkdir() or os.mkfifo(d / "nope" / "x.yaml"), "FIFO"),
    (lambda d: (d / "nope").mkdir() or (d / "nope" / "x.yaml").write_bytes(b"\xff\xfe"), "nope/x.yaml:1:1"),
])
def test_edit_refuses_a_bad_file_with_exit_2_before_the_terminal_check(tmp_path: Path, setup, expected) -> None:  # noqa: ANN001
    setup(tmp_path)
    out = subprocess.run([str(ENTRY), "edit", "nope/x.yaml"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=30, stdin=subprocess.DEVNULL)
    assert out.returncode == 2, out.stderr
    assert expected in out.stderr and "Traceback" not in out.stderr


def test_edit_without_a_terminal_says_what_the_tui_says(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text("schema_version: 1\n")
    edit = subprocess.run([str(ENTRY), "edit", "r.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    tui = subprocess.run([str(ENTRY)], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                         stdin=subprocess.DEVNULL)
    assert edit.returncode == tui.returncode == 2
    assert edit.stderr == tui.stderr and "needs a terminal" in edit.stderr
