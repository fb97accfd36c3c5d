"""The eBPF `cuda` probe set tracing two processes at once, through scripts/multigpu_check.py:
real bpftrace, the trace tests' fake libcuda built with gcc, two driver processes with
different launch counts and paces, one system-wide uprobe session."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ebpf(tmp_path_factory: pytest.TempPathFactory, child_env: dict[str, str], multigpu, torch_available: None) -> dict:
    out = tmp_path_factory.mktemp("ebpf")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "multigpu_check.py"), "--out", str(out),
                           "--only", "ebpf"], cwd=REPO, env=child_env, capture_output=True, text=True, timeout=120)
    report = json.loads((out / "multigpu.json").read_text())
    item = report["items"]["ebpf"]
    if item.get("skipped"):
        pytest.skip(f"eBPF item skipped: {item['skipped']}")
    if report["machine"]["gpus"]:
        pytest.skip("this test is the CPU (fake libcuda) form")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return item


def test_each_process_gets_its_own_launch_count(ebpf: dict, multigpu) -> None:
    truth = ebpf["truth"]
    assert len(truth) == 2
    for pid, t in truth.items():
        assert ebpf["per_pid"][pid]["launches"] == t["launches"]
    assert sorted(t["launches"] for t in truth.values()) == sorted(r["launches"] for r in multigpu.FAKE_RANKS)
    assert ebpf["per_pid"]["other"]["launches"] == 0
    assert ebpf["problems"] == []


def test_each_process_interval_histogram_matches_its_own_clock(ebpf: dict) -> None:
    for pid, t in ebpf["truth"].items():
        h = ebpf["per_pid"][pid]
        # the uprobe's timestamps and the driver's clock_gettime see the same calls
        assert h["gap_p50_us"] == pytest.approx(t["driver_gap_p50_us"], rel=0.1)
        assert h["gap_p50_us"] >= t["delay_us"]  # each launch sleeps delay_us in the fake library
        assert sum(h["histogram_us"].values()) == t["launches"] - 1
    paces = sorted((t["delay_us"], ebpf["per_pid"][pid]["gap_p50_us"]) for pid, t in ebpf["truth"].items())
    assert paces[0][1] < paces[1][1]  # the slower rank has the longer interval: not mixed up
