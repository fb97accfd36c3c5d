"""The distributed paths with two gloo ranks under a real torchrun (one launch for all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(HERE / "wl_dist_scenarios.py"), str(out)],
        capture_output=True, text=True, timeout=240, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]

    def result(name: str, rank: int) -> dict:
        return json.loads((out / f"{name}.rank{rank}.json").read_text())

    return result


def _codes(r: dict) -> list[str]:
    return [f["code"] for f in r["failures"]]


@pytest.mark.parametrize("name", ["training_ddp", "det_clean", "det_fsdp", "race_default",
                                  "race_fsdp"])
def test_clean_scenarios_pass_on_both_ranks(two_ranks, name):
    for rank in (0, 1):
        r = two_ranks(name, rank)
        assert r["passed"], r["failures"]
        assert r["step_times_s"]


def test_training_ranks_train_on_their_own_data(two_ranks):
    a, b = two_ranks("training_ddp", 0), two_ranks("training_ddp", 1)
    assert a["metrics"]["loss_trajectory"] != b["metrics"]["loss_trajectory"]
    assert a["metrics"]["tokens_per_step_global"] == 2 * 4 * 32


def test_nan_on_rank0_stops_both_ranks_at_the_step(two_ranks):
    r0, r1 = two_ranks("training_fsdp_moe_nan", 0), two_ranks("training_fsdp_moe_nan", 1)
    assert _codes(r0)[:2] == ["nonfinite_output", "nonfinite_loss"]
    assert "nonfinite_output" not in _codes(r1)  # rank 1's own data is clean
    assert "nonfinite_grad" in _codes(r1)  # but FSDP's reduce-scatter carried the NaN over
    for r in (r0, r1):
        assert len(r["step_times_s"]) == 2
        assert "inject_nan_at_step=2" in r["failures"][0]["message"]


def test_determinism_compares_across_ranks(two_ranks):
    r = two_ranks("det_clean", 1)
    assert r["metrics"]["checksum_mode"] == "global"
    assert r["metrics"]["final_fingerprint"] == two_ranks("det_clean", 0)["metrics"]["final_fingerprint"]
    bad = two_ranks("det_unseeded", 1)
    assert _codes(bad) == ["nondeterministic_step"] and bad["failures"][0]["details"]["block"] == 1


def test_race_corruption_on_two_ranks_names_buffer_and_rank(two_ranks):
    for rank in (0, 1):
        r = two_ranks("race_default_drop_h2d", rank)
        buffers = {f["details"]["buffer"] for f in r["failures"]}
        # with two ranks a late copy also breaks the all-reduce sum
        assert {"a2a_output", "allreduce"} <= buffers
        assert all(f["details"]["rank"] == rank for f in r["failures"])
        assert two_ranks("race_ddp_drop_comm", rank)["failures"][0]["details"]["buffer"] == "bucket0_update"
        assert two_ranks("race_fsdp_drop_compute", rank)["failures"][0]["details"]["buffer"] == "grad_shard"
    assert two_ranks("race_fsdp", 0)["metrics"]["iterations_verified"] == 5
