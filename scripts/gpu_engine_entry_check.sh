#!/usr/bin/env bash
# Issue 36 on the GPU: the policy sweep's trials now run through the queue engine's entry point
# (python -m aorta_tui.hwqueue.child reading each trial's queue-config.json) and the policy and
# queue sweeps share trial/run_loop.py. This runs both on the real CUDA path, as a user runs them,
# each stage under a limit (gpu_stage.sh). Usage (device tool): bash scripts/gpu_engine_entry_check.sh
# Stages: install 90 s; policy 240 s (3 policies x 2 trials of tiny_kernel_stress, ~10 s each);
# queue_sweep 120 s (2 points).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
RESULT_DIR=${OUT:-/tmp/gpu-entry-result}; mkdir -p "$RESULT_DIR"
export OUT=/tmp/gpu-entry-out; rm -rf "$OUT"; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_stage.sh"
WORK=/tmp/gpu-entry-work; rm -rf "$WORK"; mkdir -p "$WORK"; export WORK
install() { python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . ; }
policy() {
  cd "$WORK" && python3 -m aorta_tui policy sweep tiny_kernel_stress \
    --policies stream_priority_lc,cuda_graphs -k 2 -i 20 --streams 4 -o "$WORK/policy" &&
  python3 - <<'PY'
import json, pathlib
run = pathlib.Path("/tmp/gpu-entry-work/policy")
for t in sorted((run / "trials").iterdir()):
    o = json.loads((t / "outcome.json").read_text()); c = json.loads((t / "queue-config.json").read_text())
    print(t.name, o["status"], o["argv"][1:3], "graph" if c["graph"] else "", c["stream_priority"],
          {k: o["summary"].get(k) for k in list(o["summary"])[:2]})
print(json.loads((run / "policy.json").read_text()).get("status"))
PY
}
queue_sweep() { cd "$WORK" && python3 -m aorta_tui queue sweep tiny_kernel_stress --streams 1,4 -i 20 --run-dir "$WORK/qs" -o "$WORK/qs.json" && python3 -c "
import json; d=json.load(open('$WORK/qs.json')); print({k: d[k] for k in d if k in ('knee','points','kind')} if isinstance(d, dict) else d)" | head -c 1500; }
export -f install policy queue_sweep
stage install 90 install
stage policy 240 policy
stage queue_sweep 120 queue_sweep
summary_table
cp "$OUT"/*.log "$OUT/summary.md" "$RESULT_DIR/" 2>/dev/null
tar czf "$RESULT_DIR/work.tgz" -C "$WORK" . 2>/dev/null
