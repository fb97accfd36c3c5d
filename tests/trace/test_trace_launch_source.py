"""Launches from the CUPTI collector (issue 24 item 1): where the collector is loaded, its launch
callback is the launch (time, thread, stream) and no eBPF launch uprobe is attached.

The join is fed the collector's own records recorded on the H200 (the bytes its FIFO carried,
tests/fixtures/trace/gpu-h200/dispatch/), and its answers are checked against the eBPF launches
recorded in the same run: an independent count of the same calls. The CLI runs end to end with
real bpftrace, a program that writes those recorded records into the session's FIFO (the only
part of a CUDA program this box can run), and the result says which mode it used and where each
timestamp came from."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_trace_cli import cli

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.trace.device.attach import DeviceSide
from aorta_tui.trace.device.join import DispatchJoin
from aorta_tui.trace.device.records import DRIVER_LAUNCH_CBIDS, RECORD_BYTES, Rec, parse
from aorta_tui.trace.probes.cuda import DEVICE_METRICS, LAUNCHES

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REC = Path(__file__).resolve().parents[1] / "fixtures" / "trace" / "gpu-h200" / "dispatch"
DATA = (REC / "rec.cupti.bin").read_bytes()


def _ebpf() -> np.ndarray:
    with gzip.open(REC / "rec.raw.jsonl.gz", "rt") as fh:
        rows = [json.loads(ln) for ln in fh if '"metric":"launch"' in ln]
    a = np.array([(r["ts_ns"], r["pid"], r["tid"], r["key"]) for r in rows], dtype=np.int64)
    return a[np.argsort(a[:, 0], kind="stable")]


def _collector_join(chunks: list[int]) -> tuple[DispatchJoin, dict[str, list[int]], list[np.ndarray]]:
    """The recorded bytes through a collector-mode join, read in pieces of the given sizes."""
    got: dict[str, list[int]] = {}
    launches: list[np.ndarray] = []

    def emit(name: str, ts: np.ndarray, pid: np.ndarray, key: np.ndarray, value: np.ndarray) -> None:
        got.setdefault(name, []).extend(value.tolist())

    join = DispatchJoin(emit, launches="collector",
                        on_launches=lambda ts, pid, tid, stream: launches.append(np.stack([ts, tid, stream], 1)))
    rest, pos = b"", 0
    for size in [*chunks, len(DATA)]:
        parsed = parse(rest + DATA[pos:pos + size])
        rest, pos = parsed.rest, pos + size
        join.add_device(parsed)
        if pos >= len(DATA):
            break
    join.finish()
    return join, got, launches


def test_collector_launches_equal_the_ebpf_launches_of_the_same_run() -> None:
    join, got, launches = _collector_join([64 * RECORD_BYTES] * 200)
    c = join.counts
    ebpf = _ebpf()
    # the eBPF uprobes counted 7,273 launches in that run; the callbacks alone give the same
    assert c["collector_launches"] == len(ebpf) == 7273
    assert c["kernels_joined"] == c["launches_with_device_record"] == c["kernels"] == 7273
    assert c["ebpf_launches"] == 0  # no eBPF record was given: the join never needed one
    for k in ("kernels_without_callback", "callbacks_without_kernel", "device_launches_without_ebpf",
              "negative_launch_to_start"):
        assert c[k] == 0, k
    # the stream handle comes from the call's parameters and equals what the uprobe read off the stack
    seen = np.concatenate(launches)
    want_streams, want_n = np.unique(ebpf[:, 3], return_counts=True)
    got_streams, got_n = np.unique(seen[:, 2], return_counts=True)
    assert got_streams.tolist() == want_streams.tolist() and got_n.tolist() == want_n.tolist()
    assert set(seen[:, 1].tolist()) == set(ebpf[:, 2].tolist())  # the launching threads, too
    # the callback fires inside the uprobed call: its time is later, never earlier, and close
    assert (np.sort(seen[:, 0]) >= np.sort(ebpf[:, 0])).all()
    assert (np.sort(seen[:, 0]) - np.sort(ebpf[:, 0])).max() < 1_000_000
    s = join.summary()
    assert s["launches_from"] == "collector" and "the callback is the launch" in s["join"]
    assert s["callback_minus_ebpf_ns"]["n"] == 0 and s["callback_minus_ebpf_ns"]["reason"]


def test_collector_delays_are_the_ebpf_delays_minus_the_uprobe_to_callback_lag() -> None:
    _join, got, _ = _collector_join([1000 * RECORD_BYTES] * 20)
    live = json.loads((REC / "rec.json").read_text())["probe_sets"]["cuda"]
    lag_p50 = live["device_timestamps"]["callback_minus_ebpf_ns"]["p50"]
    ebpf_p50 = live["metrics"]["launch_to_start"]["histogram"]["percentiles"]["p50"] * 1000
    mine = np.percentile(np.asarray(got["launch_to_start"]), 50, method="inverted_cdf")
    # the same kernels, timed from a later point of the same call: shorter by about the lag
    assert mine < ebpf_p50
    assert abs((ebpf_p50 - mine) - lag_p50) < 0.5 * lag_p50 + 2_000


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=50_000), min_size=1, max_size=40))
def test_any_batching_of_the_collector_records_joins_the_same(sizes: list[int]) -> None:
    join, got, _ = _collector_join(sizes)
    assert join.counts["kernels_joined"] == join.counts["collector_launches"] == 7273
    assert join.counts["kernels_without_callback"] == 0
    assert len(got["launch_to_start"]) == 7273


def test_launches_before_the_trace_started_are_left_out_and_counted() -> None:
    arr = parse(DATA).of(Rec.LAUNCH)["f"].astype(np.int64)
    cut = int(np.sort(arr[:, 2])[1000])  # the first 1,000 callbacks come before the "attach"
    join = DispatchJoin(lambda *a: None, launches="collector")
    join.trace_started(cut)
    join.add_device(parse(DATA))
    join.finish()
    assert join.counts["collector_launches"] == 7273 - 1000
    assert join.counts["launches_before_trace"] == 1000


def test_cross_check_counts_both_and_compares_them_per_stream() -> None:
    join = DispatchJoin(lambda *a: None, launches="cross-check")
    ebpf = _ebpf()
    join.add_launches(ebpf[:, 0], ebpf[:, 1], ebpf[:, 2], ebpf[:, 3])
    join.add_heartbeat(int(ebpf[:, 0].max()) + 1)
    join.add_device(parse(DATA))
    join.finish()
    cc = join.summary()["cross_check"]
    assert cc["equal"] is True and cc["ebpf_launches"] == cc["collector_launches"] == 7273
    assert join.counts["kernels_joined"] == 7273  # the join still went through eBPF
    # one launch fewer on one side is seen, on its stream
    join2 = DispatchJoin(lambda *a: None, launches="cross-check")
    join2.add_launches(ebpf[1:, 0], ebpf[1:, 1], ebpf[1:, 2], ebpf[1:, 3])
    join2.add_device(parse(DATA))
    join2.finish()
    cc2 = join2.cross_check()
    assert cc2["equal"] is False
    assert [v for v in cc2["per_stream"].values() if v["ebpf"] != v["collector"]] == [
        {"ebpf": cc2["per_stream"][hex(int(ebpf[0, 3]))]["ebpf"],
         "collector": cc2["per_stream"][hex(int(ebpf[0, 3]))]["ebpf"] + 1}]


def test_the_cbid_table_names_the_entry_points_the_uprobes_probe() -> None:
    assert set(DRIVER_LAUNCH_CBIDS.values()) >= set(LAUNCHES)


# -- the decision ----------------------------------------------------------------------------------
@pytest.fixture
def prebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lib = tmp_path / "libaorta_cupti.so"
    lib.write_bytes(b"\x7fELF")
    monkeypatch.setenv("AORTA_CUPTI_COLLECTOR", str(lib))
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    monkeypatch.delenv("AORTA_CUPTI_DOMAINS", raising=False)
    return lib


def _side(**kw) -> DeviceSide:
    return DeviceSide(kw.pop("mode", "auto"), probe_set=kw.pop("probe_set", "cuda"), device_metrics=DEVICE_METRICS, **kw)


@pytest.mark.parametrize(("kw", "cmd", "want"), [
    # auto (issue 34): the kernel activity records alone, no per-launch callback or uprobe
    ({}, ["./prog"], "activity"),
    ({"launch_source": "activity"}, ["./prog"], "activity"),
    ({"launch_source": "collector"}, ["./prog"], "collector"),
    ({"launch_source": "ebpf"}, ["./prog"], "ebpf"),
    ({"cross_check": True}, ["./prog"], "cross-check"),
    ({"probe_set": "cuda_calls"}, ["./prog"], "ebpf"),  # the call's duration needs its uretprobe
    ({"trace_mode": "aggregate"}, ["./prog"], "ebpf"),
    ({}, None, "ebpf"),  # --pid: no collector, the uprobe is the only one that sees
])
def test_which_source_is_chosen(prebuilt: Path, kw: dict, cmd: list[str] | None, want: str) -> None:
    s = _side(**kw)
    s.prepare(cmd)
    try:
        assert s.launch_source == want and s.launch_source_info()["mode"] == want
        assert s.launch_source_info()["why"]
    finally:
        s.stop()


def test_runtime_only_callbacks_keep_the_uprobe(prebuilt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runtime-layer callbacks carry no stream handle: the collector cannot be the launch source
    through them, and asking for it is exit 3; the default needs no callback at all."""
    monkeypatch.setenv("AORTA_CUPTI_DOMAINS", "2")
    s = _side(launch_source="collector")
    with pytest.raises(EnvironmentProblem) as e:
        s.prepare(["./prog"])
    assert "no driver-layer" in e.value.message
    s.stop()
    s = _side()
    env = s.prepare(["./prog"])
    try:
        assert s.launch_source == "activity" and env["AORTA_CUPTI_DOMAINS"] == "0"
    finally:
        s.stop()


def test_collector_asked_for_where_it_cannot_be_is_exit_3(prebuilt: Path) -> None:
    s = _side(launch_source="collector")
    s.prepare(None)  # --pid
    with pytest.raises(EnvironmentProblem) as e:
        s.refuse_collector_without_it()
    assert e.value.exit_code == 3 and "running process" in e.value.message
    with pytest.raises(UsageError):
        _side(launch_source="ebpf", cross_check=True)
    with pytest.raises(UsageError):
        _side(launch_source="sometimes")


# -- end to end: the CLI, real bpftrace, the collector's recorded records through the FIFO -----------
WRITER = """
import os, sys, time
import numpy as np
from aorta_tui.trace.device.records import DTYPE, Rec
recs = np.frombuffer(open(sys.argv[1], "rb").read(), dtype=DTYPE).copy()
# the recording's CLOCK_MONOTONIC is the H200's: move every time field to now on this box
t = recs["type"]
delta = np.uint64((time.monotonic_ns() + 1_000_000 - int(recs["f"][t == Rec.LAUNCH][:, 2].min())) % (1 << 64))
for kind, cols in ((Rec.LAUNCH, [2]), (Rec.KERNEL, [1, 2]), (Rec.CLOCK, [0, 1, 2])):
    for c in cols:
        recs["f"][t == kind, c] += delta
# every other launch from a second thread (the recording's one thread has the process's pid)
launch = t == Rec.LAUNCH
recs["f"][launch, 0] += (np.arange(int(launch.sum())) % 2).astype(np.uint64)
data = recs.tobytes()
fd = os.open(os.environ["AORTA_CUPTI_FIFO"], os.O_WRONLY)
for i in range(0, len(data), 4096):  # as the collector writes: whole records, at most PIPE_BUF
    os.write(fd, data[i:i + 4096])
os.close(fd)
"""


def _trace(tmp_path: Path, fakelibs, *extra: str, calibrate: bool = False) -> tuple[dict, object]:
    prog = tmp_path / "collector_records.py"
    prog.write_text(WRITER)
    lib = tmp_path / "libaorta_cupti.so"
    lib.write_bytes(b"\x7fELF")
    out = Path("aorta-out") / "q.json"  # relative, from a fresh working directory
    r = cli("trace", "queue", "--probes", "cuda", "--lib", f"cuda={fakelibs.cuda}",
            *([] if calibrate else ["--no-calibrate"]), "--device-timestamps", "on", "-o", str(out), *extra, "--", sys.executable, str(prog),
            str(REC / "rec.cupti.bin"), cwd=tmp_path,
            env={"AORTA_CUPTI_COLLECTOR": str(lib), "CUDA_INJECTION64_PATH": "", "PYTHONPATH": os.pathsep.join(sys.path)})
    result = json.loads((tmp_path / out).read_text()) if (tmp_path / out).exists() else {}
    return result, r


def test_trace_queue_takes_launches_from_the_collector_with_no_launch_uprobe(bpftrace, fakelibs, tmp_path: Path) -> None:
    result, r = _trace(tmp_path, fakelibs, "--launch-source", "collector")
    assert r.returncode == 0, r.stderr
    assert result["launch_source"]["mode"] == "collector"
    assert "CUPTI driver-API callback" in result["launch_source"]["launch_timestamp"]
    cuda = result["probe_sets"]["cuda"]
    # the fake libcuda exports three launch entry points, one copy and one sync: attached are the
    # copy's uprobe and the sync's entry and return probes, no launch probe
    assert sorted(f for f in cuda["detection"]["found"] if f in LAUNCHES) == [
        "cuGraphLaunch", "cuLaunchKernel", "cuLaunchKernelEx"]
    assert result["uprobes"] == 3
    launch = cuda["metrics"]["launch"]
    assert launch["attached"] is True and launch["count"] == 7273
    assert launch["records_sent_by_collector"] == launch["records_received"] == 7273
    assert launch["lost_events"] == 0 and launch["records_sent_by_kernel"] is None
    assert "callback" in launch["timestamp_source"]
    # the sentences beside the histograms name the callback, never the uprobe that is not there
    assert "launch callback" in launch["measures"] and "uprobe" not in launch["measures"].replace("no uprobe", "")
    assert "CUPTI driver-API callback" in cuda["metrics"]["launch_to_start"]["measures"]
    assert "eBPF" not in cuda["metrics"]["launch_to_start"]["histogram_measures"]
    lts = cuda["metrics"]["launch_to_start"]
    assert lts["count"] == 7273 and lts["timestamp_source"]["from"] == launch["timestamp_source"]
    assert "CUPTI kernel activity" in lts["timestamp_source"]["to"]
    assert lts["includes"]["subtracted"] is False and "no uprobe on the launch path" in lts["includes"]["why"]
    assert cuda["metrics"]["copy"]["timestamp_source"].startswith("eBPF")
    dt = cuda["device_timestamps"]
    assert dt["launch_source"]["mode"] == "collector" and dt["counts"]["collector_launches"] == 7273
    assert dt["per_stream"]["0xc560a30"] == {"launches": 7272, "with_device_record": 7272}
    assert dt["program_cupti_calls"] is None and "prebuilt" in dt["program_cupti_calls_reason"]


def test_perfetto_draws_every_collector_launch_from_its_launching_thread(bpftrace, fakelibs, tmp_path: Path) -> None:
    from aorta_tui.trace.export import GPU_PID

    result, r = _trace(tmp_path, fakelibs, "--launch-source", "collector", "--perfetto", "aorta-out/p.json")
    assert r.returncode == 0, r.stderr
    ev = json.loads((tmp_path / "aorta-out" / "p.json").read_text())["traceEvents"]
    starts = [e for e in ev if e["ph"] == "s" and e["name"] == "launch->start"]
    ends = [e for e in ev if e["ph"] == "f" and e["name"] == "launch->start"]
    assert len(starts) == len(ends) == 7273
    (thread,) = set(parse(DATA).of(Rec.LAUNCH)["f"][:, 0].tolist())
    # the writer moved every other launch to thread + 1: each arrow starts on its own thread
    assert {e["tid"] for e in starts} == {thread, thread + 1} and all(e["pid"] != GPU_PID for e in starts)


def test_ebpf_and_cross_check_attach_the_launch_uprobe_and_say_so(bpftrace, fakelibs, tmp_path: Path) -> None:
    result, r = _trace(tmp_path, fakelibs, "--launch-source", "ebpf", calibrate=True)
    assert r.returncode == 0, r.stderr
    # the launch uprobe's cost, calibrated on the probed library's own cuDriverGetVersion, is
    # what launch_to_start includes and may have taken off
    inc = result["probe_sets"]["cuda"]["metrics"]["launch_to_start"]["includes"]
    cal = result["calibration"]
    if cal.get("cuda") is not None:
        assert inc["subtracted"] is True and inc["probe_cost_ns"] == cal["cuda"] > 0
        assert inc["calibrated_on"].endswith(":cuDriverGetVersion")
    else:  # timing noise hid the probe on this busy box: nothing subtracted, and why
        assert inc["subtracted"] is False and "not measured" in inc["why"]
    assert result["launch_source"]["mode"] == "ebpf"
    assert result["uprobes"] == 6  # the three launch entry points too
    m = result["probe_sets"]["cuda"]["metrics"]["launch"]
    assert m["count"] == 0 and m["records_sent_by_kernel"] == 0  # this program calls no libcuda
    assert m["timestamp_source"].startswith("eBPF uprobe")
    result, r = _trace(tmp_path, fakelibs, "--cross-check")
    assert r.returncode == 0, r.stderr
    cc = result["probe_sets"]["cuda"]["device_timestamps"]["cross_check"]
    # the two counts of one run disagree here (the records came from another run), and it says so
    assert cc == {**cc, "ebpf_launches": 0, "collector_launches": 7273, "equal": False}


def test_collector_source_with_pid_is_exit_3(bpftrace, fakelibs, tmp_path: Path) -> None:
    r = cli("trace", "queue", "--probes", "cuda", "--lib", f"cuda={fakelibs.cuda}", "--launch-source", "collector",
            "--pid", str(os.getpid()), "--duration", "1", cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "launches cannot come from the collector" in r.stderr and "Traceback" not in r.stderr
    r = cli("trace", "queue", "--probes", "ioctl", "--cross-check", "--", "true", cwd=tmp_path)
    assert r.returncode == 2 and "--probes cuda" in r.stderr


def test_live_launch_loss_is_the_ring_drops_until_the_final_count(prebuilt: Path) -> None:
    from aorta_tui.trace.device.records import pack

    s = _side(launch_source="collector")
    s.prepare(["./prog"])
    try:
        s.join.add_device(parse(pack(Rec.HELLO, 9, 130000, 100, 131072, 1, 1)))
        assert s.collector_launch_lost() == 0 and s.collector_launch_counts()[0] is None  # running, nothing dropped
        s.join.add_device(parse(pack(Rec.STATS, 9, 100, 3, 0, 0, 97, 1, 0)))
        assert s.collector_launch_lost() == 3  # the full ring dropped three launches so far
        s.join.add_device(parse(pack(Rec.STATS, 9, 120, 3, 64, 0, 97, 1, 0)))
        assert s.collector_launch_lost() is None  # a dropped FIFO write may have held launches
        s.join.add_device(parse(pack(Rec.BYE, 9, 120, 3, 64, 0, 97, 1, 0)))
        assert s.collector_launch_counts() == (120, 0, None) and s.collector_launch_lost() == 120
    finally:
        s.stop()


def test_a_collector_that_could_not_subscribe_leaves_launches_uncounted_and_says_so(prebuilt: Path) -> None:
    """The program's own CUPTI client came first: no launch callback, so a count of 0 would lie."""
    from aorta_tui.trace.device.records import pack

    s = _side(launch_source="collector")
    s.prepare(["./prog"])
    try:
        s.join.add_device(parse(pack(Rec.HELLO, 9, 130000, 100, 131072, 1, 1) + pack(Rec.ERROR, 9, 39, 1)
                                + pack(Rec.BYE, 9)))
        seen, _read, why = s.collector_launch_counts()
        assert seen is None and s.collector_launch_lost() is None
        assert "pid 9's launches were not seen" in why and "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS" in why
        assert "--launch-source ebpf" in why
    finally:
        s.stop()


def test_json_stream_attached_event_names_the_launch_source(bpftrace, fakelibs, tmp_path: Path) -> None:
    result, r = _trace(tmp_path, fakelibs, "--launch-source", "collector", "--json")
    assert r.returncode == 0, r.stderr
    ev = next(json.loads(ln) for ln in r.stdout.splitlines() if '"attached"' in ln)
    assert ev["reasons"]["launch_source"].startswith("collector: ")


def test_records_read_before_the_session_binds_count_as_before_the_trace(prebuilt: Path) -> None:
    """An in-process collector (queue run --ebpf-trace) starts with CUDA, before the trace session:
    its first launches and kernels arrive before bind() and must count as before the trace, not
    as joined launches whose values went nowhere (the queue check compares the two)."""
    import threading
    from types import SimpleNamespace

    from aorta_tui.trace.probes.cuda import CudaProbes
    from aorta_tui.trace.stream_stats import MetricStats

    s = _side(launch_source="collector")
    s.prepare(None, children=True)
    try:
        import time

        from aorta_tui.trace.device.records import DTYPE

        # HELLO, CLOCKs and the first launches with their kernels, moved to 10 s ago on this clock
        recs = np.frombuffer(DATA[: 200 * RECORD_BYTES], dtype=DTYPE).copy()
        t = recs["type"]
        # modulo 2**64: uint64 addition wraps, so a clock ahead of this box's moves back as well
        shift = np.uint64((time.monotonic_ns() - 10_000_000_000 - int(recs["f"][t == Rec.LAUNCH][:, 2].min())) % (1 << 64))
        for kind, cols in ((Rec.LAUNCH, [2]), (Rec.KERNEL, [1, 2]), (Rec.CLOCK, [0, 1, 2])):
            for col in cols:
                recs["f"][t == kind, col] += shift
        early = recs.tobytes()
        s._on_records(parse(early))
        assert s.join.counts["kernels"] == 0  # held, not joined yet
        program = SimpleNamespace(metric_ids={1: ("cuda", CudaProbes.metrics[0])}, attached=set())
        stats: dict = {1: MetricStats(CudaProbes.metrics[0])}
        s.bind(program, stats, threading.Lock(), MetricStats)
        c = s.join.counts
        n_launch = len(parse(early).of(Rec.LAUNCH))
        assert n_launch > 0 and c["launches_before_trace"] == n_launch and c["collector_launches"] == 0
        assert c["launches_with_device_record"] == 0 and c["kernels_before_trace"] == len(parse(early).of(Rec.KERNEL))
        assert stats[1].count == 0
    finally:
        s.stop()


ACTIVITY_WRITER = """
import os, sys, time
import numpy as np
from aorta_tui.trace.device.records import DTYPE, Rec
recs = np.frombuffer(open(sys.argv[1], "rb").read(), dtype=DTYPE).copy()
t = recs["type"]
delta = np.uint64((time.monotonic_ns() + 1_000_000 - int(recs["f"][t == Rec.KERNEL][:, 1].min())) % (1 << 64))
for kind, cols in ((Rec.KERNEL, [1, 2]), (Rec.CLOCK, [0, 1, 2])):
    for c in cols:
        recs["f"][t == kind, c] += delta
# the default mode's collector: no LAUNCH records; kernels carry queued/submitted (4 us and
# 0.5 us before their start: the H200's no-backlog figures) and their graph id beside the corr
k = recs[t == Rec.KERNEL].copy()
f = k["f"]
start = f[:, 1].copy()
f[:, 0] = f[:, 0] | (f[:, 5] << np.uint64(32))
f[:, 5], f[:, 6] = start - np.uint64(4000), start - np.uint64(500)
k["type"] = int(Rec.KERNEL_LAT)
keep = recs[(t != Rec.KERNEL) & (t != Rec.LAUNCH)]
data = keep[:2].tobytes() + k.tobytes() + keep[2:].tobytes()
fd = os.open(os.environ["AORTA_CUPTI_FIFO"], os.O_WRONLY)
for i in range(0, len(data), 4096):
    os.write(fd, data[i:i + 4096])
os.close(fd)
"""


def test_auto_takes_launches_from_the_activity_records_and_splits_launch_to_start(
        bpftrace, fakelibs, tmp_path: Path) -> None:
    """Issue 34: the default attaches no launch uprobe and the collector gets no launch callback
    (AORTA_CUPTI_DOMAINS=0 in the program's environment); every kernel record is a launch, and
    launch -> start comes with its push and GPU-queue parts, said to come from CUPTI."""
    prog = tmp_path / "activity_records.py"
    prog.write_text(ACTIVITY_WRITER + "\nprint(os.environ.get('AORTA_CUPTI_DOMAINS'), file=sys.stderr)\n")
    lib = tmp_path / "libaorta_cupti.so"
    lib.write_bytes(b"\x7fELF")
    r = cli("trace", "queue", "--probes", "cuda", "--lib", f"cuda={fakelibs.cuda}", "--no-calibrate",
            "--device-timestamps", "on", "-o", "q.json", "--json", "--", sys.executable, str(prog),
            str(REC / "rec.cupti.bin"), cwd=tmp_path,
            env={"AORTA_CUPTI_COLLECTOR": str(lib), "CUDA_INJECTION64_PATH": "", "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    result = json.loads((tmp_path / "q.json").read_text())
    ev = next(json.loads(ln) for ln in r.stdout.splitlines() if '"attached"' in ln)
    assert ev["reasons"]["launch_source"].startswith("activity: auto")
    assert result["launch_source"]["mode"] == "activity" and "queued" in result["launch_source"]["launch_timestamp"]
    assert "\n0\n" in "\n" + r.stderr  # the program was told: no launch callback
    cuda = result["probe_sets"]["cuda"]
    assert any("no launch uprobe attached" in n for n in cuda["detection"]["notes"])
    kernels = int((parse(DATA).of(Rec.KERNEL)["f"][:, 5] == 0).sum())  # plain kernels: one launch each
    m = cuda["metrics"]
    assert m["launch"]["count"] >= kernels and m["launch"]["lost_events"] == 0
    assert m["launch_to_start"]["count"] == m["launch"]["count"]
    assert m["launch_push"]["count"] == m["launch_gpu_queue"]["count"] == m["launch"]["count"]
    assert m["launch_push"]["histogram"]["percentiles"]["p50"] == pytest.approx(3.5, abs=0.1)
    assert m["launch_gpu_queue"]["histogram"]["percentiles"]["p50"] == pytest.approx(0.5, abs=0.05)
    assert m["launch_host"]["count"] == 0
    assert m["launch_push"]["timestamp_source"]["from"].startswith("CUPTI latency timestamp")
    # the cost is what the program pays (a share of its time, a lower bound), not a CPU fraction
    pc = cuda["observer_cost"]["program_cost"]
    assert pc["launch_source"] == "activity" and pc["launches"] == m["launch"]["count"]
    assert pc["share"] is not None and pc["lower_bound"] and pc["share_ci95"][0] <= pc["share"]
