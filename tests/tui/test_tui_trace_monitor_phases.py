"""A `queue WORKLOAD` target's pauses between phases stay out of the interval histogram.

On the H200 the pause between the warm-up and the measure pass (set-up, clock calibration,
the profiler starting) was the monitor's 5.49 s "max interval". The harness announces its
phases (``aorta_tui.core.phases``); the trace worker leaves every interval that spans a
phase boundary out, counts it, and reports the phase.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.cli.trace_stream import PhaseBreaks
from aorta_tui.core.phases import PHASE_SOCKET_ENV, PhaseListener, announce, parse_announcement

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FAKECUDA = REPO / "tests" / "trace" / "fakelib" / "fakecuda.c"
HARNESS = "phase datagram + interval filter"
PROMISE = "stray datagrams ignored, never raise; an interval dropped iff it spans a boundary"
needs_bpftrace = pytest.mark.skipif(
    shutil.which("bpftrace") is None or os.geteuid() != 0 or shutil.which("gcc") is None,
    reason="needs bpftrace, root and gcc (the CI script installs them and runs as root)",
)


def test_queue_run_announces_warm_up_measure_and_detail_with_pauses_between(tmp_path: Path) -> None:
    got: list[tuple[str, int]] = []
    listener = PhaseListener(lambda name, t: got.append((name, t)))
    try:
        before = time.monotonic_ns()
        r = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "run", "tiny_kernel_stress",
                            "--device", "cpu", "--size", "tiny", "--streams", "2", "--iterations", "3",
                            "--warmup", "2", "-o", str(tmp_path / "q.json")],
                           capture_output=True, text=True, timeout=180, env={**os.environ, **listener.env})
        after = time.monotonic_ns()
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 5
        while len(got) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        listener.close()
    assert [name for name, _t in got] == ["warm-up", "pause", "measure", "pause", "detail", "pause"]
    times = [t for _name, t in got]
    assert times == sorted(times) and before < times[0] and times[-1] < after  # CLOCK_MONOTONIC


def test_announcing_without_a_listener_never_fails_or_blocks(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(PHASE_SOCKET_ENV, str(tmp_path / "nobody.sock"))
    announce("measure")
    monkeypatch.delenv(PHASE_SOCKET_ENV)
    announce("measure")


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_stray_datagrams_are_ignored_never_raise(data: bytes, attack_tally) -> None:  # noqa: ANN001
    parsed = parse_announcement(data)
    assert parsed is None or (isinstance(parsed[0], str) and 0 <= parsed[1] < 1 << 63)
    attack_tally.record(HARNESS, cases=1, promise=PROMISE)


@settings(max_examples=200, deadline=None)
@given(name=st.from_regex(r"[a-z][a-z0-9_-]{0,31}", fullmatch=True), t_ns=st.integers(0, (1 << 63) - 1))
def test_well_formed_announcements_round_trip(name: str, t_ns: int, attack_tally) -> None:  # noqa: ANN001
    assert parse_announcement(f"phase {name} {t_ns}\n".encode()) == (name, t_ns)
    attack_tally.record(HARNESS, cases=1, promise=PROMISE)


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.integers(0, 10_000), min_size=1, max_size=60),
       bounds=st.lists(st.integers(0, 10_000), max_size=6))
def test_an_interval_is_left_out_exactly_when_it_spans_a_boundary(events: list[int], bounds: list[int],
                                                                   attack_tally) -> None:  # noqa: ANN001
    ts = np.array(sorted(events), dtype=np.int64)
    prev = np.concatenate([[0], ts[:-1]])
    gaps = ts - prev
    breaks = PhaseBreaks()
    for b in bounds:
        breaks.add("pause", b)
    mask = breaks.keep(ts, gaps)
    expected = np.array([not any(p < b <= t for b in bounds) for p, t in zip(prev.tolist(), ts.tolist(), strict=True)])
    assert (np.ones(len(ts), bool) if mask is None else mask).tolist() == expected.tolist()
    assert breaks.left_out == int((~expected).sum())
    attack_tally.record(HARNESS, cases=1, promise=PROMISE)


TARGET = r"""
import ctypes, sys, time
from aorta_tui.core.phases import announce
lib = ctypes.CDLL(sys.argv[1])
launch = lib.cuLaunchKernel
launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
streams = [0x10, 0x20]
def burst(n):
    for i in range(n):
        launch(None, 1, 1, 1, 32, 1, 1, 0, streams[i % 2], None, None)
        time.sleep(0.001)
time.sleep(0.5)
announce("warm-up"); burst(20); announce("pause")
time.sleep(1.5)  # what calibration and the profiler's start cost a queue run
announce("measure"); burst(40); announce("pause")
time.sleep(0.3)
"""


@needs_bpftrace
def test_the_worker_leaves_the_pause_between_phases_out_of_a_real_trace(tmp_path: Path) -> None:
    lib = tmp_path / "libcuda.so.1"
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(FAKECUDA)], check=True, capture_output=True)
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    worker = subprocess.Popen(
        [sys.executable, "-m", "aorta_tui", "trace", "queue", "--json", "--probes", "cuda",
         "--lib", f"cuda={lib}", "--interval", "0.2", "--launch-source", "ebpf",  # a fake libcuda: the
         # uprobe counts its launches (a CUPTI collector, where found, is never loaded by it)
         "--", sys.executable, str(script), str(lib)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    timer = threading.Timer(90, worker.kill)
    timer.start()
    try:
        out, err = worker.communicate()
    finally:
        timer.cancel()
    assert worker.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    launches = [e for e in events if e["event"] == "histogram_snapshot" and e["probe_set"] == "cuda.launch"]
    assert launches and launches[-1]["count"] == 60
    last = launches[-1]
    assert last["percentiles"]["max"] < 1_000_000, last["percentiles"]  # µs: the 1.5 s pause is not there
    interval_count = sum(b[2] for b in last["buckets"])
    assert interval_count == 60 - 2 - 2  # per stream: a first launch, and one interval across the pause
    phases = [e["values"] for e in events if e["event"] == "measurement" and e["name"] == "phase"]
    assert phases[-1]["phases"] == ["warm-up", "measure"] and phases[-1]["intervals_left_out"] == 2
