#!/usr/bin/env bash
# eBPF integration on a GPU machine: `queue run --ebpf-trace` and a sweep recipe's `trace:`
# section, with bpftrace unpacked from the Debian packages carried in .bt/.
# Usage (device tool, carry .bt): bash scripts/gpu_trace_integration.sh   (writes under $OUT)
# Every stage runs under a time limit (scripts/gpu_stage.sh) and is one row of the summary table.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-trace-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null 2>&1 || true
export PYTHONPATH=$PWD
mkdir -p /tmp/bt && for d in .bt/*.deb; do dpkg -x "$d" /tmp/bt; done
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || true
cat > /tmp/bpftrace <<'SH'
#!/bin/sh
LD_LIBRARY_PATH=/tmp/bt/usr/lib/x86_64-linux-gnu:/tmp/bt/lib/x86_64-linux-gnu exec /tmp/bt/usr/bin/bpftrace "$@"
SH
chmod +x /tmp/bpftrace
export AORTA_TUI_BPFTRACE=/tmp/bpftrace
export AT="python3 -m aorta_tui" OUT AORTA_TUI_BPFTRACE
source "$(dirname "$0")/gpu_stage.sh"
queue_traced() {  # one queue run with --ebpf-trace: ~21 s on the H200, plus the trace's start
  local w=$1
  $AT queue run $w --streams 8 --device cuda --iterations 20 --warmup 3 --ebpf-trace -o /tmp/q-$w.json > /dev/null || return
  python3 - "$w" <<'PY'
import json, sys
r = json.load(open(f"/tmp/q-{sys.argv[1]}.json"))
e = r.get("ebpf") or {}
print("ebpf reason:", r.get("ebpf_reason"), "launch source:", (e.get("launch_source") or {}).get("mode"))
for name, ps in (e.get("probe_sets") or {}).items():
    for mname, m in ps["metrics"].items():
        h = m.get("histogram", {})
        print(f"  {name}.{mname}: count={m.get('count')} p50={h.get('percentiles', {}).get('p50')} "
              f"p99={h.get('percentiles', {}).get('p99')} {m.get('unit')} | {m.get('measures', '')[:90]}")
print("  lost:", e.get("lost_events_reported_by_bpftrace"), "launches per harness:",
      r.get("metrics", {}).get("launches_total") or r.get("summary", {}).get("launches"))
print("  summary:", {k: r["summary"][k] for k in list(r["summary"])[:6]})
PY
}
sweep_traced() {
  cat > /tmp/launch_loop.py <<'PY'
import os, torch
x = torch.zeros(1024, device="cuda")
torch.cuda.synchronize()
for _ in range(5000):
    x.add_(1)
torch.cuda.synchronize()
print("pid", os.getpid(), "value", float(x[0]))
PY
  printf 'schema_version: 1\nmode: probe\nticket: GPUTRACE\ntrials: 1\ntimeout_per_trial: 120\nmitigation_axis: [none]\ndiagnostic_axis: [none]\ntrace: {probes: [cuda], mode: aggregate}\n' > /tmp/t.yaml
  $AT --batch /tmp/t.yaml --output /tmp/at --no-snapshot -- python3 /tmp/launch_loop.py | tail -3
  python3 - <<'PY'
import json, glob
for p in glob.glob('/tmp/at/GPUTRACE/*/trials/*/trial-*/'):
    r = json.load(open(p + 'result.json')); t = json.load(open(p + 'trace.json'))
    pid = int(open(p + 'stdout.log').read().split()[1])
    print('verdict', r['verdict'], 'trace', r['trace'])
    for name, ps in t['probe_sets'].items():
        for mname, m in ps['metrics'].items():
            print(f"  {name}.{mname}: total={m.get('count')} trial pid {pid}: {(m.get('per_pid') or {}).get(str(pid))}")
PY
}
race() {  # six runs of a few seconds each
  for mode in default ddp; do for w in compute comm h2d; do
    $AT run --workload race --steps 20 --config mode=$mode --config drop_wait=$w --config producer_delay_us=200 --no-snapshot --output /tmp/ar 2>&1 | grep -E "corruption|passed|failed|trial" | head -2
  done; done
}
{
  echo "== $(date -u +%F) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  $AT trace info | head -20
  for w in hetero_kernels tiny_kernel_stress; do stage "queue_$w" 90 queue_traced $w; done
  stage sweep_trace 120 sweep_traced
  stage race 180 race
  echo "== summary"
  summary_table
} 2>&1 | tee "$OUT/trace-integration-gpu.txt"
