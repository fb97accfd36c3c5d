#!/usr/bin/env bash
# Issue 34 on one H200, in ONE device call of at most 9.5 minutes: a smoke check of the default
# mode (activity records with latency timestamps) on the backlog program, then
# benchmarks/trace_perturbation.py (training loop, decode loop, C++ launch loop; bare and every
# mode, alternating). Stages and their measured wall times (H200, 2026-12-03):
#   install + bpftrace unpack 5 s (limit 90); smoke 10 s (limit 60);
#   perturbation: budget ARG1 (default 380 s; 430 gave 5 torch rounds of 6 modes and 5 C++ rounds
#   of 4 modes, 420 s) for the rounds, + the last round.
# Needs .bt/ carried (Debian's bpftrace packages). Usage: bash scripts/gpu_trace_perturbation.sh [budget-s] [rounds]
set -uo pipefail
START=$(date +%s)
BUDGET=${1:-380}
ROUNDS=${2:-6}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/pycache
OUT=${OUT:-/tmp/gpu-perturb-out}; mkdir -p "$OUT"
WORK=/tmp/gpu-perturb-work; rm -rf "$WORK"; mkdir -p "$WORK"
{
  echo "== $(date -u '+%F %H:%M UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
  timeout 90 python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null 2>&1 || echo "note: pip install failed"
  bt_env=$(timeout 60 bash scripts/bpftrace-unpack.sh .bt) || { echo "bpftrace unpack failed"; exit 1; }
  printf '#!/bin/sh\n%s\nexec "$BPFTRACE" "$@"\n' "$bt_env" > /tmp/bpftrace-wrapped; chmod +x /tmp/bpftrace-wrapped
  export AORTA_TUI_BPFTRACE=/tmp/bpftrace-wrapped
  echo "== setup done after $(( $(date +%s) - START )) s"
  # smoke: the default mode on the backlog program (a sleep kernel, then 100 tiny ones)
  timeout 60 python3 -m aorta_tui trace queue --probes cuda --device-timestamps on --no-calibrate \
    -o "$WORK/smoke.json" --raw "$WORK/smoke.raw.jsonl.gz" -- python3 scripts/dispatch/backlog.py --tiny 100 \
    > "$WORK/smoke.stdout" 2> "$WORK/smoke.stderr"; echo "smoke rc=$?"
  tail -3 "$WORK/smoke.stdout"; tail -5 "$WORK/smoke.stderr"
  python3 - "$WORK/smoke.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); c = r["probe_sets"]["cuda"]; d = c.get("device_timestamps", {})
print("launch_source", r["launch_source"]["mode"], "| status", d.get("status"))
print("counts", json.dumps(d.get("counts")))
print("per_stream", json.dumps(d.get("per_stream")), "mapped", d.get("streams_mapped"), "refused", d.get("stream_id_lookups_refused"))
print("processes", json.dumps(d.get("processes"))[:1500])
for m in ("launch", "launch_to_start", "launch_push", "launch_gpu_queue", "launch_host", "queued"):
    x = c["metrics"].get(m, {}); print(m, x.get("count"), x.get("lost_events"), json.dumps((x.get("histogram") or {}).get("percentiles")))
print("observer_cost", json.dumps(c.get("observer_cost")))
PY
  echo "== smoke done after $(( $(date +%s) - START )) s"
  left=$(( BUDGET - ($(date +%s) - START) ))
  timeout $(( left + 120 )) python3 benchmarks/trace_perturbation.py --rounds "$ROUNDS" --out "$WORK" --budget-s "$left"
  echo "perturbation rc=$? after $(( $(date +%s) - START )) s"
} 2>&1 | tee "$OUT/log.txt"
cp "$WORK/trace-perturbation.md" "$WORK/trace-perturbation.json" "$WORK/smoke.json" "$WORK/torch-rounds.partial.json" "$OUT/" 2>/dev/null
(cd "$WORK" && find . -type f -size -3M ! -name launch_loop -print0 | tar czf "$OUT/perturb-work.tgz" --null -T -) 2>/dev/null
echo "== all done after $(( $(date +%s) - START )) s"
