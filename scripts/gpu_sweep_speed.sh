#!/usr/bin/env bash
# Issue 23's GPU proof in one call: the warm-mode variable check, trial_speed on the image as it
# is and with a warmed bytecode cache, and the CPU per-trial overhead (64 probe trials of `true`)
# on this quiet machine. Every stage has a limit measured on the H200, with margin.
# Usage (device tool, carry .whl with amd_aorta-0.3.0, textual, watchfiles, google-re2 wheels):
#   bash scripts/gpu_sweep_speed.sh [warm] [image] [warmed] [overhead]   (default: all; $OUT)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-sweep-speed}; mkdir -p "$OUT"
STAGES=${*:-warm image warmed overhead}
SITE=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/deps \
  $(ls .whl/*.whl | grep -v amd_aorta) >/dev/null 2>&1 || echo "note: wheel install failed"
export PYTHONPATH=/tmp/deps
python3 -m pip install -q --no-deps --no-index --no-build-isolation -e . >/dev/null 2>&1 || echo "note: editable install failed"
python3 -m pip install -q --no-deps --no-index --target "$SITE" .whl/amd_aorta-0.3.0-*.whl >/dev/null 2>&1
printf '#!/bin/sh\nPYTHONPATH=%s:${PYTHONPATH:-} exec python3 -c "import sys; from aorta.cli import main; sys.argv[0] = \\"aorta\\"; main()" "$@"\n' "$SITE" > /tmp/aorta
chmod +x /tmp/aorta
{
  echo "== $(date -u '+%F %T UTC') $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE-unset} nproc=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg)"
  python3 -c "import torch; print('torch', torch.__version__, torch.__file__)"
} 2>&1 | tee "$OUT/env.txt"
export OUT
source "$(dirname "$0")/gpu_stage.sh"
GPU_STAGE_TAIL=40
pick() {  # pick NAME LIMIT_S CMD...: a stage, when it was asked for
  case " $STAGES " in *" $1 "*) stage "$@" ;; *) return 0 ;; esac
}
pick warm 200 python3 scripts/gpu_warm_check.py
pick image 230 python3 benchmarks/trial_speed.py --bytecode image --rounds 2 --budget 200 --upstream "$SITE"
pick warmed 150 python3 benchmarks/trial_speed.py --bytecode warmed --rounds 2 --budget 120 --upstream "$SITE"
pick overhead 170 python3 benchmarks/sweep_overhead.py --upstream /tmp/aorta --repeat 3 --trials 4,16,32
summary_table
ls -la "$OUT"
