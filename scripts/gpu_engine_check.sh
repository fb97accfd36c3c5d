#!/usr/bin/env bash
# The engine on a GPU machine: quickstart on CUDA, probe verdicts, the worker's GPU tests and the
# sweep-overhead benchmark against upstream amd-aorta (its wheel carried in .whl/).
# Usage (device tool): bash scripts/gpu_engine_check.sh   (writes under $OUT)
# Every stage runs under a time limit (scripts/gpu_stage.sh) and is one row of the summary table.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-engine-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null 2>&1 || true
export PYTHONPATH=$PWD
if ls .whl/amd_aorta-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/upstream-site .whl/amd_aorta-*.whl >/dev/null 2>&1
  cat > /tmp/aorta <<'SH'
#!/bin/sh
PYTHONPATH=/tmp/upstream-site exec python3 -c 'import sys; from aorta.cli import main; sys.argv[0] = "aorta"; main()' "$@"
SH
  chmod +x /tmp/aorta
  PYTHONPATH=/tmp/upstream-site python3 -c "import aorta" && echo "upstream importable"
fi
export AT="python3 -m aorta_tui" OUT
source "$(dirname "$0")/gpu_stage.sh"
quickstart() {  # measured on the H200: 15.7-17.5 s (docs/performance.md)
  $AT --batch recipes/quickstart.yaml --output /tmp/aq || return
  cat /tmp/aq/QUICKSTART/*/matrix.md
  python3 - <<'PY'
import json, glob
for p in sorted(glob.glob('/tmp/aq/QUICKSTART/*/trials/*/trial-*/result.json')):
    r = json.load(open(p)); w = r['workload_result'] or {}
    print(r['trial_id'], r['verdict'], w.get('device'), w.get('metrics', {}).get('device_name'),
          'tflops=%.2f' % w.get('metrics', {}).get('tflops_mean', 0), 'gpu_peak_mem', r['process'].get('gpu_peak_mem_bytes'),
          r['process'].get('gpu_mem_source'), r['process'].get('gpu_mem_reason'), w.get('applied_switches'))
PY
}
probes() {  # two probe trials of a few seconds each
  printf 'schema_version: 1\nmode: probe\nticket: GPUPROBE\ntrials: 1\ntimeout_per_trial: 60\nmitigation_axis: [none, cuda_launch_blocking]\ndiagnostic_axis: [none]\n' > /tmp/p.yaml
  for cmd in "exit 3" "python3 -c 'import torch; x=torch.zeros(1,device=\"cuda\"); print(x[5])' ; exit 0" ; do
    echo "== probe: $cmd"; $AT --batch /tmp/p.yaml --output /tmp/ap --no-snapshot -- bash -c "$cmd" | tail -4
  done
  python3 - <<'PY'
import json, glob
for p in sorted(glob.glob('/tmp/ap/GPUPROBE/*/trials/*/trial-*/result.json')):
    r = json.load(open(p)); print(p.split('/')[4], r['trial_id'], r['verdict'], [d['id'] for d in r['detections']], r['reason'][:100])
PY
}
{
  echo "== $(date -u +%F) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  python3 -c "import torch, typer; print('torch', torch.__version__, 'typer', typer.__version__)"
  stage quickstart 60 quickstart
  stage probes 120 probes
  stage worker_gpu_tests 240 python3 -m pytest tests/trial tests/classify -q -m gpu -p no:cacheprovider
  stage sweep_overhead 360 env PATH=/tmp:$PATH python3 benchmarks/sweep_overhead.py --upstream /tmp/aorta --repeat 3
  echo "== summary"
  summary_table
} 2>&1 | tee "$OUT/engine-gpu.txt"
