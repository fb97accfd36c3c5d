#!/usr/bin/env bash
# Issue 13 on a GPU machine: scripts/dispatch_check.py (ground truth, exact counts, the collector's
# build) and benchmarks/dispatch_overhead.py (cost per launch, live lag).
# Usage (device tool, carry .bt): bash scripts/gpu_dispatch_check.sh [check-stages] [bench-rounds] [--lag]
#   check-stages: build,backlog,nobacklog,counts,paced,queue,profiler (comma list)
#   bench-rounds: rounds of the C++ launch-loop cost benchmark (0: none; it stops starting rounds
#   after 120 s whatever the number)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-dispatch-out}; mkdir -p "$OUT"
# at most 8 files come back from $OUT: everything goes to WORK, and $OUT gets the summaries, the
# log and one archive of WORK (files under 8 MiB; the built loop left out)
WORK=/tmp/gpu-dispatch-work; rm -rf "$WORK"; mkdir -p "$WORK"
python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null 2>&1 || echo "pip -e failed"
eval "$(bash scripts/bpftrace-unpack.sh .bt)"
export AORTA_TUI_BPFTRACE=$BPFTRACE
{
  echo "== $(date -u '+%F %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  python3 -c "import torch; print('torch', torch.__version__)"
  python3 scripts/dispatch_check.py --out "$WORK" --stages "${1:-build,backlog,nobacklog,counts}"; echo "rc=$?"
  if [ "${2:-0}" != 0 ]; then
    python3 benchmarks/dispatch_overhead.py --rounds "$2" --budget-s 120 ${3:-} --out "$WORK"; echo "rc=$?"
  fi
} 2>&1 | tee "$OUT/log.txt"
for f in dispatch-check.md dispatch-overhead.md dispatch-overhead.json; do
  [ -f "$WORK/$f" ] && cp "$WORK/$f" "$OUT/"
done
(cd "$WORK" && find . -type f -size -8M ! -name launch_loop -print0 | tar czf "$OUT/dispatch-work.tgz" --null -T -)
