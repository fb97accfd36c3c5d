#!/usr/bin/env bash
# Issue 33 on the GPU machine: `sudo aorta-tui trace queue --probes cuda -- python train.py` and the
# TUI's trace monitor, run as root with the SUDO_* variables sudo sets for a real second user
# (made here), checking that only the privileged helper and bpftrace run as root: the tool, the
# traced training loop and the TUI run as the user.
# Usage (device tool, carry .bt): bash scripts/gpu_privsep_check.sh   (writes under $OUT)
# Stages and their limits: install 180 s; bare_user 60; trace_root 90; trace_user_nocollector 90;
# trace_cli 150; readback 30; tui 180 (PRIVSEP_STAGES picks some). Carry .whl too (textual, watchfiles, ...: the image lacks them).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# at most 8 files come back from the device's $OUT: the stages write to a folder of their own, and
# $OUT gets the summary and one archive of it
RESULT_DIR=${OUT:-/tmp/gpu-privsep-result}; mkdir -p "$RESULT_DIR"
export OUT=/tmp/gpu-privsep-out; rm -rf "$OUT"; mkdir -p "$OUT"; chmod 755 "$OUT"
source "$(dirname "$0")/gpu_stage.sh"

# The user must be able to read the tool and run the interpreter: a copy of the tree under /opt.
install() {
  set -e
  id aorta-gpu >/dev/null 2>&1 || useradd -m -s /bin/bash aorta-gpu
  rm -rf /opt/aorta-src && cp -a . /opt/aorta-src && chmod -R a+rX /opt/aorta-src
  cd /opt/aorta-src
  python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null 2>&1
  # the TUI's packages the machine's image lacks (textual, watchfiles, ...), carried as wheels in
  # .whl: installed where the second user can read them
  if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /opt/aorta-site .whl/*.whl
    chmod -R a+rX /opt/aorta-site
  fi
  mkdir -p /tmp/bt && for d in .bt/*.deb; do dpkg -x "$d" /tmp/bt; done
  mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || true
  printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/bt/usr/lib/x86_64-linux-gnu:/tmp/bt/lib/x86_64-linux-gnu exec /tmp/bt/usr/bin/bpftrace "$@"\n' > /tmp/bpftrace
  chmod 755 /tmp/bpftrace
  mkdir -p /home/aorta-gpu/work && cat > /home/aorta-gpu/work/train.py <<'PY'
# A real training loop: a 6-layer transformer encoder, AdamW, bf16 autocast.
import faulthandler, os, sys, time, torch
# a Python stack every 20 s on stderr: a loop that never finishes says where it is
faulthandler.dump_traceback_later(20, repeat=True)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
print("train uid", os.getuid(), "euid", os.geteuid(), "pid", os.getpid(), flush=True)
layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
model = torch.nn.TransformerEncoder(layer, 6).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(16, 128, 512, device="cuda")
t0 = time.perf_counter()
for i in range(steps):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    if i % 50 == 49:
        torch.cuda.synchronize()
        print(f"step {i + 1} at {time.perf_counter() - t0:.2f} s", flush=True)
torch.cuda.synchronize()
print(f"train done {steps} steps {(time.perf_counter() - t0) / steps * 1e3:.2f} ms/step", flush=True)
PY
  chown -R aorta-gpu: /home/aorta-gpu
  python3 -c "import sys; print(sys.executable)"; ls -ld "$(dirname "$(python3 -c 'import sys; print(sys.executable)')")"
}

sudo_env() {  # what sudo sets for the user; the rest of the environment is root's
  echo "PYTHONPATH=/opt/aorta-site SUDO_UID=$(id -u aorta-gpu) SUDO_GID=$(id -g aorta-gpu) SUDO_USER=aorta-gpu AORTA_TUI_BPFTRACE=/tmp/bpftrace"
}

# every process of the tool's tree with its uid, sampled while it runs
watch_tree() {
  local root=$1 out=$2
  while kill -0 "$root" 2>/dev/null; do
    ps -eo pid,ppid,uid,stat,wchan:24,args --forest | awk -v r="$root" 'BEGIN{keep[r]=1} {if (keep[$2]||$1==r){keep[$1]=1; print}}' >> "$out"
    echo --- >> "$out"; sleep 2
  done
}

trace_cli() {
  cd /home/aorta-gpu/work
  # the tool's stderr kept, and ps with each process's state and wait channel: the run of
  # 2026-12-03 never finished and left no clue where it waited
  # -o where the user can write: the tool writes as the user (a root-only -o is refused first)
  env $(sudo_env) python3 -m aorta_tui trace queue --probes cuda -o "$PWD/trace.json" -- python3 train.py ${TRAIN_STEPS:-600} \
    2> "$OUT/trace_stderr.txt" &
  local pid=$!
  watch_tree "$pid" "$OUT/trace_tree.txt" &
  wait "$pid"; local rc=$?
  echo "exit $rc"; tail -30 "$OUT/trace_stderr.txt"
  cp trace.json "$OUT/" 2>/dev/null
  python3 - "$OUT/trace.json" "$OUT/trace_tree.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("keys:", sorted(r)[:20])
for name, ps in (r.get("probe_sets") or {}).items():
    for m, v in (ps.get("metrics") or {}).items():
        print(f"  {name}.{m}: count={v.get('count')} p50={(v.get('histogram') or {}).get('percentiles', {}).get('p50')}")
print("observer:", json.dumps(r.get("observer_cost"))[:300])
uids = {}
for line in open(sys.argv[2]):
    f = line.split(None, 5)  # pid ppid uid stat wchan args
    if len(f) == 6 and f[2].isdigit():
        uids.setdefault(f[2], set()).add(f"{f[5].strip()[:60]} [{f[3]} {f[4]}]")
for uid, cmds in sorted(uids.items()):
    print("uid", uid, "ran:", sorted(cmds)[:12])
PY
  return $rc
}

# where a traced training loop's time goes: the same 200 steps bare as the user, traced as root
# alone, traced through the helper without the CUPTI collector, and (trace_cli) with it
bare_user() {
  cd /home/aorta-gpu/work && su aorta-gpu -s /bin/sh -c "$(command -v python3) train.py 200"
}
trace_root() {
  cd /home/aorta-gpu/work && AORTA_TUI_BPFTRACE=/tmp/bpftrace python3 -m aorta_tui trace queue --probes cuda --no-calibrate -o "$OUT/trace_root.json" -- python3 train.py 200
}
trace_user_nocollector() {
  cd /home/aorta-gpu/work
  env $(sudo_env) python3 -m aorta_tui trace queue --probes cuda --no-calibrate --device-timestamps off -o /tmp/trace_nocoll.json -- python3 train.py 200
}

tui() {
  cd /home/aorta-gpu/work
  local s=aorta-gpu-tui T="tmux -L privsep"
  # the pane kept after an exit: a TUI that stops at once leaves its message there. Its stderr
  # stays on the pane: Textual renders on stderr (2026-12-04 a redirect captured every frame)
  $T new-session -d -s $s -x 160 -y 48 "env $(sudo_env) TERM=xterm-256color python3 -m aorta_tui; echo \"tui exit \$?\"; sleep 600"
  sleep 8; $T capture-pane -p -t $s > "$OUT/tui_first.txt" 2>&1; tail -5 "$OUT/tui_first.txt"
  sleep 1; $T send-keys -t $s 4; sleep 3; $T send-keys -t $s t; sleep 1
  $T send-keys -t $s -l "python3 train.py 3000"; $T send-keys -t $s Enter; sleep 1
  $T send-keys -t $s Escape; sleep 1; $T send-keys -t $s s
  local pane; pane=$($T display-message -p -t $s '#{pane_pid}')
  for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    sleep 5
    ps -eo pid,ppid,uid,args --forest | awk -v r="$pane" 'BEGIN{keep[r]=1} {if (keep[$2]||$1==r){keep[$1]=1; print}}' > "$OUT/tui_tree.txt"
    $T capture-pane -p -t $s > "$OUT/tui_pane.txt"
    grep -q "launch" "$OUT/tui_pane.txt" && [ $i -ge 6 ] && break
  done
  cat "$OUT/tui_pane.txt"; echo; cat "$OUT/tui_tree.txt"
  $T send-keys -t $s s; sleep 5; $T send-keys -t $s C-q; sleep 3; $T kill-server 2>/dev/null
  # root may hold exactly one process of the tool's tree besides bpftrace: the helper (a fork)
  local roots; roots=$(awk '$3 == 0' "$OUT/tui_tree.txt" | grep -vc bpftrace)  # $3: uid
  echo "root processes other than bpftrace: $roots (want 1, the helper)"
  [ "$roots" = 1 ] || return 1
  grep -q "launch" "$OUT/tui_pane.txt"
}

# each trace's -o document read back through its type (trace/result_doc.py) to the same bytes,
# and which source each metric's records came from: the collector's (trace_root, trace_cli) and
# the eBPF-only one (trace_user_nocollector)
readback() {
  python3 - "$OUT/trace_root.json" /tmp/trace_nocoll.json "$OUT/trace.json" <<'PY'
import json, sys
from aorta_tui.trace.result_doc import read_trace_result
bad = 0
for path in sys.argv[1:]:
    try:
        result = read_trace_result(path)
    except Exception as exc:  # a missing file (its stage failed) or a reader error
        print(f"{path}: {type(exc).__name__}: {exc}"); bad += 1; continue
    same = json.dumps(result.to_json()) == json.dumps(json.load(open(path)))
    kinds = sorted({f"{n}.{m}:{type(v.records).__name__}" for n, s in result.probe_sets.items()
                    for m, v in s.metrics.items() if v.summary.count})
    src = result.launch_source.mode if result.launch_source else None
    print(f"{path}: same bytes {same}; launches from {src}; metrics with records: {', '.join(kinds)}")
    bad += not same
sys.exit(1 if bad else 0)
PY
}

export -f sudo_env watch_tree
# PRIVSEP_STAGES picks stages (e.g. "trace_root,trace_cli,readback,tui"); install always runs
STAGES=${PRIVSEP_STAGES:-bare_user,trace_root,trace_user_nocollector,trace_cli,readback,tui}
wanted() { [[ ",$STAGES," == *",$1,"* ]]; }
stage install 180 install
[ "${1:-}" = --install-only ] && exit 0
cd /opt/aorta-src
wanted bare_user && stage bare_user 60 bare_user
wanted trace_root && stage trace_root 90 trace_root
wanted trace_user_nocollector && stage trace_user_nocollector 90 trace_user_nocollector
wanted trace_cli && stage trace_cli 150 trace_cli
wanted readback && stage readback 30 readback
wanted tui && stage tui 180 tui
summary_table
cp "$OUT/summary.md" "$RESULT_DIR/"
tar czf "$RESULT_DIR/privsep-logs.tgz" -C "$OUT" . 2>/dev/null
