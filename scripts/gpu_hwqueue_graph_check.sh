#!/usr/bin/env bash
# Issue 20 on a GPU machine: `queue run --graph`, the launch floors, and ours vs upstream.
#
#   OUT=/some/dir bash scripts/gpu_hwqueue_graph_check.sh
#
# Run in the repository root after `pip install --no-deps --no-index --no-build-isolation -e .`,
# with upstream's wheel in .whl/ (pip download --no-deps amd-aorta==0.3.0 -d .whl). Every
# stage runs (none stops the script) under its time limit (scripts/gpu_stage.sh), writes its
# output under $OUT and is one row of the summary table at the end ($OUT/summary.md). Limits:
# `queue run tiny_kernel_stress --streams 8` took 21 s on the H200, so a `--repeat 3` (three
# fresh processes) needs ~65 s: 150 s (the earlier 40 s killed both, and compare never ran).
set -u
OUT=${OUT:-/tmp/hwqueue-graph}
PY=${PYTHON:-python}
SITE=/tmp/site  # upstream's install, outside $OUT (only measurements come back)
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset CUDA_LAUNCH_BLOCKING
source "$(dirname "$0")/gpu_stage.sh"
T0=$(date +%s)

# bad input must leave no file behind (a row of the table)
no_file() {
  local name=$1 file=$2
  if [ -e "$file" ]; then echo "| $name: no file written | FAIL | $file was written | - | - |" >>"$GPU_STAGE_ROWS"
  else echo "| $name: no file written | PASS | - | - | - |" >>"$GPU_STAGE_ROWS"; fi
}

WHEEL=$(ls .whl/amd_aorta-0.3.0-*.whl 2>/dev/null | head -1)
stage install 60 "$PY" -m pip install --no-deps --no-index --target "$SITE" --upgrade "${WHEEL:-.whl/missing-amd_aorta.whl}"

"$PY" - >"$OUT/gpu.txt" 2>&1 <<'EOF'
import torch
print(torch.__version__, torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(0))
EOF

# the GPU tests only (the CPU ones ran on the development box; the bad_* stages below repeat the
# bad-input cases on this machine)
stage pytest 150 "$PY" -m pytest -q -p no:cacheprovider -rs tests/hwqueue/test_hwqueue_graph.py \
  -k "per_stream_graphs or replay_computes or cross_stream_waits or event_timing"

# with and without --graph, 3 fresh processes each: compare gets run-to-run intervals
stage run_eager 150 "$PY" -m aorta_tui queue run tiny_kernel_stress --streams 8 -i 30 -w 5 \
  --param order=per_stream --repeat 3 -o "$OUT/eager.json"
stage run_graph 150 "$PY" -m aorta_tui queue run tiny_kernel_stress --streams 8 -i 30 -w 5 \
  --param order=per_stream --repeat 3 --graph -o "$OUT/graph.json"
stage compare 30 "$PY" -m aorta_tui queue compare "$OUT/eager.json" "$OUT/graph.json" --no-fail
"$PY" -m aorta_tui queue compare "$OUT/eager.json" "$OUT/graph.json" --no-fail --json \
  >"$OUT/compare.json" 2>>"$OUT/compare.log"

# bad input: exit 2, a clear message, nothing written
stage bad_cpu 60 --want 2 "$PY" -m aorta_tui queue run tiny_kernel_stress --streams 2 --device cpu --graph \
  -o "$OUT/bad_cpu.json"
no_file bad_cpu "$OUT/bad_cpu.json"
stage bad_workload 60 --want 2 "$PY" -m aorta_tui queue run async_dataload --streams 4 --graph \
  -o "$OUT/bad_workload.json"
no_file bad_workload "$OUT/bad_workload.json"
stage bad_blocking 60 --want 2 env CUDA_LAUNCH_BLOCKING=1 "$PY" -m aorta_tui queue run tiny_kernel_stress \
  --streams 2 --graph -o "$OUT/bad_blocking.json"
no_file bad_blocking "$OUT/bad_blocking.json"
stage bad_sweep 60 --want 2 "$PY" -m aorta_tui queue sweep torch_compile --streams 4,8 --graph \
  -o "$OUT/bad_sweep.json"
no_file bad_sweep "$OUT/bad_sweep.json"

# ours vs upstream at 8 streams (alternating rounds) and the tiny_kernel_stress floor table
stage bench 240 "$PY" benchmarks/hwqueue_vs_upstream.py --upstream-site "$SITE" --out "$OUT/bench" \
  --streams 8 --iterations 20 --warmup 3 --throughput-reps 2 --overhead-reps 0 --floor-reps 2

for f in compare.log bench/bench.md; do
  [ -e "$OUT/$f" ] && { echo "== $f"; tail -n 40 "$OUT/$f"; }
done
grep -h "per launch call" "$OUT/run_eager.log" "$OUT/run_graph.log" 2>/dev/null
echo "== summary (total $(( $(date +%s) - T0 )) s)"
summary_table
exit 0
