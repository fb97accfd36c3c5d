#!/usr/bin/env bash
# mode: sanitizer on a CUDA GPU (issue 14): a planted out-of-bounds write must be found by
# memcheck, a planted shared-memory race by racecheck, and a clean kernel must pass all four
# tools (memcheck, racecheck, synccheck, initcheck), each through `aorta-tui sweep run --recipe`
# of a `mode: sanitizer` recipe (collect/sanitizer.py). Optionally (stage torch) a gpu_smoke trial
# under memcheck. Every stage runs and reports; results: $OUT/sanitizer_summary.json,
# $OUT/sanitizer_check.log. Under 3 minutes on an H200.
#
#   OUT=/tmp/out bash scripts/gpu_sanitizer_check.sh
set -u
OUT=${OUT:-/tmp/gpu-sanitizer-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/gpu-sanitizer.XXXXXX)
LOG="$OUT/sanitizer_check.log"
: >"$LOG"
say() { echo "$*" | tee -a "$LOG"; }
source "$(dirname "$0")/gpu_stage.sh"  # the summary table (rows below)

# nvcc and compute-sanitizer live in the CUDA toolkit's bin
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
  [ -x "$d/nvcc" ] && export PATH="$PATH:$d" && break
done
NVCC=$(command -v nvcc || true)
say "nvcc: ${NVCC:-missing}; compute-sanitizer: $(command -v compute-sanitizer || echo missing)"
compute-sanitizer --version 2>&1 | tail -1 | tee -a "$LOG"

cat >"$WORK/oob.cu" <<'EOF'
#include <cstdio>
#include <cuda_runtime.h>
// planted: 32 threads more than the buffer has elements write past its end
__global__ void oob_write(int *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  p[i] = i;
}
int main() {
  const int n = 256;
  int *d = nullptr;
  cudaMalloc(&d, n * sizeof(int));
  oob_write<<<1, n + 32>>>(d, n);
  printf("oob: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  cudaFree(d);
  return 0;
}
EOF
cat >"$WORK/race.cu" <<'EOF'
#include <cstdio>
#include <cuda_runtime.h>
// planted: each thread reads its neighbour's shared slot with no __syncthreads() between
// the write and the read (the neighbour may be in another warp)
__global__ void smem_race(int *out) {
  __shared__ int s[256];
  s[threadIdx.x] = threadIdx.x;
#ifdef CLEAN
  __syncthreads();
#endif
  out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}
int main() {
  int *d = nullptr;
  cudaMalloc(&d, 256 * sizeof(int));
  smem_race<<<1, 256>>>(d);
  printf("race: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  cudaFree(d);
  return 0;
}
EOF
compile() {  # name, source, extra flags
  if "$NVCC" -O1 -lineinfo -o "$WORK/$1" "$WORK/$2" "${@:3}" >>"$LOG" 2>&1; then
    say "compiled $1"
  else
    say "COMPILE FAILED: $1"
  fi
}
if [ -n "$NVCC" ]; then
  compile oob oob.cu
  compile race race.cu
  compile clean race.cu -DCLEAN
fi

recipe() {  # file, ticket, tools (comma list), argv (json list)
  cat >"$WORK/$1.yaml" <<EOF
schema_version: 1
mode: sanitizer
ticket: $2
sanitizer_plan:
  target: cuda
  source:
    kind: command
    argv: $4
  sanitizers: [$3]
  policy:
    on_missing_backend: fail
    timeout_seconds: ${5:-60}
EOF
}
recipe oob GPU-SAN-OOB memcheck "[\"$WORK/oob\"]"
recipe race GPU-SAN-RACE racecheck "[\"$WORK/race\"]"
recipe clean GPU-SAN-CLEAN "memcheck, racecheck, synccheck, initcheck" "[\"$WORK/clean\"]"
recipe torch GPU-SAN-TORCH memcheck "[\"$PY\", \"-m\", \"aorta_tui\", \"run\", \"--workload\", \"gpu_smoke\", \"--steps\", \"1\", \"--no-snapshot\", \"-o\", \"$WORK/torch-out\"]" 100

declare -A RC
for stage in oob race clean torch; do
  [ "$stage" = torch ] && [ -n "${SKIP_TORCH:-}" ] && continue
  start=$(date +%s)
  timeout 150 "$PY" -m aorta_tui sweep run --recipe "$WORK/$stage.yaml" -o "$WORK/runs" \
    >>"$LOG" 2>&1
  RC[$stage]=$?
  wall=$(( $(date +%s) - start ))
  say "stage $stage: exit ${RC[$stage]} in $wall s"
  want=0; case $stage in oob|race) want=1 ;; esac  # a planted bug fails its trial: exit 1
  verdict=FAIL; [ "${RC[$stage]}" = "$want" ] && verdict=PASS; [ "${RC[$stage]}" = 124 ] && verdict=TIMEOUT
  echo "| $stage | $verdict | ${RC[$stage]} (want $want) | $wall s | 150 s |" >>"$GPU_STAGE_ROWS"
done

"$PY" - "$WORK" "$OUT" "${RC[oob]:-}" "${RC[race]:-}" "${RC[clean]:-}" "${RC[torch]:-}" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
rcs = dict(zip(("oob", "race", "clean", "torch"), sys.argv[3:]))
reports = {}
for stage, ticket in (("oob", "GPU-SAN-OOB"), ("race", "GPU-SAN-RACE"),
                      ("clean", "GPU-SAN-CLEAN"), ("torch", "GPU-SAN-TORCH")):
    found = sorted((work / "runs" / ticket).glob("*/sanitizer_report.json"))
    rep = json.loads(found[-1].read_text()) if found else None
    logs = {}
    if found:
        for c in rep["checks"]:
            if c.get("log"):
                text = (found[-1].parent / c["log"]).read_text(errors="replace")
                logs[c["sanitizer"]] = text[-4000:]
    reports[stage] = {"exit": rcs.get(stage), "report": rep, "log_tails": logs}
def check(stage, tool):
    rep = reports[stage]["report"]
    return next((c for c in rep["checks"] if c["sanitizer"] == tool), None) if rep else None
results = {}
c = check("oob", "memcheck")
results["oob found by memcheck"] = bool(c and c["verdict"] == "fail" and c["first"]
                                        and c["first"]["kind"] == "invalid_global_write"
                                        and "oob.cu" in (c["first"]["source"] or ""))
c = check("race", "racecheck")
results["race found by racecheck"] = bool(c and c["verdict"] == "fail" and c["first"]
                                          and c["first"]["kind"] == "race")
for tool in ("memcheck", "racecheck", "synccheck", "initcheck"):
    c = check("clean", tool)
    results[f"clean passes {tool}"] = bool(c and c["verdict"] == "pass")
results["exit codes oob=1 race=1 clean=0"] = (rcs.get("oob"), rcs.get("race"),
                                              rcs.get("clean")) == ("1", "1", "0")
c = check("torch", "memcheck")
torch_line = f"torch gpu_smoke trial under memcheck: {c['verdict'] if c else 'no report'}" + (
    f" ({c['reason'][:200]})" if c else "")
summary = {"results": results, "torch_stage": torch_line, "stages": reports}
(out / "sanitizer_summary.json").write_text(json.dumps(summary, indent=2))
for k, v in results.items():
    print(("PASS " if v else "FAIL ") + k)
for stage in ("oob", "race"):
    c = check(stage, "memcheck" if stage == "oob" else "racecheck")
    if c:
        print(f"  {stage}: {c['reason'][:300]}")
print(torch_line)
print(f"overall: {'PASS' if all(results.values()) else 'FAIL'}")
EOF
summary_table
rm -rf "$WORK"
