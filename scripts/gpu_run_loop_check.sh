#!/usr/bin/env bash
# Issue 36 on the GPU: all three engines now run on trial/run_loop.py (the recipe sweep's
# orchestrator joined the policy and queue sweeps). This runs each on the real CUDA path, as a
# user runs it, every stage under a limit (gpu_stage.sh).
# Usage (device tool): bash scripts/gpu_run_loop_check.sh
# Stages: install 60 s; sweep_stop_resume 150 s (quickstart.yaml, 6 gpu_smoke trials of ~5 s
# each, a Ctrl-C after the first trial, then --resume); policy 90 s (2 policies x 1 trial of
# tiny_kernel_stress, ~10 s each); queue_sweep 90 s (2 points). Wheels in .whl/ (google-re2,
# watchfiles: not in the device image) go to /tmp/site first.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
RESULT_DIR=${OUT:-/tmp/gpu-loop-result}; mkdir -p "$RESULT_DIR"
export OUT=/tmp/gpu-loop-out; rm -rf "$OUT"; mkdir -p "$OUT"
source "$(dirname "$0")/gpu_stage.sh"
WORK=/tmp/gpu-loop-work; rm -rf "$WORK"; mkdir -p "$WORK"; export WORK
export RECIPE=$PWD/recipes/quickstart.yaml
install() {
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || return 1
  fi
  python3 -m pip install -q --no-deps --no-index --no-build-isolation -e .
}
export PYTHONPATH=/tmp/site
sweep_stop_resume() {
  cd "$WORK" && python3 - <<'PY'
import json, os, signal, subprocess, sys, pathlib
# a Ctrl-C (SIGINT) once the first trial is finished: the run stops cleanly (exit 130)
p = subprocess.Popen([sys.executable, "-m", "aorta_tui", "sweep", "run", "--recipe", os.environ["RECIPE"],
                      "--json"], stdout=subprocess.PIPE, text=True)
run_dir = None
for line in p.stdout:
    ev = json.loads(line)
    run_dir = ev.get("run_dir", run_dir)
    if ev.get("event") == "trial_finished":
        print("first trial:", ev["trial_id"], ev["verdict"], f"{ev['wall_s']:.2f} s")
        p.send_signal(signal.SIGINT)
        break
rest = p.stdout.read(); rc = p.wait()
print("stopped: exit", rc)
runs = sorted(pathlib.Path("aorta-out").glob("*/*/journal.jsonl"))
run = runs[-1].parent
r = subprocess.run([sys.executable, "-m", "aorta_tui", "sweep", "run", "--resume", str(run)],
                   capture_output=True, text=True)
print("resume: exit", r.returncode); print(r.stdout[-1500:]); print(r.stderr[-800:])
events = [json.loads(l) for l in (run / "journal.jsonl").read_text().splitlines() if l.strip()]
starts = [e for e in events if e["event"] == "run_started"]
print("sessions:", [(s["resumed"], s["already_done"], s["total"]) for s in starts])
finished = [e["trial_id"] for e in events if e["event"] == "trial_finished"]
print("trial_finished lines:", len(finished), "distinct:", len(set(finished)))
print("results:", len(list(run.glob("trials/*/trial-*/result.json"))),
      "retired:", sorted(str(p.relative_to(run)) for p in run.glob("trials/*/*.interrupted-*")))
m = json.loads((run / "matrix.json").read_text())
print("matrix status:", m.get("status"), {c["cell"]: (c["passed"], c["failed"], c["errored"]) for c in m["cells"]})
ok = rc == 130 and r.returncode in (0, 1) and len(set(finished)) == 6 and len(starts) == 2
sys.exit(0 if ok else 1)
PY
}
policy() {
  cd "$WORK" && python3 -m aorta_tui policy sweep tiny_kernel_stress \
    --policies cuda_graphs -k 1 -i 20 --streams 4 -o "$WORK/policy" &&
  python3 -c "
import json; d=json.load(open('$WORK/policy/policy.json'))
print(d['status'], [(p.get('name'), p.get('trials')) for p in d['policies']], d['failed_trials'])"
}
queue_sweep() { cd "$WORK" && python3 -m aorta_tui queue sweep tiny_kernel_stress --streams 1,4 -i 20 --run-dir "$WORK/qs" -o "$WORK/qs.json" && python3 -c "
import json; d=json.load(open('$WORK/qs.json')); print({k: d[k] for k in d if k in ('knee','kind')}, len(d.get('points') or []))"; }
export -f install sweep_stop_resume policy queue_sweep
stage install 60 install
stage sweep_stop_resume 150 sweep_stop_resume
stage policy 90 policy
stage queue_sweep 90 queue_sweep
summary_table
cp "$OUT"/*.log "$OUT/summary.md" "$RESULT_DIR/" 2>/dev/null
