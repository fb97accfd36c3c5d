#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs all of it.
# Run as root on the CI/development box: it installs Debian's bpftrace (the tracing tests use the
# real thing), mounts tracefs, and builds .venv with aorta-tui, the test tools and a CPU torch.
set -euo pipefail
cd "$(dirname "$0")/.."

# --fast: the developer's loop on an already built .venv: no installs, the unit tier only
# (tests marked slow: real tmux, Slurm, several ranks, bpftrace, crash points, and every test
# measured at >= 1.5 s on this 2-core box, mostly the real CLI in a subprocess; and gpu) spread
# over the cores by pytest-xdist: 2 min 50 s here (2026-12-04, was 11 min 42 s). CI (.ci/run, no
# arguments) installs and runs everything, in the two tiers below.
if [ "${1:-}" = "--fast" ]; then
  shift
  .venv/bin/ruff check aorta_tui tests benchmarks
  .venv/bin/lint-imports --no-cache
  bash scripts/typecheck.sh  # mypy (zero errors) and the count of bare Any
  exec .venv/bin/pytest -q -n "${AORTA_TEST_WORKERS:-2}" --dist loadgroup \
    -m "not slow and not bpftrace and not gpu" --durations=15 "$@"
fi

# prometheus: the real server the --metrics tests scrape with (tests/metrics)
APT_PACKAGES="bpftrace tmux gcc libc6-dev libamdhip64-5 prometheus"

if [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # no package may start a service here (prometheus's postinst would start a daemon on
  # :9090): policy-rc.d answering 101 forbids it; the tests start their own Prometheus
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    own_policy=1
  fi
  apt-get install -y -qq $APT_PACKAGES >/dev/null
  [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d  # slurm-local.sh starts its daemons next
  mountpoint -q /sys/kernel/tracing 2>/dev/null || mount -t tracefs nodev /sys/kernel/tracing || true
  # A real one-node Slurm for the Slurm executor's tests; they must run here, never skip.
  bash scripts/slurm-local.sh
  export AORTA_REQUIRE_SLURM=1
else
  echo "note: not root; bpftrace tests will be skipped with their reason" >&2
fi

python3 -m venv .venv
# torch==2.13.0 is a CPU build served from this machine's disk; a bare `torch` would pull CUDA.
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e '.[test]'
# Real CUPTI headers (no GPU needed) for the collector's real compile test
# (tests/trace/test_trace_device_build.py); it skips with the reason when they are absent.
.venv/bin/pip install -q --no-deps --target .venv/cupti-headers \
  nvidia-cuda-cupti nvidia-cuda-runtime nvidia-cuda-crt \
  || echo "note: CUPTI header wheels not installed; the collector compile test will skip" >&2

.venv/bin/ruff check aorta_tui tests benchmarks
.venv/bin/lint-imports --no-cache  # a stale cache once hid a broken layer
bash scripts/typecheck.sh  # mypy (zero errors) and the count of bare Any
# The slowest tests, printed so that the suite's time (CI allows 30 min) can be watched.
# Property tests replay fixed examples here (tests/conftest.py: the "gate" profile).
export AORTA_HYPOTHESIS_PROFILE=${AORTA_HYPOTHESIS_PROFILE:-gate}
# Two tiers, every test in exactly one. The shared tier: every test but those below, over both
# cores (--dist loadgroup keeps each attack-tally file on one worker: its last test counts what
# the others ran). The alone tier, in one process: the slow tests that need the machine to
# themselves (tests/tiers.py says which and why: Slurm, tmux, the second user, a judged time),
# bpftrace's and the GPU's. Before the split the slow tests all ran in one process: 26 min 20 s
# of the suite's 29 min 53 s (2026-12-04). Both tiers run, whatever the first did; either's
# failure (pytest's exit 5, no test, included) fails CI.
shared=0 alone=0
.venv/bin/pytest -q -n "${AORTA_TEST_WORKERS:-2}" --dist loadgroup \
  -m "not alone and not bpftrace and not gpu" --durations=25 "$@" || shared=$?
.venv/bin/pytest -q -m "alone or bpftrace or gpu" --durations=25 "$@" || alone=$?
echo "shared tier: exit $shared; alone tier: exit $alone"
[ "$shared" = 0 ] && [ "$alone" = 0 ]
