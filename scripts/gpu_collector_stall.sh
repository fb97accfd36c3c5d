#!/usr/bin/env bash
# The CUPTI collector deadlocked a real training loop (H200, 2026-12-04): `trace queue --probes cuda
# -- python3 train.py 600` (scripts/gpu_privsep_check.sh's 6-layer encoder, ~450 launches a step)
# stopped in backward after ~400 steps. This bisect found it (docs/tracing.md, "The collector
# deadlocked a long training loop"): latency timestamps together with memcpy/memset records; the
# collector now asks for kernel records only while latency timestamps are on. Rerun it after a
# CUPTI or driver upgrade, or to check the fix.
#
# Each variant runs the training loop under the trace with a time limit (a finishing 600-step run
# takes ~25 s with torch's start); a `default` run still going after the limit gets its native
# stacks dumped (cuda-gdb: the image has no gdb) before it is stopped. Variants:
#   off        --device-timestamps off (control: must finish)
#   default    the default mode
#   nolatency  AORTA_CUPTI_LATENCY=0 (memcpy/memset records come with it)
#   kernels    AORTA_CUPTI_KINDS=kernel;  nomemset  AORTA_CUPTI_KINDS=kernel,memcpy
#   flush20    AORTA_CUPTI_FLUSH_MS=20;   kernels20 kernel records and a 20 ms flush
#   periodic   AORTA_CUPTI_FLUSH=cupti (CUPTI's worker flushes, never the collector's thread)
#   callback   --launch-source collector (the launch callback as well)
#   bare       the program with no tracer at all
# NAME.2 runs a variant again under its own stage name; NAME@2000 runs 2000 steps.
# Usage (device tool, carry .bt .whl): bash scripts/gpu_collector_stall.sh [variants, comma-separated]
# Measured 2026-12-04: 5 variants of 600 steps + install ~265 s.
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
  env "${envs[@]}" PYTHONFAULTHANDLER=1 AORTA_TUI_BPFTRACE=/tmp/bpftrace python3 -m aorta_tui trace queue --probes cuda \
    --no-calibrate -o "$OUT/$name.json" "$@" -- python3 train.py "${STEPS:-600}"
}
off() { traced off -- --device-timestamps off; }
# the default variant stalled: where the program waits, once it has run 35 s (a finishing run
# takes ~20 s): every thread's kernel wait channel, then cuda-gdb's native stacks (the image has
# no gdb; cuda-gdb attaches to programs as root)
sweep_up() {  # a stalled variant's processes, so the next variant runs alone on the GPU
  pkill -TERM -f "aorta_tui trace queue"; sleep 3
  pkill -KILL -f "aorta_tui trace queue"; pkill -KILL -f "python3 train.py"; pkill -KILL -f bpftrace
  sleep 1
}
native_stacks() {  # TOOL_PID: the trace's tool; nothing to do once it has ended
  local i pid
  for i in $(seq "$STACK_AFTER"); do kill -0 "$1" 2>/dev/null || { echo "finished within $STACK_AFTER s"; return; }; sleep 1; done
 pid=$(pgrep -n -f "python3 train.py") || { echo "no train.py left: finished"; return; }
  echo "train.py pid $pid still running after $STACK_AFTER s"
  for t in /proc/"$pid"/task/*; do echo "$(basename "$t") $(cat "$t"/comm) $(cat "$t"/wchan) $(cut -d' ' -f3 "$t"/stat)"; done
  timeout 60 cuda-gdb -batch -p "$pid" -ex "set pagination off" -ex "thread apply all bt 16" 2>&1 | grep -v '^\[New Thread\|^Reading symbols' | head -400
}
default() {
  traced default -- & local tool=$!
  native_stacks "$tool" > "$OUT/default-stacks.txt" 2>&1
  kill -0 "$tool" 2>/dev/null && { echo "stalled: stopped after the stack dump"; sweep_up; return 124; }
  wait "$tool"
}
nolatency() { traced nolatency AORTA_CUPTI_LATENCY=0 --; }
kernels() { traced kernels AORTA_CUPTI_KINDS=kernel --; }
flush20() { traced flush20 AORTA_CUPTI_FLUSH_MS=20 --; }
callback() { traced callback -- --launch-source collector; }
# second round (14:35): kernels-only finished, so the memcpy/memset records are in it; the stalled
# stack had the program in cuMemsetD8Async (a driver write lock), CUPTI's worker in a read lock
# and our flush thread in cuptiActivityFlushAll
periodic() { traced periodic AORTA_CUPTI_FLUSH=cupti --; }           # CUPTI's worker flushes, not us
nomemset() { traced nomemset AORTA_CUPTI_KINDS=kernel,memcpy --; }   # memcpy records, no memset
kernels20() { traced kernels20 AORTA_CUPTI_KINDS=kernel AORTA_CUPTI_FLUSH_MS=20 --; }
# the control of the control: `off` died of SIGSEGV after ~470 steps on 2026-12-04 14:32 (uprobes
# only, no collector); the same program with no tracer at all
bare() { cd /home/aorta-gpu/work && PYTHONFAULTHANDLER=1 python3 train.py "${STEPS:-600}"; }
export -f sweep_up native_stacks traced off default nolatency kernels flush20 callback periodic nomemset kernels20 bare
for v in ${VARIANTS//,/ }; do
  # off.2 runs off again, under a stage name of its own; default@2000 runs 2000 steps (~35 s more)
  fn=${v%%.*}; fn=${fn%%@*}; export STEPS=600; [[ $v == *@* ]] && STEPS=${v##*@}
  limit=$(( 50 + (STEPS - 600) / 40 )); export STACK_AFTER=$(( limit - 15 ))
  [ "$fn" = default ] && limit=$(( limit + 60 ))  # room for the stack dump
  GPU_STAGE_TAIL=6 stage "${v//@/-}" "$limit" "$fn"
  sweep_up 2>/dev/null
  dmesg 2>/dev/null | grep -i -E "segfault|general protection|trap" | tail -n 3
done
echo "== default's stacks"; head -c 6000 "$OUT/default-stacks.txt" 2>/dev/null
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
