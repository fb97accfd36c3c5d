"""The trace monitor's log of its tracer (``aorta-tui-trace-PID.log`` in the temporary directory):
removed when the TUI exits after traces that went well, kept (and said so) after a failure whose
message names it. It was never removed: one file in /tmp for every TUI that traced."""

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
