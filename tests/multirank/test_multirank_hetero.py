"""hetero_kernels x16 through scripts/multigpu_check.py on CPU: one emulated device, the
per-device table built from the result's streams, memory marked unavailable with a reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_hetero_item_on_cpu_reports_one_emulated_device(tmp_path: Path, child_env: dict[str, str],
                                                        torch_available: None) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "multigpu_check.py"), "--out", str(tmp_path),
                           "--only", "hetero", "--iterations", "3", "--warmup", "1"],
                          cwd=REPO, env=child_env, capture_output=True, text=True, timeout=120)
    report = json.loads((tmp_path / "multigpu.json").read_text())
    if report["machine"]["gpus"]:
        pytest.skip("this test is the CPU form")
    assert proc.returncode == 0, proc.stdout[-3000:]
    item = report["items"]["hetero"]
    result = json.loads((tmp_path / "hetero" / "hetero.json").read_text())
    assert result["emulated"] is True and result["config"]["streams"] == 16
    streams = result["metrics"]["per_stream"]
    busy = [s["busy_ms"] for s in streams if s["busy_ms"] is not None]
    active = [s for s in streams if s["launches"]]
    # a stream without launches has busy_ms null (with its reason), never 0.0
    assert len(busy) == len(active) and all(
        "no launch" in result["unavailable"][f"per_stream[{s['stream']}].busy_ms"] for s in streams if not s["launches"])
    assert item["per_device"] == {"cpu": {"streams": 16, "active": len(active),
                                          "launches": sum(s["launches"] for s in streams),
                                          "busy_ms": pytest.approx(sum(busy)), "busy_n": len(busy)}}
    row = next(ln for ln in item["markdown"].splitlines() if ln.startswith("| cpu "))
    assert "n/a (CPU emulation has no device memory to measure)" in row
    assert "one emulated device" in item["markdown"]
