"""The trace monitor's log of its tracer (``aorta-tui-trace-PID-XXXX.log`` in the temporary
directory, made by mkstemp): removed when the TUI exits after traces that went well, kept (and
said so) after a failure whose message names it. It was never removed: one file in /tmp for every
TUI that traced; and its name was fixed, so a link planted there was written through."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from textual.widgets import Input
from tui_support import FIXTURES, app_in, async_test, replay_in_monitor, wait_for

from aorta_tui.tui.screens.trace_monitor import TraceMonitorScreen


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary directory, private to the test: what is left there is what the TUI left."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


@async_test
async def test_the_log_of_a_trace_that_went_well_goes_when_the_tui_exits(tmp_path: Path, temp: Path) -> None:
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await replay_in_monitor(app, pilot, FIXTURES / "launch_to_start_snapshots.jsonl")
        log = screen.stderr_path
        assert log is not None and log.parent == temp and log.exists()  # while the TUI runs: there
        assert "error" not in screen.status
    assert list(temp.iterdir()) == []


@async_test
async def test_the_log_of_a_tracer_that_failed_is_kept_and_the_message_says_where(
        tmp_path: Path, temp: Path) -> None:
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("4")
        screen = app.screen
        assert isinstance(screen, TraceMonitorScreen)
        screen.query_one("#trace-target", Input).value = f"replay {tmp_path / 'no-such-recording.jsonl'}"
        await pilot.press("escape", "s")
        log = screen.stderr_path
        assert log is not None
        await wait_for(pilot, lambda: any(f"its log is {log} (kept" in n.message for n in app._notifications),
                       timeout=30, what="the failure, naming the log")
    assert log.exists() and list(temp.iterdir()) == [log]


@async_test
async def test_a_link_planted_at_the_old_fixed_name_is_never_written_through(
        tmp_path: Path, temp: Path) -> None:
    # Another user could guess aorta-tui-trace-PID.log in /tmp and put a link there: a TUI run
    # by sudo truncated and wrote the link's target. The log is now a new file of its own.
    import os

    target = tmp_path / "victim"
    target.write_bytes(b"keep me")
    (temp / f"aorta-tui-trace-{os.getpid()}.log").symlink_to(target)
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await replay_in_monitor(app, pilot, FIXTURES / "launch_to_start_snapshots.jsonl")
        log = screen.stderr_path
        assert log is not None and not log.is_symlink() and (log.stat().st_mode & 0o777) == 0o600
    assert target.read_bytes() == b"keep me"


@async_test
async def test_a_second_trace_gets_a_new_log_and_the_first_one_goes(tmp_path: Path, temp: Path) -> None:
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await replay_in_monitor(app, pilot, FIXTURES / "launch_to_start_snapshots.jsonl")
        first = screen.stderr_path
        screen = await replay_in_monitor(app, pilot, FIXTURES / "launch_to_start_snapshots.jsonl")
        second = screen.stderr_path
        assert first is not None and second is not None and first != second
        assert not first.exists() and second.exists()
    assert list(temp.iterdir()) == []
