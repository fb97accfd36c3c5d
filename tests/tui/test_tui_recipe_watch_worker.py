"""The recipe editor's file watch is a Textual thread worker that posts typed messages: an
outside change arrives as a RecipeFileChanged, a stopped watch ends its worker, and what a
stopped watch sends late is dropped."""

from __future__ import annotations

import threading
from pathlib import Path

from textual.message import Message
from textual.worker import WorkerState
from tui_support import PROBE_RECIPE, app_in, async_test, wait_for
from tui_support import open_in_editor as _open

from aorta_tui.tui.screens.recipe_editor import RecipeEditorScreen, RecipeFileChanged

GOOD = PROBE_RECIPE.format(trials=2)


def _watchers(screen: RecipeEditorScreen) -> list:
    return [w for w in screen.app.workers if w.group == "recipe-watch" and w.node is screen]


@async_test
async def test_an_outside_change_is_a_posted_message_and_a_new_file_stops_the_old_watch(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(GOOD)
    second.write_text(GOOD.replace("trials: 2", "trials: 4"))
    seen: list[Message] = []
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30), message_hook=seen.append) as pilot:
        screen = await _open(app, pilot, first)
        await wait_for(pilot, lambda: any(w.state == WorkerState.RUNNING for w in _watchers(screen)),
                       what="the watch worker")
        changed = GOOD.replace("trials: 2", "trials: 3")
        first.write_text(changed)
        await wait_for(pilot, lambda: screen.editor.text == changed, what="the reload")
        assert any(isinstance(m, RecipeFileChanged) for m in seen)

        old = [w for w in _watchers(screen) if w.state == WorkerState.RUNNING]
        await _open(app, pilot, second)
        await wait_for(pilot, lambda: all(w.state == WorkerState.SUCCESS for w in old),
                       what="the old watch's worker to end")
        assert sum(w.state == WorkerState.RUNNING for w in _watchers(screen)) == 1


@async_test
async def test_a_stopped_watch_sending_late_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(GOOD)
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot, path)
        screen._stop_watch()  # the file changes while nothing watches it
        path.write_text(GOOD.replace("trials: 2", "trials: 3"))
        screen.post_message(RecipeFileChanged(threading.Event()))  # a stale watch's news
        await pilot.pause(0.3)
        assert screen.editor.text == GOOD
        assert not any("changed on disk" in str(n.message) for n in app._notifications)
