"""A recipe's `trace:` section: real bpftrace attached around each trial (root only)."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from tests.engine_support import aorta, only_run_dir

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="bpftrace needs root (CAP_BPF/CAP_PERFMON)"),
    pytest.mark.skipif(shutil.which("bpftrace") is None, reason="bpftrace is not installed (scripts/test.sh installs it)"),
]

IOCTLS = 400
CHILD = (
    "import fcntl, os, termios\n"
    "fd = os.open('/dev/null', os.O_RDONLY)\n"
    f"for _ in range({IOCTLS}):\n"
    "    try:\n"
    "        fcntl.ioctl(fd, termios.FIONREAD, b'\\0' * 4)\n"
    "    except OSError:\n"
    "        pass\n"
    "print('pid', os.getpid())\n"
)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_trace_section_traces_each_trial(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("schema_version: 1\nmode: probe\nticket: TR\ntrials: 1\n"
                      "mitigation_axis: [none]\ndiagnostic_axis: [none]\n"
                      "trace: {probes: [ioctl], mode: events}\n")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot",
                 "--", sys.executable, str(script), timeout=240)
    assert proc.returncode == 0, proc.stderr
    run = only_run_dir(tmp_path / "out")
    trial = run / "trials" / "none-none" / "trial-000"
    result = json.loads((trial / "result.json").read_text())
    assert result["verdict"] == "pass"
    assert result["trace"]["probes"] == ["ioctl"]
    child_pid = int((trial / "stdout.log").read_text().split()[-1])
    trace = json.loads((trial / "trace.json").read_text())
    metric = trace["probe_sets"]["ioctl"]["metrics"]["ioctl"]
    assert "sys_enter_ioctl" in metric["measures"]  # says what the histogram measures
    import termios

    assert metric["breakdown"][str(termios.FIONREAD)]["count"] >= IOCTLS
    # the trial's own process issued every one of its ioctls into the per-pid breakdown
    per_pid = _per_pid_counts(trace)
    assert per_pid.get(child_pid, 0) >= IOCTLS, per_pid


def _per_pid_counts(trace: dict) -> dict[int, int]:
    out: dict[int, int] = {}
    for pset in trace["probe_sets"].values():
        for metric in pset["metrics"].values():
            for pid, count in (metric.get("per_pid") or {}).items():
                out[int(pid)] = out.get(int(pid), 0) + int(count)
    return out
