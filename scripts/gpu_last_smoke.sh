#!/usr/bin/env bash
# The shortest GPU proof of this session's untried paths (device time left: ~2.5 minutes):
# per-stream CUDA-graph capture + replay with the launch floors (issue 20), and warm-mode
# trials honouring runtime variables (issue 15), side by side, each under a hard timeout
# (scripts/gpu_stage.sh) and one row of the summary table.
# No pip install (no time): the tree is imported through PYTHONPATH. Writes under $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/last-smoke}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
export OUT
source "$(dirname "$0")/gpu_stage.sh"
GPU_STAGE_TAIL=0
# `queue run tiny_kernel_stress --streams 8` took 21 s on the H200: 50 s each (the 28 s of
# before left no margin); the two pairs run side by side, so the whole stays under ~2 minutes
(
  stage queue_graph 50 python3 -m aorta_tui queue run tiny_kernel_stress --streams 8 --graph --output "$OUT/queue-graph.json"
  stage queue_eager 50 python3 -m aorta_tui queue run tiny_kernel_stress --streams 8 --output "$OUT/queue-eager.json"
) &
stage warm 100 python3 scripts/gpu_warm_check.py &
wait
tail -n 12 "$OUT/warm.log"; grep -h "per launch\|floor\|graph" "$OUT"/queue_*.log | head -12
summary_table
