#!/usr/bin/env bash
# Issue 4 on a GPU machine: the profiler cross-check, the queue CLI with its default two-pass
# timing, the benchmark against amd-aorta 0.3.0 (wheel carried in .whl/) with the overhead
# table and all fifteen workloads, then the policy check.
# Usage (device tool, carry .whl): bash scripts/gpu_hwqueue_check.sh [budget-seconds]   (writes under $OUT)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-hwqueue-out}; mkdir -p "$OUT"
BUDGET=${1:-560}; T0=$SECONDS
left() { echo $((BUDGET - (SECONDS - T0))); }
python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null 2>&1 || true
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/amd_aorta-*.whl >/dev/null 2>&1 \
  && echo "upstream wheel installed"
{
  echo "== $(date -u '+%F %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  python3 -c "import torch; print('torch', torch.__version__)"
  echo "== cross-check"
  python3 scripts/hwqueue_crosscheck.py --streams 8 --iterations 20 --out "$OUT/xcheck"; echo "rc=$?"
  echo "== queue run (default timing) [$(left)s left]"
  python3 -m aorta_tui queue run hetero_kernels --streams 8 -i 30 -o "$OUT/hetero8.json"; echo "rc=$?"
  python3 -m aorta_tui queue run tiny_kernel_stress --streams 8 -i 30 -o "$OUT/tiny8.json"; echo "rc=$?"
  echo "== benchmark [$(left)s left]"
  python3 benchmarks/hwqueue_vs_upstream.py --streams 8 --iterations 20 --warmup 3 --all \
    --overhead-workloads hetero_kernels,tiny_kernel_stress --upstream-site /tmp/site --out "$OUT/bench"
  echo "rc=$?"
  echo "== policy check [$(left)s left]"
  if [ "$(left)" -gt 150 ]; then
    python3 scripts/policy_check.py --streams 8 --trials 3 --budget-s $(( $(left) - 40 )) --save "$OUT/policy"
    echo "rc=$?"
  else
    echo "skipped: not enough time left"
  fi
  echo "== done [$(left)s left]"
} 2>&1 | tee "$OUT/log.txt"
