"""comms_compute_overlap with real gloo all-reduces over 2 torchrun ranks, through
scripts/multigpu_check.py (its per-rank shim and table), checked against the rank files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ITERATIONS = 4
STREAMS = 4  # 2 compute + 2 comm streams (split_roles halves them)


@pytest.fixture(scope="module")
def overlap_run(tmp_path_factory: pytest.TempPathFactory, child_env: dict[str, str], torch_available: None) -> dict:
    out = tmp_path_factory.mktemp("overlap")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "multigpu_check.py"), "--out", str(out),
                           "--only", "overlap", "--modes", "comms_compute", "--iterations", str(ITERATIONS),
                           "--warmup", "1", "--streams", str(STREAMS)],
                          cwd=REPO, env=child_env, capture_output=True, text=True, timeout=180)
    report = json.loads((out / "multigpu.json").read_text())
    if report["machine"]["gpus"]:
        pytest.skip("this test is the CPU (gloo) form; on GPUs run the script itself")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ranks = {r: json.loads((out / "overlap" / f"comms_compute.rank{r}.json").read_text()) for r in (0, 1)}
    return {"out": out, "report": report, "ranks": ranks, "stdout": proc.stdout}


def labels(result: dict) -> dict[str, int]:
    i = result["timeline_fields"].index("label")
    counts: dict[str, int] = {}
    for row in result["timeline"]:
        counts[row[i]] = counts.get(row[i], 0) + 1
    return counts


def test_two_gloo_ranks_each_write_their_own_result(overlap_run: dict) -> None:
    ranks = overlap_run["ranks"]
    assert {r: v["platform"]["distributed"] for r, v in ranks.items()} == {
        0: {"rank": 0, "world_size": 2, "backend": "gloo"},
        1: {"rank": 1, "world_size": 2, "backend": "gloo"},
    }
    pids = {int((overlap_run["out"] / "overlap" / "pids" / "comms_compute" / f"rank{r}.pid").read_text()) for r in (0, 1)}
    assert len(pids) == 2  # two processes, not one result written twice
    for v in ranks.values():
        assert v["emulated"] is True and v["workload"]["params"]["collectives"] == "real"


def test_the_ranks_ran_the_same_work_and_their_figures_agree_with_themselves(overlap_run: dict) -> None:
    r0, r1 = overlap_run["ranks"][0], overlap_run["ranks"][1]
    assert r0["config"] == r1["config"] and r0["workload"] == r1["workload"]
    # per iteration: one GEMM per compute stream, one all-reduce per comm stream
    want = {"gemm": ITERATIONS * STREAMS // 2, "all_reduce": ITERATIONS * STREAMS // 2}
    assert labels(r0) == labels(r1) == want
    for r in (r0, r1):
        s = r["summary"]
        work = r["workload"]["work_per_iteration"] * ITERATIONS
        assert s["throughput"] == pytest.approx(work / s["wall_s"] / 1e12, rel=1e-9)
        assert 0 < s["latency_p50_ms"] <= s["latency_p99_ms"]
        comm = [st for st in r["metrics"]["per_stream"] if st["stream"] >= STREAMS // 2]
        assert all(st["launches"] == ITERATIONS and st["busy_ms"] > 0 for st in comm)
        assert r["summary"]["queue_depth_max"] is None and "queue_depth" in r["unavailable"]


def test_the_script_table_reports_what_the_rank_files_hold(overlap_run: dict) -> None:
    item = overlap_run["report"]["items"]["overlap"]
    assert item["ok"] is True and item["problems"] == []
    for r in (0, 1):
        assert item["ranks"]["comms_compute"][str(r)] == overlap_run["ranks"][r]["summary"]
    rows = [ln for ln in item["markdown"].splitlines() if ln.startswith("| comms_compute ")]
    assert len(rows) == 2
    for ln, r in zip(rows, (0, 1), strict=True):
        cols = [c.strip() for c in ln.strip("|").split("|")]
        assert cols[1] == str(r) and cols[2] == "gloo/2" and cols[4] == str(ITERATIONS * 2)
    # only one mode ran: overlap needs all three, and says so instead of inventing a number
    assert item["overlap"] == {"0": "n/a (a mode is missing)", "1": "n/a (a mode is missing)"}
    assert "needs CUDA kernel timestamps" in item["markdown"]
