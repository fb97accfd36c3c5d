"""Issue 34 in the trace monitor: launch -> start split live into host / push / GPU queue, and
the cost figure that says what the program pays, at 80x24 and 160x48. The snapshots come from a
fake collector record stream through the real join and statistics (launch_parts_stream.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from launch_parts_stream import snapshots
from tui_support import FIXED_FACTS, async_test, wait_for

from aorta_tui.trace.cost import ADDED_NS_PER_LAUNCH
from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.trace_monitor import TraceMonitorScreen

SIZES = [(80, 24), (160, 48)]


async def _monitor(tmp_path: Path, pilot, app: AortaApp) -> TraceMonitorScreen:  # noqa: ANN001
    await pilot.press("4")
    screen = app.screen
    assert isinstance(screen, TraceMonitorScreen)
    for snap in snapshots():
        screen.offer(snap)
    await wait_for(pilot, lambda: screen.redraws >= 1, what="a redraw")
    await pilot.pause(0.2)
    return screen


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@async_test
async def test_the_three_parts_are_on_screen_beside_launch_to_start(tmp_path: Path, size) -> None:  # noqa: ANN001
    app = AortaApp(cwd=tmp_path, output_dir=tmp_path / "out", machine_facts=FIXED_FACTS)
    async with app.run_test(size=size) as pilot:
        screen = await _monitor(tmp_path, pilot, app)
        assert screen.metric == "cuda.launch_to_start"
        stats = str(screen.query_one("#queue-stats").render())
        if size == (80, 24):  # one row for the three parts, host first: no entry time here
            assert "h|p|q    n/a|" in stats and stats.split("h|p|q")[1].split("\n")[0].endswith("|540ns")
            assert "ms|" in stats  # push carries the backlog's milliseconds
            assert "of run" in stats and "% of a core" not in stats
        else:
            assert "split p50 of launch->start:" in stats
            assert "host      n/a (no entry time)" in stats  # the default mode has no entry time
            assert "GPU queue 540ns" in stats
            push_line = next(ln for ln in stats.splitlines() if ln.strip().startswith("push"))
            assert push_line.rstrip().endswith("ms")  # the backlog's wait: push carries it
            per_launch_us = ADDED_NS_PER_LAUNCH["activity"][0] / 1000  # the H200's figure (trace/cost.py)
            assert f"of run ({per_launch_us:.2f}µs×301)" in stats and "% of a core" not in stats
        # the region holding the stats shows the cost line: nothing cut off at this size
        assert screen.query_one("#queue-stats").region.height >= len(stats.splitlines())
        await pilot.press("m")  # the parts stay beside a part too
        while screen.metric != "cuda.launch_push":
            await pilot.press("m")
        assert "540ns" in str(screen.query_one("#queue-stats").render())
        while screen.metric != "cuda.queued":
            await pilot.press("m")
        assert "540ns" not in str(screen.query_one("#queue-stats").render())


def test_snapshots_add_up() -> None:
    """The fake stream's parts add up to launch -> start in the statistics the screen shows."""
    by = {s.probe_set: s for s in snapshots()}
    assert by["cuda.launch_push"].count == by["cuda.launch_gpu_queue"].count == by["cuda.launch_to_start"].count
    assert by["cuda.launch_host"].count == 0
    assert by["cuda.launch_gpu_queue"].percentiles["p50"] == pytest.approx(0.54, rel=0.02)
