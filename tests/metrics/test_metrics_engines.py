"""`queue sweep --metrics` and `policy sweep --metrics` on the CPU: the progress series a
scrape reads while the run lingers match what the run did; the listener is gone afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.metrics.conftest import free_port, listening

CLI = [sys.executable, "-m", "aorta_tui"]
SMALL = ["--streams", "2", "--device", "cpu", "--size", "tiny", "-i", "2", "--warmup", "1"]


def _final_scrape(args: list[str]) -> tuple[dict[tuple[str, tuple], float], subprocess.CompletedProcess[str], int]:
    """Run with --metrics (lingering) and parse the scrape taken once the run has ended."""
    port = free_port()
    proc = subprocess.Popen([*CLI, *args, "--metrics", f"127.0.0.1:{port}", "--metrics-linger", "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples: dict[tuple[str, tuple], float] = {}
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    text = r.read().decode()
            except OSError:
                time.sleep(0.3)
                continue
            samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                       for fam in text_string_to_metric_families(text) for s in fam.samples}
            if samples.get(("aorta_sweep_running", ())) == 0:
                break  # ended (1 from the first scrape on: a scrape before run_started is not "ended")
            time.sleep(0.3)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return samples, subprocess.CompletedProcess(proc.args, proc.returncode, out, err), port


def _by_cell(samples: dict, name: str) -> dict[str, float]:
    return {dict(labels)["cell"]: v for (n, labels), v in samples.items() if n == name}


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_queue_sweep_progress(tmp_path: Path) -> None:
    samples, proc, port = _final_scrape(["queue", "sweep", "tiny_kernel_stress",
                                         "--streams", "1,2", "--device", "cpu", "--size", "tiny", "-i", "2",
                                         "-w", "1", "--run-dir", str(tmp_path / "run"), "-o", str(tmp_path / "s.json")])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert samples[("aorta_sweep_trials_planned", (("cell", "all"),))] == len(doc["points"]) == 2
    assert sum(_by_cell(samples, "aorta_sweep_trials_done_total").values()) == 2
    assert samples[("aorta_sweep_info", (("source", "queue_sweep"), ("status", "completed")))] == 1
    assert not listening(port)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_policy_sweep_progress(tmp_path: Path) -> None:
    samples, proc, port = _final_scrape(["policy", "sweep", "tiny_kernel_stress", "--policies",
                                         "baseline,cuda_max_connections_1", "--trials", "1", *SMALL,
                                         "-o", str(tmp_path / "pol")])
    assert proc.returncode == 0, proc.stderr
    assert _by_cell(samples, "aorta_sweep_trials_done_total") == {"baseline": 1, "cuda_max_connections_1": 1}
    assert sum(_by_cell(samples, "aorta_sweep_trials_failed_total").values()) == 0
    assert samples[("aorta_sweep_trials_planned", (("cell", "all"),))] == 2
    assert not listening(port)


def test_a_scrape_before_the_runs_first_event_says_running_not_ended() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from aorta_tui.metrics.sweep_metrics import SweepMetrics

    sink = SweepMetrics()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(sink)

    def running() -> float:
        text = generate_latest(registry).decode()
        return next(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
                    if s.name == "aorta_sweep_running")

    assert running() == 1  # a dashboard (or a waiting script) must not read "ended" yet
    sink.close()
    assert running() == 0
