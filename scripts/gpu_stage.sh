# Sourced by scripts/gpu_*.sh (issue 24 item 4): every stage of a GPU script under a time limit,
# and one summary table at the end, whatever failed.
#
#   OUT=... ; source scripts/gpu_stage.sh
#   stage NAME LIMIT_S [--want RC] CMD...   # output in $OUT/NAME.log, its tail on the console;
#                                           # CMD may be a shell function (run in a child bash:
#                                           # export the variables it uses)
#   summary_table                           # | stage | verdict | exit | wall | limit |, also $OUT/summary.md
#
# A stage is killed at LIMIT_S (SIGTERM, SIGKILL 10 s later) and reads TIMEOUT; PASS when it
# exited with the wanted code (default 0), FAIL otherwise. Limits come from what was measured on
# the H200 (../shared/docs/GPU-NOTES.md: a fresh Python with torch and a first CUDA tensor
# 5.4-6.1 s; `queue run tiny_kernel_stress --streams 8` 21 s; `--repeat 3` three times that) with
# at least 2x margin; the table prints each stage's wall time beside its limit, so a limit can be
# re-set from the last run's figure. Rows go through a file, so stages run in the background
# (gpu_last_smoke.sh) are in the table too.
GPU_STAGE_ROWS=${GPU_STAGE_ROWS:-$OUT/.stage-rows}
: >"$GPU_STAGE_ROWS"

stage() {
  local name=$1 limit=$2 want=0 start rc wall verdict
  shift 2
  if [ "${1:-}" = "--want" ]; then want=$2; shift 2; fi
  if declare -F "$1" >/dev/null; then  # timeout runs programs: a function runs in a child bash
    export -f "$1"
    set -- bash -c "$(printf '%q ' "$@")"
  fi
  start=$(date +%s)
  echo "== stage $name (limit ${limit}s) $(date -u +%T)"
  timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  wall=$(( $(date +%s) - start ))
  verdict=FAIL
  [ "$rc" = "$want" ] && verdict=PASS
  if [ "$want" != 124 ] && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then verdict=TIMEOUT; fi
  tail -n "${GPU_STAGE_TAIL:-15}" "$OUT/$name.log"
  echo "| $name | $verdict | $rc (want $want) | ${wall} s | ${limit} s |" >>"$GPU_STAGE_ROWS"
  echo "== stage $name: $verdict (exit $rc, ${wall} s of ${limit} s)"
  return 0
}

summary_table() {
  {
    echo "| stage | verdict | exit (wanted) | wall | limit |"
    echo "|---|---|---|---|---|"
    cat "$GPU_STAGE_ROWS"
  } | tee "$OUT/summary.md"
}
