"""The four reproducers on a GPU, with and without fault injection (one process, world size 1).

Usage: ``python tests/workloads/gpu_wl_check.py OUT_DIR``. Writes ``OUT_DIR/gpu_workloads.json``
(one entry per case: passed, failure codes and first message, the figures) and prints a line
per case. Not a pytest module: the GPU machine runs it by hand (see docs/workloads.md). The
``deterministic`` switch changes process-wide state, so the cases that use it run last.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aorta_tui.registry.registry import load_workload
from aorta_tui.registry.workload import WorkloadContext, validate_config

TRAIN = {"dtype": "bfloat16", "batch_size": 8, "seq_len": 256,
         "model": {"kind": "transformer", "hidden_size": 1024, "num_layers": 4, "num_heads": 16,
                   "ffn_size": 4096, "vocab_size": 32000}}
SERVE = {"mode": "continuous_batch", "dtype": "bfloat16",
         "request": {"batch_size": 32, "prompt_len": 128, "generate_tokens": 64},
         "model": {"kind": "decoder_transformer", "hidden_size": 1024, "num_layers": 8,
                   "num_heads": 16, "ffn_size": 4096, "vocab_size": 32000},
         "serving": {"kv_cache": True, "continuous_batch": {"max_active_requests": 8,
                                                            "arrival_pattern": "poisson",
                                                            "arrival_rate": 2.0}}}
DET = {"hidden_size": 512, "num_layers": 4, "num_heads": 8, "ffn_size": 2048,
       "vocab_size": 8192, "seq_len": 512, "batch_size": 4, "dtype": "float32"}
RACE = {"alltoall_tensor_size": 1 << 18, "allreduce_tensor_size": 1 << 18,
        "fsdp_shard_size": 1 << 18, "warmup_iterations": 5, "verify_iterations": 50,
        "stop_on_first_corruption": False}

CASES: list[tuple[str, str, dict[str, Any], int, tuple[str, ...]]] = [
    ("training ddp", "training", TRAIN, 20, ()),
    ("training fsdp moe", "training", {**TRAIN, "parallelism": "fsdp",
                                       "model": {**TRAIN["model"], "kind": "moe_transformer"}}, 20, ()),
    ("training inject_nan_at_step=5", "training", {**TRAIN, "inject_nan_at_step": 5}, 20, ()),
    ("inference continuous trial 1", "inference", SERVE, 400, ()),
    ("inference continuous trial 2", "inference", SERVE, 400, ()),
    ("inference offline", "inference", {**SERVE, "mode": "offline_batch",
                                        "serving": {"kv_cache": True}}, 5, ()),
    ("inference perturb_logits=1e-3 trial 1", "inference", {**SERVE, "perturb_logits": 1e-3}, 400, ()),
    ("inference perturb_logits=1e-3 trial 2", "inference", {**SERVE, "perturb_logits": 1e-3}, 400, ()),
    ("inference perturb_logits=nan", "inference", {**SERVE, "perturb_logits": float("nan")}, 400, ()),
    ("llm_determinism", "llm_determinism", DET, 3, ()),
    ("llm_determinism fsdp", "llm_determinism", {**DET, "parallelism": "fsdp"}, 3, ()),
    ("llm_determinism unseeded_op", "llm_determinism", {**DET, "inject_nondeterminism": "unseeded_op"}, 3, ()),
    ("llm_determinism atomic_accumulate", "llm_determinism",
     {**DET, "inject_nondeterminism": "atomic_accumulate"}, 3, ()),
]
for mode in ("default", "ddp", "fsdp"):
    CASES.append((f"race {mode}", "race", {**RACE, "mode": mode}, 50, ()))
    for drop in ("h2d", "comm", "compute"):
        for delay in (0, 200):
            CASES.append((f"race {mode} drop_wait={drop} producer_delay_us={delay}", "race",
                          {**RACE, "mode": mode, "drop_wait": drop, "producer_delay_us": delay},
                          50, ()))
# process-wide switches last
CASES += [
    ("llm_determinism atomic_accumulate +deterministic", "llm_determinism",
     {**DET, "inject_nondeterminism": "atomic_accumulate"}, 3, ("torch.deterministic",)),
    ("training ddp +deterministic", "training", TRAIN, 20, ("torch.deterministic",)),
]

KEEP = ("loss_first", "loss_last", "parameters", "prefill_ms_p50", "decode_ms_p50",
        "decode_ms_p99", "tokens_per_s", "decode_tokens_per_s", "requests_completed",
        "max_active_observed", "logits_fingerprint", "kv_cache_bytes", "steps_compared",
        "tensors_compared_per_run", "iterations_verified", "corrupted_iterations",
        "iteration_ms_p50", "iteration_ms_p99", "elements_verified_per_iteration")


def _load(workload: str) -> Any:
    try:
        return load_workload(workload)
    except Exception:  # not pip-installed there: no entry points, import the module directly
        import importlib

        names = {"training": "Training", "inference": "Inference",
                 "llm_determinism": "LlmDeterminism", "race": "Race"}
        module = importlib.import_module(f"aorta_tui.workloads.{workload}")
        return getattr(module, names[workload])


def run_case(name: str, workload: str, raw: dict[str, Any], steps: int,
             switches: tuple[str, ...]) -> dict[str, Any]:
    cls = _load(workload)
    ctx = WorkloadContext(steps=steps, config=validate_config(cls.config_schema, raw), seed=0,
                          trial_dir=Path(tempfile.mkdtemp()), switches=switches)
    w = cls()
    t0 = time.perf_counter()
    try:
        w.setup(ctx)
        r = w.run(ctx)
    finally:
        w.cleanup(ctx)
    st = sorted(r.step_times_s)
    return {
        "case": name, "passed": r.passed, "device": r.device, "wall_s": time.perf_counter() - t0,
        "codes": sorted({f.code for f in r.failures}),
        "first_failure": r.failures[0].message if r.failures else None,
        "step_ms_p50": st[len(st) // 2] * 1e3 if st else None,
        "metrics": {k: r.metrics.get(k) for k in KEEP if k in r.metrics},
        "applied_switches": r.applied_switches, "result": r.to_dict(),
    }


def main(out: Path) -> None:
    from aorta_tui.workloads.inference import compare_fingerprints

    rows = []
    for case in CASES:
        try:
            row = run_case(*case)
        except Exception as exc:  # keep going: one broken case must not hide the others
            row = {"case": case[0], "passed": None, "error": f"{type(exc).__name__}: {exc}"}
        rows.append(row)
        print(f"{row['case']}: passed={row['passed']} {row.get('codes', '')} "
              f"{row.get('first_failure') or row.get('error') or ''} "
              f"p50={row.get('step_ms_p50')} {json.dumps(row.get('metrics', {}))[:300]}",
              flush=True)
    by = {r["case"]: r for r in rows}
    for prefix in ("inference continuous", "inference perturb_logits=1e-3"):
        pair = [by.get(f"{prefix} trial {i}", {}).get("result") for i in (1, 2)]
        if all(pair):
            fails = compare_fingerprints(pair)
            print(f"compare_fingerprints({prefix}): {[f.message for f in fails]}", flush=True)
            rows.append({"case": f"compare_fingerprints {prefix}",
                         "failures": [f.message for f in fails]})
    for r in rows:
        r.pop("result", None)
    (out / "gpu_workloads.json").write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
