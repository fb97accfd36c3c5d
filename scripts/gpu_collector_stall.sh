#!/usr/bin/env bash
# The CUPTI collector stalls a real training loop (H200, 2026-12-04): `trace queue --probes cuda
# -- python3 train.py 600` (scripts/gpu_privsep_check.sh's 6-layer encoder, ~450 launches a step)
# stops in backward after ~400 steps (~180k kernels, ~8 s), as root and as the invoking user
# alike; 200 steps finish; with --device-timestamps off all 600 finish (16.7 ms a step). The
# tool's own threads were idle then (its FIFO reader in select): the stall is inside the program.
#
# This is the bisect, in ONE device call: the same 600 steps under each collector variant, each
# under a 50 s limit (a finishing run takes ~20 s with torch's start), and the tool's result
# document where the run finished. Variants:
#   off        --device-timestamps off (control: must finish)
#   default    the default mode (activity records, latency timestamps): stalled 2026-12-04
#   nolatency  AORTA_CUPTI_LATENCY=0 (no queued/submitted timestamps; NVIDIA's forum has a thread
#              "cuptiActivityEnableLatencyTimestamps(1) hangs the process unexpectedly")
#   kernels    AORTA_CUPTI_KINDS=kernel (no memcpy/memset records)
#   flush20    AORTA_CUPTI_FLUSH_MS=20 (buffers completed 5x as often)
#   callback   --launch-source collector (the launch callback as well)
# Usage (device tool, carry .bt .whl): bash scripts/gpu_collector_stall.sh [variants]
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
VARIANTS=${1:-off,default,nolatency,kernels,flush20,callback}
RESULT_DIR=${OUT:-/tmp/gpu-stall-result}; mkdir -p "$RESULT_DIR"
bash scripts/gpu_privsep_check.sh --install-only >/dev/null 2>&1 || { echo "install failed"; exit 1; }
export OUT=/tmp/gpu-stall-out; rm -rf "$OUT"; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_stage.sh"
cd /home/aorta-gpu/work
traced() {  # NAME [VAR=VALUE ...] -- [trace options]
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" AORTA_TUI_BPFTRACE=/tmp/bpftrace python3 -m aorta_tui trace queue --probes cuda \
    --no-calibrate -o "$OUT/$name.json" "$@" -- python3 train.py 600
}
off() { traced off -- --device-timestamps off; }
default() { traced default --; }
nolatency() { traced nolatency AORTA_CUPTI_LATENCY=0 --; }
kernels() { traced kernels AORTA_CUPTI_KINDS=kernel --; }
flush20() { traced flush20 AORTA_CUPTI_FLUSH_MS=20 --; }
callback() { traced callback -- --launch-source collector; }
export -f traced off default nolatency kernels flush20 callback
for v in ${VARIANTS//,/ }; do GPU_STAGE_TAIL=6 stage "$v" 50 "$v"; done
summary_table
for f in "$OUT"/*.json; do  # the collector's own counters, where a run finished
  python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); d = r["probe_sets"]["cuda"].get("device_timestamps", {})
print(sys.argv[1].rsplit("/", 1)[-1], json.dumps({p: {"stats": v.get("stats"), "pool": v.get("buffer_pool")}
      for p, v in (d.get("processes") or {}).items()})[:600])
PY
done
cp "$OUT/summary.md" "$RESULT_DIR/"; tar czf "$RESULT_DIR/stall-logs.tgz" -C "$OUT" . 2>/dev/null
