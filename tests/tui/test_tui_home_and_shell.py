"""Home screen on a real output directory; navigation, help, palette, themes, narrow layout."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from textual.widgets import DataTable
from tui_support import FIXED_FACTS, app_in, async_test, run_probe_sweep, wait_for

from aorta_tui.tui.app import DARK, LIGHT, SCREEN_NAMES, AortaApp
from aorta_tui.tui.screens.help import HelpScreen
from aorta_tui.tui.screens.home import HomeScreen
from aorta_tui.tui.screens.matrix import MatrixScreen


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_home_lists_real_runs_and_recipes_and_opens_a_run(tmp_path: Path) -> None:
    run_dir = run_probe_sweep(tmp_path)
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "aorta-out", machine_facts=FIXED_FACTS)
    async with app.run_test(size=(80, 24)) as pilot:
        home = app.screen
        assert isinstance(home, HomeScreen)
        runs = home.query_one("#runs", DataTable)
        await wait_for(pilot, lambda: runs.row_count == 1, what="the run list")
        row = [str(c) for c in runs.get_row_at(0)]
        assert row[0] == "finished"
        assert row[1] == f"TUI-TEST/{run_dir.name}"
        assert row[2] == "4/4"
        recipes = home.query_one("#recipes", DataTable)
        assert [str(c) for c in recipes.get_row_at(0)] == ["probe.yaml"]
        assert "NVIDIA H200" in str(home.query_one("#machine").render())
        runs.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MatrixScreen), what="the matrix screen")
        matrix = app.screen
        await wait_for(pilot, lambda: matrix.state is not None and matrix.state.status == "completed")
        assert matrix.run_dir == run_dir


@async_test
async def test_home_facts_are_gathered_from_this_machine(tmp_path: Path) -> None:
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "none-yet")
    async with app.run_test(size=(80, 24)) as pilot:
        machine = app.screen.query_one("#machine")
        await wait_for(pilot, lambda: "bpftrace" in str(machine.render()) and "gathering" not in str(machine.render()))
        text = str(machine.render())
        assert "privileges" in text and "GPUs" in text
        assert "none yet" in str(app.screen.query_one("#runs-title").render())


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_number_keys_reach_every_screen_and_escape_leaves_text_fields(tmp_path: Path) -> None:
    app = app_in(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        for index, name in enumerate(SCREEN_NAMES, start=1):
            await pilot.press("escape", str(index))
            await pilot.pause(0.05)
            assert app.screen is app.get_screen(name), f"key {index} did not open {name}"
        # In the env diff's path field, a digit is text, not navigation; escape makes it navigation.
        await pilot.press("5")
        app.screen.query_one("#snap-a").focus()
        await pilot.press("3")
        assert app.screen is app.get_screen("envdiff")
        assert app.screen.query_one("#snap-a").value == "3"
        await pilot.press("escape", "3")
        assert app.screen is app.get_screen("matrix")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_help_lists_the_screen_keys_and_palette_has_every_action(tmp_path: Path) -> None:
    app = app_in(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        for key_text in ("Numerics", "Volatile", "Provenance", "Env diff", "Quit"):
            assert key_text in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for name in ("Home", "Recipe editor", "Matrix", "Trace monitor", "Env diff", "Policy"):
            assert any(t.startswith("Go to") and name in t for t in titles), name
        for action in ("Diff", "Pick", "Volatile", "Provenance"):
            assert f"Env diff: {action}" in titles
        # Palette entries run the action: go to the policy screen through one.
        entry = next(c for c in app.get_system_commands(app.screen) if c.title.startswith("Go to Policy"))
        entry.callback()
        await pilot.pause(0.05)
        assert app.screen is app.get_screen("policy")


@async_test
async def test_theme_toggle(tmp_path: Path) -> None:
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "out", machine_facts=FIXED_FACTS, light=True)
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.theme == LIGHT
        await pilot.press("ctrl+t")
        assert app.theme == DARK


def _colours(svg: str) -> set[str]:
    return {c.lower() for c in re.findall(r"fill: (#[0-9a-fA-F]{6})", svg)}


def _is_grey(colour: str) -> bool:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return max(r, g, b) - min(r, g, b) <= 8


def _screenshot(tmp_path: Path) -> str:
    async def run() -> str:
        app = app_in(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.1)
            return app.export_screenshot()

    return asyncio.run(run())


def test_no_color_renders_in_greys_only(tmp_path: Path, monkeypatch) -> None:
    coloured = _colours(_screenshot(tmp_path))
    assert any(not _is_grey(c) for c in coloured)  # the check below can fail
    monkeypatch.setenv("NO_COLOR", "1")
    mono = _colours(_screenshot(tmp_path))
    assert mono and all(_is_grey(c) for c in mono), sorted(c for c in mono if not _is_grey(c))


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_home_follows_a_run_from_running_to_finished(tmp_path: Path) -> None:
    import os

    from tui_support import PROBE_COMMAND, write_probe_recipe

    from aorta_tui.relay.launch import launch_detached

    os.environ["TUI_TEST_SLEEP"] = "0.4"
    try:
        run_dir = launch_detached(write_probe_recipe(tmp_path, trials=2), tmp_path / "aorta-out",
                                  command=PROBE_COMMAND)
    finally:
        del os.environ["TUI_TEST_SLEEP"]
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "aorta-out", machine_facts=FIXED_FACTS)
    async with app.run_test(size=(100, 30)) as pilot:
        runs = app.screen.query_one("#runs", DataTable)

        def state() -> str:
            return str(runs.get_row_at(0)[0]) if runs.row_count else ""

        await wait_for(pilot, lambda: state() == "running", what="the running sweep")
        await wait_for(pilot, lambda: state() == "finished", timeout=60, what="the sweep to finish")
        assert str(runs.get_row_at(0)[1]) == f"TUI-TEST/{run_dir.name}"


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_home_relist_reads_journals_only_when_one_changed(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from aorta_tui.store import run_list

    run_probe_sweep(tmp_path)
    calls: list[Path] = []
    real_list_runs = run_list.list_runs

    def counting_list_runs(output_dir: Path) -> list[run_list.RunInfo]:
        calls.append(Path(output_dir))
        return real_list_runs(output_dir)

    # home.py looks list_runs up on the run_list module at each listing
    monkeypatch.setattr(run_list, "list_runs", counting_list_runs)
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "aorta-out", machine_facts=FIXED_FACTS)
    async with app.run_test(size=(80, 24)) as pilot:
        home = app.screen
        runs = home.query_one("#runs", DataTable)
        await wait_for(pilot, lambda: runs.row_count == 1, what="the run list")
        listed = len(calls)

        await home.run_worker(home._list_runs_if_changed, thread=True).wait()
        assert len(calls) == listed  # nothing changed: no journal was parsed again

        run_probe_sweep(tmp_path)  # a second finished run appears
        await home.run_worker(home._list_runs_if_changed, thread=True).wait()
        assert len(calls) == listed + 1
        await wait_for(pilot, lambda: runs.row_count == 2, what="the new run")
