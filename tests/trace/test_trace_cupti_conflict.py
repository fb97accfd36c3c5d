"""One CUPTI subscriber (issue 24 item 2): a traced program whose own CUPTI client (torch.profiler's
kineto) is refused because the collector holds CUPTI is seen, live and in the result.

The watch is a uretprobe on the libcupti the collector was built against: every cuptiSubscribe
of the traced process and what it returned. Here it is the real libcupti of the nvidia-cuda-cupti
wheel (scripts/test.sh unpacks it into .venv/cupti-headers) and the real collector build; the
program calls the real cuptiSubscribe (with no GPU it fails, CUPTI_ERROR_UNKNOWN) after writing a
HELLO record as the loaded collector would. The CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
wording is checked on the engine's own decision, fed what the probe reports."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from test_trace_cli import cli
from test_trace_device_build import real_cupti_root

from aorta_tui.trace.device.attach import DeviceSide
from aorta_tui.trace.device.join import DispatchJoin
from aorta_tui.trace.device.records import Rec, pack, parse
from aorta_tui.trace.probes.cuda import DEVICE_METRICS

PROGRAM = """
import ctypes, os, sys, time
from aorta_tui.trace.device.records import Rec, pack
fd = os.open(os.environ["AORTA_CUPTI_FIFO"], os.O_WRONLY)
pid = os.getpid()
os.write(fd, pack(Rec.HELLO, pid, 130000, 100, 131072, 1, 1))  # the collector subscribed first
cupti = ctypes.CDLL(sys.argv[1])
handle = ctypes.c_void_p()
print("subscribe returned", cupti.cuptiSubscribe(ctypes.byref(handle), None, None), flush=True)
time.sleep(float(sys.argv[2]))  # the trace goes on: the warning must come while it runs
os.write(fd, pack(Rec.BYE, pid))
os.close(fd)
"""


def _side_with(calls: dict[int, list[tuple[str, int]]], errors: list[str] | None = None) -> DeviceSide:
    s = DeviceSide("auto", probe_set="cuda", device_metrics=DEVICE_METRICS)
    s.join = DispatchJoin(lambda *a: None)
    s.join.add_device(parse(pack(Rec.HELLO, 42, 130000, 100, 131072, 1, 1)))
    if errors:
        s.join.procs[42].errors = errors
    s.cupti_calls = calls
    return s


def test_a_refused_profiler_is_named_with_the_way_out() -> None:
    s = _side_with({42: [("cuptiSubscribe", 0), ("cuptiSubscribe", 39)]})  # ours, then the program's
    msg = s.profiler_conflicts()["42"]
    assert "your program's profiler got no events because this trace holds CUPTI" in msg
    assert "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in msg
    assert "`--device-timestamps off` leaves CUPTI to your profiler" in msg
    assert s.take_warnings() == [msg] and s.take_warnings() == []  # said once


def test_no_conflict_when_only_the_collector_subscribed_or_the_program_came_first() -> None:
    assert _side_with({42: [("cuptiSubscribe", 0), ("cuptiActivityRegisterCallbacks", 0)]}).profiler_conflicts() == {}
    # the program's client came first: the collector's own error says it (status), not this
    first = _side_with({42: [("cuptiSubscribe", 0), ("cuptiSubscribe", 39)]},
                       errors=["cuptiSubscribe failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"])
    assert first.profiler_conflicts() == {}
    # a process the collector never spoke from: nothing to compare with
    assert _side_with({7: [("cuptiSubscribe", 39)]}).profiler_conflicts() == {}


def test_a_second_activity_registration_is_said_too() -> None:
    msg = _side_with({42: [("cuptiActivityRegisterCallbacks", 0)] * 2}).profiler_conflicts()["42"]
    assert "registered activity buffers too" in msg and "--device-timestamps off" in msg


@pytest.mark.skipif(real_cupti_root() is None, reason="no real CUPTI (scripts/test.sh installs the wheels into .venv/cupti-headers)")
@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_the_programs_refused_subscribe_is_seen_live_and_in_the_result(bpftrace, fakelibs, tmp_path: Path) -> None:
    root = real_cupti_root()
    lib = next((root / "lib").glob("libcupti.so*"))
    prog = tmp_path / "own_client.py"
    prog.write_text(PROGRAM)
    out = Path("aorta-out") / "q.json"
    r = cli("trace", "queue", "--probes", "cuda", "--lib", f"cuda={fakelibs.cuda}", "--no-calibrate",
            "--device-timestamps", "on", "--interval", "0.2", "--json", "-o", str(out),
            "--raw", "aorta-out/raw.jsonl.gz", "--",
            sys.executable, str(prog), str(lib), "1.5", cwd=tmp_path, timeout=180,
            env={"AORTA_CUPTI_ROOT": str(root), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                 "CUDA_INJECTION64_PATH": "", "AORTA_CUPTI_COLLECTOR": "",
                 "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    events = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    warn = [i for i, e in enumerate(events) if e["event"] == "warning" and e.get("code") == "cupti_conflict"]
    exited = [i for i, e in enumerate(events) if e["event"] == "warning" and e.get("code") == "target_exited"]
    assert len(warn) == 1, [e for e in events if e["event"] == "warning"]
    assert exited and warn[0] < exited[0]  # while the program still ran
    msg = events[warn[0]]["message"]
    assert "failed to subscribe while this trace's collector held CUPTI" in msg and "--device-timestamps off" in msg
    result = json.loads((tmp_path / out).read_text())
    dt = result["probe_sets"]["cuda"]["device_timestamps"]
    calls = dt["program_cupti_calls"]
    (pid, got), = calls.items()
    code = int(r.stderr.split("subscribe returned")[1].split()[0])
    assert got == [{"function": "cuptiSubscribe", "result": code}] and code != 0
    assert dt["program_profiler"][pid] == msg and msg in dt["status"]
    assert msg in result["warnings"] and np.sum([w == msg for w in result["warnings"]]) == 1
    import gzip

    with gzip.open(tmp_path / "aorta-out" / "raw.jsonl.gz", "rt") as fh:
        raw = [json.loads(ln) for ln in fh if ln.strip()]
    calls = [r for r in raw if r["metric"] == "program_cupti_call"]
    assert [(r["pid"], r["key"]) for r in calls] == [(int(pid), code)] and not [r for r in raw if r["set"] == "?"]


INJECTING_PROGRAM = """
import ctypes, os
# what the CUDA driver does at cuInit: load CUDA_INJECTION64_PATH and call InitializeInjection
lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
print("InitializeInjection returned", lib.InitializeInjection(), flush=True)
"""


@pytest.mark.skipif(real_cupti_root() is None, reason="no real CUPTI (scripts/test.sh installs the wheels into .venv/cupti-headers)")
@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_the_real_collector_in_a_traced_program_reports_its_failed_subscribe(bpftrace, fakelibs, tmp_path: Path) -> None:
    """The real collector, built here and injected by the real session, run as the driver runs it:
    with no GPU its cuptiSubscribe fails, and the trace says so: GPU start times not available
    with CUPTI's own error, its launches 'not seen' (never a count of 0), the watch saw the
    collector's own subscribe and blames no profiler of the program; the program runs on."""
    root = real_cupti_root()
    prog = tmp_path / "injected.py"
    prog.write_text(INJECTING_PROGRAM)
    out = Path("aorta-out") / "q.json"
    # --launch-source collector: launches from the collector alone (auto takes them from the
    # eBPF uprobe, which counts them whatever the collector did)
    r = cli("trace", "queue", "--probes", "cuda", "--lib", f"cuda={fakelibs.cuda}", "--no-calibrate",
            "--device-timestamps", "on", "--launch-source", "collector", "-o", str(out), "--",
            sys.executable, str(prog), cwd=tmp_path, timeout=180,
            env={"AORTA_CUPTI_ROOT": str(root), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                 "CUDA_INJECTION64_PATH": "", "AORTA_CUPTI_COLLECTOR": ""})
    assert r.returncode == 0, r.stderr
    assert "InitializeInjection returned 1" in r.stdout
    result = json.loads((tmp_path / out).read_text())
    dt = result["probe_sets"]["cuda"]["device_timestamps"]
    (pid, proc), = dt["processes"].items()
    assert proc["errors"] == ["cuptiSubscribe failed: CUPTI_ERROR_UNKNOWN"] and proc["hello"]["ring_slots"] == 131072
    assert dt["status"] == f"pid {pid}: not available: cuptiSubscribe failed: CUPTI_ERROR_UNKNOWN"
    assert dt["program_cupti_calls"] == {pid: [{"function": "cuptiSubscribe", "result": 999}]}
    assert "program_profiler" not in dt  # the failed call was the collector's own
    launch = result["probe_sets"]["cuda"]["metrics"]["launch"]
    assert launch["lost_events"] is None and "launches were not seen" in launch["lost_events_reason"]
    assert any("launches were not seen" in w for w in result["warnings"])
