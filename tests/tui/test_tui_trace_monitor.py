"""Trace monitor: a real bpftrace trace through the trace engine, coalesced redraws, clean stop."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Select
from tui_support import (
    FIXTURES,
    HERE,
    app_in,
    async_test,
    bpftrace_descendants,
    wait_for,
)

from aorta_tui.core.events import HistogramSnapshot, event_from_dict
from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.trace_monitor import TraceMonitorScreen, parse_target
from aorta_tui.tui.widgets.histogram import render_histogram

needs_bpftrace = pytest.mark.skipif(
    shutil.which("bpftrace") is None or os.geteuid() != 0,
    reason="needs bpftrace and root (the CI script installs bpftrace and runs as root)",
)
LOAD = HERE / "tui_ioctl_load.py"


def _recorded_snapshot() -> HistogramSnapshot:
    event = event_from_dict(json.loads((FIXTURES / "trace" / "ioctl-snapshot.json").read_text()))
    assert isinstance(event, HistogramSnapshot)
    return event


async def _queue_screen(app: AortaApp, pilot) -> TraceMonitorScreen:  # noqa: ANN001
    await pilot.press("4")
    screen = app.screen
    assert isinstance(screen, TraceMonitorScreen)
    return screen


async def _trace_ioctl_load(screen: TraceMonitorScreen, pilot, seconds: int) -> None:  # noqa: ANN001
    """Start the ioctl probe set on the load script (which runs ``seconds`` at most)."""
    screen.query_one("#probe-set", Select).value = "ioctl"
    screen.query_one("#trace-target", Input).value = f"{sys.executable} {LOAD} {seconds}"
    await pilot.press("s")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@needs_bpftrace
@async_test
async def test_live_histogram_from_a_real_trace_then_stop_detaches(tmp_path: Path) -> None:
    app = app_in(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _queue_screen(app, pilot)
        # Generous bounds (the load runs 120 s at most, stopped below): bpftrace's compile and
        # attach take seconds more on a loaded machine, and unloaded this ends in ~3 s anyway.
        await _trace_ioctl_load(screen, pilot, 120)
        await wait_for(pilot, lambda: screen.redraws >= 2, timeout=90, what="live snapshots")
        snap = screen._latest[screen.metric]
        assert snap.probe_set == "ioctl.ioctl" and snap.count > 0
        assert "sys_enter_ioctl" in snap.measures
        shown = str(screen.query_one("#queue-measures").render())
        assert "sys_enter_ioctl" in shown
        stats = str(screen.query_one("#queue-stats").render())
        assert "p99" in stats and "lost" in stats
        # TIOCGWINSZ (0x5413 = 21523) is the load's ioctl: it has a breakdown row.
        table = screen.query_one("#queue-breakdown", DataTable)
        await wait_for(pilot, lambda: any("21523" in str(table.get_row_at(i)[0]) for i in range(table.row_count)))
        assert bpftrace_descendants(), "bpftrace is not running under the app"
        await pilot.press("s")
        # the stop runs in a worker thread: the key returns at once, the run is held as detaching
        assert not screen.tracing and len(screen.detaching) == 1
        await wait_for(pilot, lambda: not screen.detaching, timeout=30, what="the tracer to stop")
        assert bpftrace_descendants() == []
        # The traced command's own output went to the worker's log, not into the event stream.
        assert screen.stderr_path is not None


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@needs_bpftrace
@async_test
async def test_quitting_while_tracing_leaves_no_tracer_attached(tmp_path: Path) -> None:
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _queue_screen(app, pilot)
        await _trace_ioctl_load(screen, pilot, 120)
        await wait_for(pilot, lambda: screen.redraws >= 1, timeout=90, what="the trace to start")
        await wait_for(pilot, lambda: screen.attached is not None, what="the attached report")
        load_pid = screen.attached["pid"]
        worker = screen.engine_run
        assert bpftrace_descendants(), "bpftrace is not running under the app"
        await pilot.press("ctrl+q")
    assert worker.returncode is not None, "the tracer worker outlived the TUI"
    assert bpftrace_descendants() == []
    assert not Path(f"/proc/{load_pid}").exists() or "Z" in Path(f"/proc/{load_pid}/stat").read_text().split()[2]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_a_flood_of_snapshots_is_coalesced_to_the_redraw_cadence(tmp_path: Path) -> None:
    # 100k events/s in 0.1 s snapshots is 10 snapshots/s; offer far more than that from a thread
    # and check the screen draws at its fixed cadence, always the newest one.
    import threading

    base = _recorded_snapshot()
    app = app_in(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _queue_screen(app, pilot)
        stop = threading.Event()
        offered = [0]

        def flood() -> None:
            while not stop.is_set():
                offered[0] += 1
                screen.offer(_with_count(base, offered[0]))

        thread = threading.Thread(target=flood, daemon=True)
        start = time.monotonic()
        thread.start()
        await pilot.pause(1.0)
        stop.set()
        thread.join()
        await pilot.pause(0.3)
        elapsed = time.monotonic() - start
        assert offered[0] > 20 * screen.redraws  # many more offers than draws
        assert 1 <= screen.redraws <= 12 * elapsed + 2  # about 10 per second, never per event
        assert f"{offered[0]:,}" in str(screen.query_one("#queue-stats").render())  # the newest


def _with_count(base: HistogramSnapshot, count: int) -> HistogramSnapshot:
    data = base.to_dict()
    data["count"] = count
    return event_from_dict(data)  # type: ignore[return-value]


def test_histogram_rendering_merges_buckets_to_fit_and_keeps_the_total() -> None:
    snap = _recorded_snapshot()
    text = render_histogram(snap.buckets, snap.unit, width=60, max_rows=8).plain
    rows = text.splitlines()
    assert len(rows) <= 8
    assert sum(int(r.split()[-1]) for r in rows) == sum(int(b[2]) for b in snap.buckets)


def test_targets() -> None:
    assert parse_target("1234") == {"pid": 1234}
    assert parse_target("pid 99") == {"pid": 99}
    assert parse_target("queue tiny_kernel_stress --streams 4")["command"][-4:] == [
        "run", "tiny_kernel_stress", "--streams", "4"]
    assert parse_target("python train.py --x 'a b'") == {"command": ["python", "train.py", "--x", "a b"]}
    with pytest.raises(ValueError):
        parse_target("  ")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@needs_bpftrace
def test_the_tracer_worker_stops_when_the_tui_dies(tmp_path: Path) -> None:
    # A parent that starts the worker and then dies, as a TUI killed with its terminal would.
    import subprocess

    pid_file = tmp_path / "worker.pid"
    starter = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'aorta_tui', 'trace', 'queue', '--json', "
        f"'--probes', 'ioctl', '--', sys.executable, {str(LOAD)!r}, '60'], stdout=subprocess.PIPE, "
        "stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "while b'\"attached\"' not in p.stdout.readline(): pass\n"  # bpftrace is attached
        "sys.stdout.write('attached\\n'); sys.stdout.flush(); time.sleep(0.5)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None and parent.stdout.readline().strip() == "attached"
    worker = int(pid_file.read_text())
    tracers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _is_bpftrace_of(p, worker)]
    assert tracers, "no bpftrace under the worker"
    parent.wait(10)  # the "TUI" is gone now
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (_running(Path(f"/proc/{worker}")) or any(map(_running, tracers))):
        time.sleep(0.1)
    assert not _running(Path(f"/proc/{worker}")), "the tracer worker kept running after its parent died"
    assert not any(map(_running, tracers)), "bpftrace stayed attached after the TUI died"


def _running(proc: Path) -> bool:
    try:
        stat = (proc / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _is_bpftrace_of(proc: Path, worker: int) -> bool:
    try:
        stat = (proc / "stat").read_text()
    except OSError:
        return False
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    return comm == "bpftrace" and int(fields[1]) == worker and fields[0] != "Z"
