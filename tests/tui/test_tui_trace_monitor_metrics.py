"""The trace monitor's metrics key (e) and setting ($AORTA_TUI_METRICS): the tracer it starts
serves --metrics for Prometheus, and the listener is gone when the trace stops."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import urllib.request
from pathlib import Path

import pytest
from textual.widgets import Input, Select
from tui_support import HERE, app_in, async_test, wait_for

from aorta_tui.tui.screens.trace_monitor import TraceMonitorScreen

LOAD = HERE / "tui_ioctl_load.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return None


@async_test
async def test_e_toggles_metrics_and_the_setting_gives_the_address(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.delenv("AORTA_TUI_METRICS", raising=False)
    app = app_in(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        screen = app.screen
        assert isinstance(screen, TraceMonitorScreen)
        assert screen.metrics_addr is None and screen.metrics_args() == []
        await pilot.press("e")
        assert screen.metrics_args() == ["--metrics", "127.0.0.1:9477"]
        assert "http://127.0.0.1:9477/metrics" in str(screen.query_one("#queue-status").render())
        await pilot.press("e")
        assert screen.metrics_args() == [] and "metrics" not in screen.status
    monkeypatch.setenv("AORTA_TUI_METRICS", "127.0.0.1:9600")
    app = app_in(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        assert app.screen.metrics_args() == ["--metrics", "127.0.0.1:9600"]
        assert "9600" in str(app.screen.query_one("#queue-status").render())


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.skipif(shutil.which("bpftrace") is None or os.geteuid() != 0,
                    reason="needs bpftrace and root (the CI script installs bpftrace and runs as root)")
@async_test
async def test_a_trace_started_with_metrics_serves_them_until_it_stops(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    port = _free_port()
    monkeypatch.setenv("AORTA_TUI_METRICS", f"127.0.0.1:{port}")
    app = app_in(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        screen = app.screen
        screen.query_one("#probe-set", Select).value = "ioctl"
        screen.query_one("#trace-target", Input).value = f"{sys.executable} {LOAD} 120"
        await pilot.press("escape", "s")
        await wait_for(pilot, lambda: screen.redraws >= 1, timeout=90, what="live snapshots")
        body = None
        for _ in range(40):
            body = _scrape(port)
            if body and "aorta_trace_events_total{" in body:
                break
            await pilot.pause(0.25)
        assert body and 'aorta_trace_events_total{metric="ioctl",probe_set="ioctl"}' in body
        await pilot.press("s")
        await wait_for(pilot, lambda: not screen.tracing, timeout=30, what="the tracer to stop")
    assert _scrape(port) is None
