"""The env-diff picker as a user drives it (issue 16 item 2): keys typed go to the path field,
A == B is refused, every JSON file is listed and a non-snapshot is refused with the loader's
own message when picked, never when listed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Input, OptionList
from tui_support import FIXED_FACTS, FIXTURES, async_test, wait_for

from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.env_diff import EnvDiffScreen, find_snapshots
from aorta_tui.tui.screens.pickers import PathPicker

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def _workdir(tmp_path: Path) -> Path:
    shutil.copy(FIXTURES / "env" / "cpu-box-plain.json", tmp_path / "a.json")
    shutil.copy(FIXTURES / "env" / "cpu-box-knobs.json", tmp_path / "b.json")
    shutil.copy(FIXTURES / "env" / "cpu-box-knobs.json", tmp_path / "h200.json")  # `env probe -o h200.json`
    (tmp_path / "notes.json").write_text('{"hello": 1}\n')  # JSON, not a snapshot
    (tmp_path / "broken.json").write_text('{"cut": \n')  # not even JSON
    return tmp_path


def _app(cwd: Path) -> AortaApp:
    return AortaApp(cwd=cwd, output_dir=cwd / "aorta-out", machine_facts=FIXED_FACTS)


async def _open_picker(app: AortaApp, pilot) -> PathPicker:  # noqa: ANN001
    await pilot.press("5")
    await wait_for(pilot, lambda: isinstance(app.screen, EnvDiffScreen), what="the env diff")
    await pilot.press("o")
    await wait_for(pilot, lambda: isinstance(app.screen, PathPicker), what="the picker")
    return app.screen


def _listed(picker: PathPicker) -> list[str]:
    options = picker.query_one("#picker-list", OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


@async_test
async def test_typing_a_then_b_diffs_a_with_b(tmp_path: Path) -> None:
    cwd = _workdir(tmp_path)
    app = _app(cwd)
    async with app.run_test(size=(100, 30)) as pilot:
        picker = await _open_picker(app, pilot)
        await pilot.press(*"a.json", "enter")
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        assert isinstance(app.screen, PathPicker), "one path picked of two: the picker stays"
        assert picker.query_one("#picker-path", Input).value == ""
        await pilot.press(*"b.json", "enter")
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        screen = app.screen
        assert isinstance(screen, EnvDiffScreen)
        assert screen.query_one("#snap-a", Input).value == "a.json"
        assert screen.query_one("#snap-b", Input).value == "b.json"
        await wait_for(pilot, lambda: bool(screen._rows), what="the differences of a and b")
        assert "no differences" not in str(screen.query_one("#diff-summary").render())


@async_test
async def test_the_same_file_twice_is_refused_in_the_picker_and_on_the_screen(tmp_path: Path) -> None:
    cwd = _workdir(tmp_path)
    app = _app(cwd)
    async with app.run_test(size=(100, 30)) as pilot:
        picker = await _open_picker(app, pilot)
        await pilot.press(*"a.json", "enter")
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        await pilot.press(*"./a.json", "enter")  # the same file, spelt otherwise
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        assert app.screen is picker, "A == B was accepted"
        assert "already picked" in picker.message
        # Enter on an empty field takes the highlighted entry: the same file again is refused too.
        await pilot.press(*"a.js")  # a refused path stays selected: typing replaces it
        await pilot.press("enter")
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        assert app.screen is picker and "already picked" in picker.message
        await pilot.press("escape")
        screen = app.screen
        assert isinstance(screen, EnvDiffScreen)
        # Typed into the screen's own fields: refused with a warning, nothing diffed.
        screen.query_one("#snap-a", Input).value = "a.json"
        screen.query_one("#snap-b", Input).value = "./a.json"
        await pilot.press("escape", "d")
        await wait_for(pilot, lambda: "same file" in str(screen.query_one("#diff-summary").render()),
                       what="the refusal")  # checked by the diff worker
        assert screen._rows == []


@async_test
async def test_every_json_is_listed_and_a_non_snapshot_is_refused_with_the_loaders_message(tmp_path: Path) -> None:
    cwd = _workdir(tmp_path)
    app = _app(cwd)
    async with app.run_test(size=(120, 40)) as pilot:
        picker = await _open_picker(app, pilot)
        listed = _listed(picker)
        for name in ("a.json", "b.json", "h200.json", "notes.json", "broken.json"):
            assert name in listed, f"{name} not listed: {listed}"
        # Typing narrows the list; enter on a partial name takes the entry it narrowed to.
        await pilot.press(*"h200")
        assert _listed(picker) == ["h200.json"]
        await pilot.press("backspace", "backspace", "backspace", "backspace")
        await pilot.press(*"notes.json", "enter")
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        assert app.screen is picker and app.is_running
        assert "notes.json" in picker.message  # located: the loader names the file
        await pilot.press(*"broken.json", "enter")
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        assert app.screen is picker and "broken.json:2:1" in picker.message  # file:line:column
        await pilot.press(*"nope.json", "enter")
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        assert "no such file" in picker.message
        await pilot.press(*"h200.json", "enter")
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        await pilot.press(*"a.json", "enter")
        await wait_for(pilot, lambda: not picker.checking, what="the check's answer")
        screen = app.screen
        assert isinstance(screen, EnvDiffScreen)
        assert (screen.query_one("#snap-a", Input).value, screen.query_one("#snap-b", Input).value) == \
            ("h200.json", "a.json")


def test_find_snapshots_lists_json_here_one_level_down_and_in_runs_without_opening_them(tmp_path: Path) -> None:
    (tmp_path / "h200.json").write_text("not json at all")
    (tmp_path / "snaps").mkdir()
    (tmp_path / "snaps" / "box.json").write_text("{}")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.json").write_text("{}")
    env = tmp_path / "aorta-out" / "T" / "20260101-000000-abcd" / "env"
    env.mkdir(parents=True)
    (env / "host_env.json").write_text("{}")
    found = [p.relative_to(tmp_path).as_posix() for p in find_snapshots(tmp_path, Path("aorta-out"))]
    assert found == ["h200.json", "snaps/box.json", "aorta-out/T/20260101-000000-abcd/env/host_env.json"]
