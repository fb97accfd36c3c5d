"""Under sudo: the invoking user's terminal settings, and files owned by SUDO_UID/SUDO_GID."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tui_support import PROBE_RECIPE, app_in, async_test, wait_for

from aorta_tui.cli.tui_launch import keep_invoking_terminal
from aorta_tui.tui.sudo import give_to_invoking_user

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def test_sudo_keeps_the_users_term_and_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUDO_UID", "1000")
    for name in ("TERM", "LANG", "LC_ALL", "LC_CTYPE", "COLORTERM"):
        monkeypatch.delenv(name, raising=False)
    keep_invoking_terminal({"TERM": "tmux-256color", "LANG": "de_DE.UTF-8", "COLORTERM": "truecolor"})
    assert os.environ["TERM"] == "tmux-256color"
    assert os.environ["LANG"] == "de_DE.UTF-8"
    assert os.environ["COLORTERM"] == "truecolor"


def test_sudo_with_nothing_to_recover_still_gets_a_utf8_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUDO_UID", "1000")
    for name in ("TERM", "LANG", "LC_ALL", "LC_CTYPE"):
        monkeypatch.delenv(name, raising=False)
    keep_invoking_terminal({})
    assert os.environ["LANG"] == "C.UTF-8" and os.environ["TERM"] == "xterm-256color"


def test_without_sudo_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUDO_UID", raising=False)
    monkeypatch.setenv("TERM", "vt100")
    keep_invoking_terminal({"TERM": "xterm"})
    assert os.environ["TERM"] == "vt100"


@root_only
def test_files_go_to_the_invoking_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUDO_UID", "4321")
    monkeypatch.setenv("SUDO_GID", "4322")
    (tmp_path / "run" / "trials").mkdir(parents=True)
    (tmp_path / "run" / "trials" / "result.json").write_text("{}")
    give_to_invoking_user(tmp_path / "run", recursive=True)
    for path in (tmp_path / "run", tmp_path / "run" / "trials", tmp_path / "run" / "trials" / "result.json"):
        assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4322)


@root_only
@async_test
async def test_a_recipe_saved_under_sudo_belongs_to_the_user(tmp_path: Path) -> None:
    os.environ["SUDO_UID"], os.environ["SUDO_GID"] = "4321", "4322"
    try:
        path = tmp_path / "probe.yaml"
        path.write_text(PROBE_RECIPE.format(trials=2))
        app = app_in(tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            app.open_recipe(path)
            await pilot.pause()
            screen = app.screen
            await wait_for(pilot, lambda: screen.checks_done > 0)
            screen.editor.move_cursor((0, 0))
            await pilot.press("e", *"# mine", "enter", "ctrl+s")  # e: the editor opens viewing
            await wait_for(pilot, lambda: path.read_text().startswith("# mine"))
        assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4322)
    finally:
        del os.environ["SUDO_UID"], os.environ["SUDO_GID"]
