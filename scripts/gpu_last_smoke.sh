#!/usr/bin/env bash
# The shortest GPU proof of this session's untried paths (device time left: ~2.5 minutes):
# per-stream CUDA-graph capture + replay with the launch floors (issue 20), and warm-mode
# trials honouring runtime variables (issue 15), side by side, each under a hard timeout.
# No pip install (no time): the tree is imported through PYTHONPATH. Writes under $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/last-smoke}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
(
  for mode in graph eager; do
    flag=(); [ "$mode" = graph ] && flag=(--graph)
    timeout 28 python3 -m aorta_tui queue run tiny_kernel_stress --streams 8 "${flag[@]}" \
      --output "$OUT/queue-$mode.json" > "$OUT/queue-$mode.log" 2>&1
    echo "queue $mode rc=$?" >> "$OUT/summary.txt"
  done
) &
( timeout 60 python3 scripts/gpu_warm_check.py > "$OUT/warm.log" 2>&1; echo "warm rc=$?" >> "$OUT/summary.txt" ) &
wait
cat "$OUT/summary.txt"; tail -n 12 "$OUT/warm.log"; grep -h "per launch\|floor\|graph" "$OUT"/queue-*.log | head -12
