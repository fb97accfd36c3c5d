"""The --metrics endpoint's address rules, bind errors, lifetime and scrape isolation."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.errors import UsageError
from aorta_tui.metrics.server import DEFAULT_HOST, check_bind, parse_address, serve
from aorta_tui.metrics.sweep_metrics import SweepMetrics
from tests.metrics.conftest import free_port, listening

CLI = [sys.executable, "-m", "aorta_tui"]
PROBE = "schema_version: 1\nmode: probe\nticket: T-M\ntrials: 1\nmitigation_axis: [none]\ndiagnostic_axis: [none]\n"


@given(st.integers(0, 65535))
def test_a_bare_port_binds_to_loopback(port: int) -> None:
    assert parse_address(str(port)) == parse_address(f":{port}")
    assert parse_address(str(port)).host == DEFAULT_HOST and parse_address(str(port)).port == port


@given(st.text(max_size=30))
def test_any_text_is_an_address_or_a_usage_error(text: str) -> None:
    try:
        a = parse_address(text)
    except UsageError as exc:
        assert "--metrics" in exc.message and exc.hint
    else:
        assert 0 <= a.port <= 65535 and a.host


def test_ipv6_and_bad_forms() -> None:
    assert parse_address("[::1]:9477").host == "::1"
    assert parse_address("[::1]:9477").url == "http://[::1]:9477/metrics"
    for bad in ("host:", "127.0.0.1:70000", "[::1]9477", "abc"):
        with pytest.raises(UsageError):
            parse_address(bad)


def test_non_loopback_needs_the_explicit_flag() -> None:
    with pytest.raises(UsageError) as exc:
        check_bind(parse_address("0.0.0.0:9477"), public=False)
    assert "--metrics-public" in (exc.value.hint or "")
    check_bind(parse_address("0.0.0.0:9477"), public=True)
    check_bind(parse_address("localhost:9477"), public=False)


def _sweep(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "probe.yaml").write_text(PROBE)
    return subprocess.run([*CLI, "--batch", str(tmp_path / "probe.yaml"), "--output", str(tmp_path / "out"),
                           "--no-snapshot", *extra, "--", "true"], capture_output=True, text=True, timeout=120)


def test_a_port_in_use_is_exit_2_with_the_fix_and_runs_nothing(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        r = _sweep(tmp_path, "--metrics", f"127.0.0.1:{port}")
    assert r.returncode == 2, r.stderr
    assert "port is in use" in r.stderr and "ss -ltnp" in r.stderr and "Traceback" not in r.stderr
    assert not list((tmp_path / "out").glob("*/*/trials/*/*/result.json"))


def test_trace_queue_with_a_port_in_use_is_exit_2_before_tracing() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        r = subprocess.run([*CLI, "trace", "queue", "--probes", "ioctl", "--metrics", str(port), "--", "true"],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "port is in use" in r.stderr and "tracing" not in r.stderr, r.stderr


def test_replay_refuses_metrics() -> None:
    r = subprocess.run([*CLI, "trace", "queue", "--json", "--synthetic", "10", "--metrics", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no live figures" not in r.stdout and "have none" in r.stderr, r.stderr


def test_a_public_bind_without_the_flag_is_refused(tmp_path: Path) -> None:
    r = _sweep(tmp_path, "--metrics", "0.0.0.0:0")
    assert r.returncode == 2 and "--metrics-public" in r.stderr, r.stderr


def test_trace_queue_refuses_a_public_bind_before_tracing() -> None:
    r = subprocess.run([*CLI, "trace", "queue", "--probes", "ioctl", "--metrics", "0.0.0.0:9477", "--", "true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--metrics-public" in r.stderr, r.stderr
    assert "tracing" not in r.stderr


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_the_server_stops_when_the_run_ends(tmp_path: Path) -> None:
    port = free_port()
    r = _sweep(tmp_path, "--metrics", f"127.0.0.1:{port}")
    assert r.returncode == 0, r.stderr
    assert f"metrics at http://127.0.0.1:{port}/metrics" in r.stderr
    assert not listening(port)


def test_a_malformed_or_stalled_scrape_never_blocks_the_feeder_or_other_scrapes() -> None:
    sink = SweepMetrics(planned={"a": 3})
    server = serve("127.0.0.1:0", public=False, collectors=[sink])
    port = server.address.port
    stalled = socket.create_connection(("127.0.0.1", port))
    stalled.sendall(b"GET /metr")  # half a request line, never finished
    garbage = socket.create_connection(("127.0.0.1", port))
    garbage.sendall(b"\x00\xff\r\n\r\n" * 100)
    try:
        fed = threading.Thread(target=lambda: [sink.emit(_finished(i)) for i in range(1000)])
        fed.start()
        fed.join(timeout=10)
        assert not fed.is_alive()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            body = resp.read().decode()
        assert 'aorta_sweep_trials_done_total{cell="a"} 1000.0' in body
    finally:
        stalled.close()
        garbage.close()
        server.stop()
    assert not listening(port)


def _finished(i: int):
    from aorta_tui.core.events import TrialFinished

    return TrialFinished("r", trial_id=f"a/trial-{i:03d}", cell="a", trial=i, verdict="pass")
