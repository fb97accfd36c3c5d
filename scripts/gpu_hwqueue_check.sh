#!/usr/bin/env bash
# Issue 4 on a GPU machine. Stages (default: all of them, in this order):
#   after   profiler after-effect on launches in the same process (benchmarks/profiler_after_effect.py)
#   xcheck  the profiler cross-check (scripts/hwqueue_crosscheck.py), hetero_kernels + tiny_kernel_stress x8
#   cli     queue run / sweep / compare with the default timing, as a user runs them
#   bench   benchmarks/hwqueue_vs_upstream.py against amd-aorta 0.3.0 (its wheel carried in .whl/)
#   all15   the benchmark's --all table of the fifteen workloads
#   policy  scripts/policy_check.py (5 trials: the report needs 4 for an interval)
# Usage (device tool, carry .whl): bash scripts/gpu_hwqueue_check.sh [stage ...]   (writes under $OUT)
# Every stage runs under a time limit (scripts/gpu_stage.sh; `queue run ... --streams 8` took
# 21 s on the H200, each fresh Python with torch 5-6 s) and is one row of the summary table.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-hwqueue-out}; mkdir -p "$OUT"
STAGES=${*:-after xcheck cli bench all15 policy}
python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null 2>&1 || true
export PYTHONPATH=$PWD
export AT="python3 -m aorta_tui" OUT
has() { [[ " $STAGES " == *" $1 "* ]]; }
source "$(dirname "$0")/gpu_stage.sh"
after() {
  python3 benchmarks/profiler_after_effect.py --out "$OUT/after.json" || return
  TEARDOWN_CUPTI=1 python3 benchmarks/profiler_after_effect.py --out "$OUT/after-teardown.json"
}
xcheck() {
  python3 scripts/hwqueue_crosscheck.py --streams 8 --iterations 20 --out "$OUT/xcheck"; local rc=$?
  cp "$OUT/xcheck/crosscheck.md" "$OUT/crosscheck.md" 2>/dev/null
  return $rc
}
cli() {  # four commands, ~21 s each on the H200
  local rc=0
  $AT queue run hetero_kernels --streams 8 -i 30 -o "$OUT/hetero8.json" --profiler-trace /tmp/h8.trace.json || rc=1
  ls -la /tmp/h8.trace.json
  $AT queue run hetero_kernels --streams 8 -i 30 -q -o "$OUT/hetero8b.json" >/dev/null || rc=1
  $AT queue compare "$OUT/hetero8.json" "$OUT/hetero8b.json" || rc=1
  $AT queue sweep tiny_kernel_stress --streams 1,4,16 -i 10 -o "$OUT/tiny-sweep.json" || rc=1
  return $rc
}
bench() {
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/amd_aorta-*.whl >/dev/null 2>&1 \
    && echo "upstream wheel installed"
  python3 benchmarks/hwqueue_vs_upstream.py --streams 8 --iterations 20 --warmup 3 \
    --overhead-workloads hetero_kernels,tiny_kernel_stress --overhead-reps 5 --upstream-site /tmp/site --out "$OUT/bench"
}
all15() {
    python3 - "$OUT" <<'PY'
import json, sys
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.hwqueue.run import run_queue
from aorta_tui.hwqueue.workloads import WORKLOADS
rows = {}
for name in WORKLOADS:
    r = run_queue(QueueRunConfig(workload=name, streams=8, iterations=10, warmup=2, device="cuda", detail_iterations=5))
    s = r["summary"]; t = r["timing"]
    rows[name] = {"summary": s, "kernel_source": t["kernel_source"], "reason": t["kernel_source_reason"],
                  "detail_rel": t["passes"].get("detail_relative_throughput"), "unavailable": r["unavailable"],
                  "dropped": (t["profiler"] or {}).get("implausible_timestamps_dropped")}
    f = lambda v: "n/a" if v is None else f"{v:.4g}"
    print(f"| {name} | {f(s['throughput'])} {r['workload']['throughput_unit']} | {f(s['latency_p50_ms'])} | "
          f"{f(s['achieved_concurrency'])} | {f(s['launch_delay_mean_us'])} | {f(s['switch_overhead_us'])} | "
          f"{t['kernel_source']} | {f(rows[name]['detail_rel'])} |", flush=True)
json.dump(rows, open(sys.argv[1] + "/all15.json", "w"), indent=1, default=str)
PY
}
{
  echo "== $(date -u '+%F %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); stages: $STAGES"
  python3 -c "import torch; print('torch', torch.__version__)"
  # limits: fresh processes of ~6 s start-up each, runs of ~21 s, with 2x margin or more
  has after && stage after 120 after
  has xcheck && stage xcheck 240 xcheck
  has cli && stage cli 240 cli
  has bench && stage bench 420 bench
  has all15 && stage all15 420 all15  # fifteen workloads, ~10-20 s each
  has policy && stage policy 330 python3 scripts/policy_check.py --streams 8 --trials 5 --budget-s 250 --save "$OUT/policy"
  echo "== summary"
  summary_table
} 2>&1 | tee "$OUT/log.txt"
