"""The torchrun hang probe run for real: `aorta-tui --batch` over 2 gloo ranks on CPU.

Cell none-none: rank 1 sleeps 60 s before the second all-reduce; rank 0 waits in it. Tier 2
(3 s of grace, a 3 s window) sees the hang long before the 20 s collective timeout: io_idle
counts the ranks, not the torchrun agent that polls its rendezvous store (docs/classifier.md,
"Launchers are supervisors"). Cell rank_hang_skip-none: the same command with
AORTA_RANK_HANG_SKIP=1 (the sidecar mitigation), so nobody is late. The gloo collective timeout
itself is checked on a real run in tests/trial/test_worker_torchrun_hang.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "torchrun_hang_probe.yaml"
MITIGATIONS = REPO / "recipes" / "torchrun_hang_probe.mitigations.json"
COLLECTIVE_TIMEOUT_S = 20  # the recipe's: tier 2 must fire first


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, child_env: dict[str, str], torch_available: None) -> dict:
    out = tmp_path_factory.mktemp("hang")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "scripts/rank_hang.py", "--hang-rank", "1", "--sleep", "60", "--timeout", str(COLLECTIVE_TIMEOUT_S)]
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "--batch", str(RECIPE), "--mitigations-file",
                           str(MITIGATIONS), "-o", str(out), "--no-snapshot", "--json", "--", *cmd],
                          cwd=REPO, env=child_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cells = {}
    for p in out.glob("*/*/trials/*/trial-000/result.json"):
        r = json.loads(p.read_text())
        r["stdout"] = (p.parent / "stdout.log").read_text(errors="replace")
        r["stderr"] = (p.parent / "stderr.log").read_text(errors="replace")
        cells[r["cell"]] = r
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {"cells": cells, "events": events}


def test_the_late_rank_is_reported_as_a_hang_by_tier2(sweep: dict) -> None:
    r = sweep["cells"]["none-none"]
    assert r["verdict"] == "fail"
    assert "rank 1: sleeping 60 s before the all-reduce" in r["stdout"]
    # the ranks went silent and idle; the agent's store polling was not counted as activity
    hang = r["process"]["hang"]
    assert hang is not None and r["process"]["timed_out"] is False
    assert {n for n, v in hang["signals"].items() if v is not None and v >= hang["window_s"]} == {
        "output_silence", "io_idle"}
    assert hang["io_scope"].startswith("2 worker process(es), not the launcher (torch.distributed.run pid ")
    assert r["reason"].startswith("hang after ")
    # caught before the collective timeout: no timeout line from either detector
    assert not {"collective_timeout", "gloo_collective_timeout"} & {d["id"] for d in r["detections"]}
    finished = [e for e in sweep["events"] if e.get("event") == "trial_finished" and e.get("cell") == "none-none"]
    assert finished and "hang" in finished[0]["detectors"]


def test_the_control_cell_without_the_late_rank_passes(sweep: dict) -> None:
    r = sweep["cells"]["rank_hang_skip-none"]
    assert r["env_overlay"] == {"AORTA_RANK_HANG_SKIP": "1"}
    assert r["verdict"] == "pass", r["reason"]
    assert not [d for d in r["detections"] if d["severity"] in ("fail", "error")]
    assert "sleeping" not in r["stdout"]
    # both ranks finished the all-reduce with the right sum (1 + 2)
    assert r["stdout"].count("all-reduce ok (3)") == 2
    assert r["process"]["exit_code"] == 0
