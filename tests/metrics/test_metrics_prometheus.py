"""`--metrics` scraped by a real Prometheus: a `trace queue` of a known workload (the ioctl set
against the fake driver's FIONREAD loop) and a probe `--batch` sweep, both checked through
Prometheus's HTTP API against the tool's own results; then every query of the Grafana
dashboard (docs/grafana-dashboard.json) is run against the same Prometheus."""

from __future__ import annotations

import bisect
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aorta_tui.metrics.buckets import SECONDS
from tests.metrics.conftest import listening, run_dir_of

CLI = [sys.executable, "-m", "aorta_tui"]
FIONREAD = 0x541B
IOCTLS = 200_000  # a few seconds of tracing here: rates over several scrapes
DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana-dashboard.json"
PROBE = """\
schema_version: 1
mode: probe
ticket: T-METRICS
trials: 2
timeout_per_trial: 60
mitigation_axis: [none, gpu_max_hw_queues_2]
diagnostic_axis: [none]
"""


def _run_until_scraped(prometheus: Any, args: list[str], done_query: str, port: int,
                       ) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the CLI with --metrics on ``port`` (lingering), wait until Prometheus holds the final
    figures (``done_query`` answers), then for the CLI's end."""
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stalled: list[socket.socket] = []
    try:
        # a half-sent request and a garbage one held open for the whole run: the run's own
        # figures (asserted exact below) must not wait on them
        deadline = time.monotonic() + 60
        while len(stalled) < 2 and time.monotonic() < deadline and proc.poll() is None:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=1)
            except OSError:
                time.sleep(0.05)
                continue
            conn.sendall(b"GET /metr" if not stalled else b"\x00\xff\r\n" * 64)
            stalled.append(conn)
        at = prometheus.wait_for(done_query, timeout=120)
        out, errs = proc.communicate(timeout=120)
    finally:
        for conn in stalled:
            conn.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, errs), at


@pytest.fixture(scope="module")
def trace_run(prometheus, bpftrace, fakelibs, tmp_path_factory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("trace-run")
    port = prometheus.targets["trace"]
    proc, at = _run_until_scraped(prometheus, [
        "trace", "queue", "--probes", "ioctl", "--no-calibrate", "-o", str(d / "q.json"),
        "--metrics", f"127.0.0.1:{port}", "--metrics-linger", "6",
        "--", str(fakelibs.driver), "ioctl", "-", str(IOCTLS), "0", "0"],
        'aorta_trace_running{job="trace"} == 0', port)
    assert proc.returncode == 0, proc.stderr
    return {"at": at, "port": port, "result": json.loads((d / "q.json").read_text()), "proc": proc}


@pytest.fixture(scope="module")
def sweep_run(prometheus, tmp_path_factory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("sweep-run")
    (d / "probe.yaml").write_text(PROBE)
    port = prometheus.targets["sweep"]
    # fails in the cell that sets GPU_MAX_HW_QUEUES, passes in the other: 2 failed of 4
    command = ["bash", "-c", 'sleep 1.5; test -z "$GPU_MAX_HW_QUEUES"']
    proc, at = _run_until_scraped(prometheus, [
        "--batch", str(d / "probe.yaml"), "--output", str(d / "out"), "--no-snapshot",
        "--metrics", f"127.0.0.1:{port}", "--metrics-linger", "6", "--", *command],
        'aorta_sweep_running{job="sweep"} == 0', port)
    assert proc.returncode == 0, proc.stderr
    return {"at": at, "port": port, "matrix": json.loads((run_dir_of(d / "out") / "matrix.json").read_text())}


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_trace_counts_in_prometheus_equal_the_result_file(prometheus, trace_run) -> None:
    at, m = trace_run["at"], trace_run["result"]["probe_sets"]["ioctl"]["metrics"]["ioctl"]
    q = prometheus.value
    assert q('aorta_trace_events_total{job="trace",probe_set="ioctl",metric="ioctl"}', at) == m["count"]
    assert q(f'aorta_trace_key_events_total{{job="trace",key="{FIONREAD}"}}', at) == \
        m["breakdown"][str(FIONREAD)]["count"] == IOCTLS
    assert q('sum(aorta_trace_ioctl_seconds_count{job="trace"})', at) == m["histogram"]["count"]
    assert q('aorta_trace_lost_events_total{job="trace",metric="ioctl"}', at) == m["lost_events"]
    assert q('aorta_trace_dropped_records_total{job="trace",reason="malformed"}', at) == \
        trace_run["result"]["malformed_lines"]
    info = prometheus.query('aorta_trace_info{job="trace"}', at)
    assert info[0]["metric"]["mode"] == "events" and info[0]["metric"]["probe_sets"] == "ioctl"


@pytest.mark.slow  # a real Prometheus scraping a real run (module fixtures: 13-17 s set-up in the fast tier)
def test_trace_p50_from_prometheus_is_within_one_bucket_of_the_tools(prometheus, trace_run) -> None:
    at = trace_run["at"]
    tool_p50 = trace_run["result"]["probe_sets"]["ioctl"]["metrics"]["ioctl"]["histogram"]["percentiles"]["p50"] / 1e6
    prom_p50 = prometheus.value('histogram_quantile(0.5, sum by (le) (aorta_trace_ioctl_seconds_bucket{job="trace"}))', at)
    assert prom_p50 is not None and prom_p50 > 0
    bucket = lambda v: bisect.bisect_left(SECONDS, v)  # noqa: E731
    assert abs(bucket(prom_p50) - bucket(tool_p50)) <= 1, (prom_p50, tool_p50)


@pytest.mark.slow  # a real Prometheus scraping a real run (module fixtures: 13-17 s set-up in the fast tier)
def test_trace_listener_is_gone_when_the_run_ends(trace_run) -> None:
    assert "metrics at http://127.0.0.1:" in trace_run["proc"].stderr
    assert not listening(trace_run["port"])


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_sweep_progress_reaches_the_trial_count_and_failures_match_the_matrix(prometheus, sweep_run) -> None:
    at, matrix = sweep_run["at"], sweep_run["matrix"]
    q = prometheus.value
    planned = sum(c["trials"] for c in matrix["cells"])
    assert q('sum(aorta_sweep_trials_planned{job="sweep"})', at) == planned == 4
    assert q('sum(aorta_sweep_trials_done_total{job="sweep"})', at) == 4
    failed = {r["metric"]["cell"]: float(r["value"][1])
              for r in prometheus.query('aorta_sweep_trials_failed_total{job="sweep"}', at)}
    assert failed == {c["cell"]: float(c["failed"]) for c in matrix["cells"]}
    assert failed == {"none-none": 0.0, "gpu_max_hw_queues_2-none": 2.0}
    assert not listening(sweep_run["port"])


@pytest.mark.slow  # a real Prometheus scraping a real run (module fixtures: 13-17 s set-up in the fast tier)
def test_sweep_shows_the_current_trial_while_it_runs(prometheus, sweep_run) -> None:
    # a trial takes 1.5 s and the scrape is every second: some scrape saw one running
    seen = prometheus.query('max_over_time(aorta_sweep_current_trial_elapsed_seconds{job="sweep",phase="running"}[10m])',
                            sweep_run["at"])
    assert {r["metric"]["cell"] for r in seen} <= {"none-none", "gpu_max_hw_queues_2-none"} and seen
    assert all(re.fullmatch(r".+/trial-\d{3}", r["metric"]["trial_id"]) for r in seen)


def _dashboard_queries() -> list[tuple[str, str]]:
    doc = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in doc["panels"] for t in p["targets"]]


@pytest.mark.slow  # a real Prometheus scraping a real run (module fixtures: 13-17 s set-up in the fast tier)
def test_every_dashboard_query_returns_data(prometheus, trace_run, sweep_run) -> None:
    # $metric is the dashboard's choice of histogram; on this CPU box the ioctl set is what
    # records (launch_to_start needs a GPU and its CUPTI collector: the same query, its metric)
    queries = _dashboard_queries()
    assert len(queries) >= 10
    empty = []
    for title, expr in queries:
        promql = expr.replace("$metric", "ioctl").replace("${metric}", "ioctl").replace("$instance", ".*")
        at = sweep_run["at"] if "aorta_sweep" in promql else trace_run["at"]
        result = prometheus.query(promql, at)
        if not result or all(r["value"][1] in ("NaN", "+Inf", "-Inf") for r in result):
            empty.append((title, promql))
    assert not empty, empty
