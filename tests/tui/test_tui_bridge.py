"""The bridge (tui/bridge.py) seen through Textual's message hook: a real EngineRun's snapshots
reach the trace monitor as EngineSnapshots messages, superseded ones are dropped on the way
(can_replace), and the screen still shows the newest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.message import Message
from tui_support import FIXTURES, app_in, async_test, wait_for

from aorta_tui.core.events import RunFinished, RunStarted, event_from_dict
from aorta_tui.relay.engine_run import EngineRun
from aorta_tui.tui.bridge import EngineEnded, EngineEvent, EngineSnapshots
from aorta_tui.tui.screens.trace_monitor import TraceMonitorScreen

SNAPSHOTS = 3000


def _stream(path: Path) -> Path:
    """RunStarted, SNAPSHOTS snapshots (counts 1..N), one garbage line, RunFinished."""
    base = json.loads((FIXTURES / "trace" / "ioctl-snapshot.json").read_text())
    lines = [json.dumps(RunStarted("t", source="trace", run_dir="", total=0).to_dict())]
    for count in range(1, SNAPSHOTS + 1):
        lines.append(json.dumps({**base, "count": count}))
    lines.append("not an event")
    lines.append(json.dumps(RunFinished("t", status="completed", exit_code=0).to_dict()))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_superseded_snapshots_are_dropped_and_the_newest_is_shown(tmp_path: Path) -> None:
    messages: list[Message] = []
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30), message_hook=messages.append) as pilot:
        await pilot.press("4")
        screen = app.screen
        assert isinstance(screen, TraceMonitorScreen)
        run = EngineRun([], argv=["cat", str(_stream(tmp_path / "stream.jsonl"))],
                        stderr_path=tmp_path / "engine.log").start()
        screen.engine_run = run
        screen.follow_engine(run)
        await app.workers.wait_for_complete()
        await wait_for(pilot, lambda: any(isinstance(m, EngineEnded) for m in messages), what="the end")
        await wait_for(pilot, lambda: f"{SNAPSHOTS:,}" in str(screen.query_one("#queue-stats").render()),
                       what="the last redraw")
        shown = str(screen.query_one("#queue-stats").render())
    snaps = _handled(messages, EngineSnapshots)
    # every snapshot was read; the handled ones are the newest of their moment, in order
    assert snaps and len(snaps) < SNAPSHOTS and snaps[-1].arrived == SNAPSHOTS
    assert [m.arrived for m in snaps] == sorted({m.arrived for m in snaps})
    (newest,) = snaps[-1].latest.values()
    assert newest.count == SNAPSHOTS
    assert screen._latest[newest.probe_set].count == SNAPSHOTS
    assert f"{SNAPSHOTS:,}" in shown
    # the other events are never coalesced: each one is handled, in order
    others = [m.event.kind for m in _handled(messages, EngineEvent)]
    assert others == ["run_started", "run_finished"]
    (ended,) = _handled(messages, EngineEnded)
    assert ended.exit_code == 0 and not ended.error and run.malformed == 1


@async_test
async def test_a_command_that_never_starts_a_run_is_an_error_on_screen(tmp_path: Path) -> None:
    messages: list[Message] = []
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30), message_hook=messages.append) as pilot:
        await pilot.press("4")
        screen = app.screen
        assert isinstance(screen, TraceMonitorScreen)
        # a real engine command refused before it starts: a bad --lib
        run = EngineRun(["trace", "queue", "--json", "--lib", "nonsense", "--", "true"],
                        stderr_path=tmp_path / "engine.log").start()
        screen.engine_run = run
        screen.follow_engine(run)
        await app.workers.wait_for_complete()
        await wait_for(pilot, lambda: "error" in screen.status, what="the error line")
    (ended,) = _handled(messages, EngineEnded)
    assert ended.exit_code == 2 and "before it started a run" in ended.error
    text, _style = screen.status["error"]
    assert text.startswith("The tracer failed: aorta-tui trace queue exited with status 2")
    assert "--lib 'nonsense' is not NAME=PATH" in text


@async_test
async def test_a_burst_of_snapshot_messages_is_handled_once(tmp_path: Path) -> None:
    # Posted in one go (as a worker does while the screen is busy): the queue keeps the newest.
    snap = event_from_dict(json.loads((FIXTURES / "trace" / "ioctl-snapshot.json").read_text()))
    messages: list[Message] = []
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30), message_hook=messages.append) as pilot:
        await pilot.press("4")
        screen = app.screen
        assert isinstance(screen, TraceMonitorScreen)
        run = screen.engine_run = EngineRun([], argv=["true"])
        other = EngineRun([], argv=["true"])
        for n in range(1, 201):
            screen.post_message(EngineSnapshots(run, {"ioctl.ioctl": _count(snap, n)}, n))
        screen.post_message(EngineSnapshots(other, {"ioctl.ioctl": _count(snap, 999)}, 1))  # not ours
        await wait_for(pilot, lambda: "events   200\n" in str(screen.query_one("#queue-stats").render()),
                       what="the newest snapshot drawn")
        await pilot.pause(0.3)  # time for a wrongly handled 999 to be drawn, were it not dropped
        shown = str(screen.query_one("#queue-stats").render())
    handled = _handled(messages, EngineSnapshots)
    assert [m.arrived for m in handled if m.run is run] == [200]  # 199 superseded, never handled
    assert [m.run for m in handled][-1] is other  # another run's message supersedes none of ours
    assert screen._latest["ioctl.ioctl"].count == 200  # and the other run's is dropped by the screen
    assert "events   200\n" in shown


def _handled(messages: list[Message], kind: type[Message]) -> list:  # noqa: ANN401
    """Each message of ``kind`` once (the hook sees a message at every step of its dispatch)."""
    return list({id(m): m for m in messages if isinstance(m, kind)}.values())


def _count(snap, n: int):  # noqa: ANN001, ANN202
    return event_from_dict({**snap.to_dict(), "count": n})


def test_snapshot_messages_supersede_only_their_own_run() -> None:
    snap = event_from_dict(json.loads((FIXTURES / "trace" / "ioctl-snapshot.json").read_text()))
    one, two = EngineRun([], argv=["true"]), EngineRun([], argv=["true"])
    older = EngineSnapshots(one, {"a": snap}, 1)  # type: ignore[dict-item]
    assert older.can_replace(EngineSnapshots(one, {"a": snap}, 2))  # type: ignore[dict-item]
    assert not older.can_replace(EngineSnapshots(two, {"a": snap}, 2))  # type: ignore[dict-item]
    assert not older.can_replace(EngineEvent(one, snap))
