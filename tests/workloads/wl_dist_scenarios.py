"""Runs under ``torchrun --nproc_per_node=2``: each scenario's setup/run/cleanup on every rank.

Usage: ``python -m torch.distributed.run --standalone --nproc_per_node=2
tests/workloads/wl_dist_scenarios.py OUT_DIR``. Writes ``OUT_DIR/<scenario>.rank<N>.json``
with the result dict; the test reads them. Scenarios run one after another in the same
processes, so one launch (a few seconds of start-up) covers all of them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from aorta_tui.registry.registry import load_workload
from aorta_tui.registry.workload import WorkloadContext, validate_config

SCENARIOS: dict[str, tuple[str, dict, int]] = {
    "training_ddp": ("training", {"model": {"kind": "transformer"}}, 3),
    "training_fsdp_moe_nan": ("training", {"parallelism": "fsdp", "inject_nan_at_step": 2,
                                           "model": {"kind": "moe_transformer"}}, 3),
    "det_clean": ("llm_determinism", {}, 2),
    "det_fsdp": ("llm_determinism", {"parallelism": "fsdp", "dropout": 0.0}, 2),
    "det_unseeded": ("llm_determinism", {"inject_nondeterminism": "unseeded_op"}, 2),
    "race_default": ("race", {"mode": "default"}, 3),
    "race_default_drop_h2d": ("race", {"mode": "default", "drop_wait": "h2d"}, 3),
    "race_ddp_drop_comm": ("race", {"mode": "ddp", "drop_wait": "comm"}, 3),
    "race_fsdp": ("race", {"mode": "fsdp", "warmup_iterations": 2, "verify_iterations": 3,
                           "simulate_compute": True, "fsdp_shard_size": 1000}, 3),
    "race_fsdp_drop_compute": ("race", {"mode": "fsdp", "drop_wait": "compute"}, 3),
}


def main(out: Path) -> None:
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # One group for all scenarios: the workloads reuse a group they find (and leave it alone);
    # re-creating the default group in one process would meet the old one's keys in the store.
    dist.init_process_group("gloo")
    only = os.environ.get("WL_SCENARIOS")
    for name, (workload, raw, steps) in SCENARIOS.items():
        if only and name not in only.split(","):
            continue
        cls = load_workload(workload)
        config = validate_config(cls.config_schema, {**raw, "world_size": world})
        ctx = WorkloadContext(steps=steps, config=config, seed=0, trial_dir=out / name,
                              rank=rank, world_size=world,
                              local_rank=int(os.environ["LOCAL_RANK"]))
        w = cls()
        try:
            w.setup(ctx)
            result = w.run(ctx).to_dict()
        finally:
            w.cleanup(ctx)
        (out / f"{name}.rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
