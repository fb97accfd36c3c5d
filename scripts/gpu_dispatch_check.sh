#!/usr/bin/env bash
# Issue 13 on a GPU machine: scripts/dispatch_check.py (ground truth, exact counts, the collector's
# build) and benchmarks/dispatch_overhead.py (cost per launch, live lag).
# Usage (device tool, carry .bt): bash scripts/gpu_dispatch_check.sh [check-stages] [bench-reps]
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-dispatch-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null 2>&1 || echo "pip -e failed"
eval "$(bash scripts/bpftrace-unpack.sh .bt)"
export AORTA_TUI_BPFTRACE=$BPFTRACE
{
  echo "== $(date -u '+%F %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  python3 -c "import torch; print('torch', torch.__version__)"
  python3 scripts/dispatch_check.py --out "$OUT" --stages "${1:-build,backlog,nobacklog,counts}"; echo "rc=$?"
  if [ "${2:-0}" != 0 ]; then
    python3 benchmarks/dispatch_overhead.py --reps "$2" --lag --out "$OUT"; echo "rc=$?"
  fi
} 2>&1 | tee "$OUT/log.txt"
