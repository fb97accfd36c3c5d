"""The uprobe probe sets against real bpftrace, pointed at fake runtimes with known delays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aorta_tui.core.events import HistogramSnapshot
from aorta_tui.trace.hdr import bucket_index_scalar
from aorta_tui.trace.session import TraceSession

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

STREAMS = ["0x7f00aa000010", "0x7f00bb000020"]
DELAY_US = 1000  # stream i sleeps DELAY_US * (i + 1) inside the fake launch


def run(probes: list[str], argv: list[str], libs: dict[str, Path], mode: str = "events", **kw):
    # these count the uprobes and their records: where CUPTI is found the default takes launches
    # from its collector (which a fake libcuda never loads) and watches libcupti with uprobes of its own
    kw.setdefault("device_timestamps", "off")
    events: list = []
    s = TraceSession(probes, command=argv, mode=mode, library_paths=libs, calibrate=False,
                     on_event=events.append, interval_s=0.2, **kw)
    s.start()
    assert s.wait(timeout=60) == 0
    s.stop()
    return s.result().to_json(), events


def metric(result: dict, ps: str, name: str) -> dict:
    return result["probe_sets"][ps]["metrics"][name]


def truth(path: Path) -> dict[int, dict[str, np.ndarray]]:
    """The driver's own measurements per stream index: call start times and durations (ns)."""
    rows = np.loadtxt(path, dtype=np.int64, ndmin=2)
    out = {}
    for s in np.unique(rows[:, 0]).tolist():
        sel = rows[rows[:, 0] == s]
        out[s] = {"start": sel[:, 1], "dur": sel[:, 2], "gap": np.diff(sel[:, 1])}
    return out


def same_bucket(a_ns: float, b_ns: float) -> bool:
    """Equal log-linear buckets, or neighbours when a value sits on a bucket edge."""
    return abs(bucket_index_scalar(int(a_ns)) - bucket_index_scalar(int(b_ns))) <= 1


def test_cuda_counts_every_launch_per_stream_with_one_uprobe_each(bpftrace, fakelibs, tmp_path, monkeypatch) -> None:
    n = 60
    monkeypatch.setenv("DRIVER_TIMES", str(tmp_path / "t.txt"))
    r, events = run(["cuda"], [str(fakelibs.driver), "cuda", str(fakelibs.cuda), str(n), str(DELAY_US), *STREAMS],
                    {"cuda": fakelibs.cuda})
    m = metric(r, "cuda", "launch")
    assert m["count"] == n and m["records_sent_by_kernel"] == n and m["lost_events"] == 0
    assert {k: v["count"] for k, v in m["breakdown"].items()} == {STREAMS[0]: n // 2, STREAMS[1]: n // 2}
    assert m["breakdown_reason"] is None  # events mode: per-key p50 and max are measured
    # one probe per launch entry point; the fake also exports cuLaunchKernelEx, cuGraphLaunch,
    # cuStreamSynchronize (uprobe + uretprobe) and cuMemcpyHtoDAsync_v2
    assert r["uprobes"] == 3 + 2 + 1
    # default mode histograms the gap between launches on one stream; compare with the driver's clock
    t = truth(tmp_path / "t.txt")
    for i, stream in enumerate(STREAMS):
        gaps = t[i]["gap"]
        assert gaps.min() >= 3 * DELAY_US * 1000  # both streams' sleeps lie between two launches
        assert same_bucket(m["breakdown"][stream]["p50"] * 1000 - 1, np.percentile(gaps, 50, method="inverted_cdf"))
    assert r["drained_before_stop"] is True and r["malformed_lines"] == 0
    snaps = [e for e in events if isinstance(e, HistogramSnapshot) and e.probe_set == "cuda.launch"]
    assert snaps and snaps[-1].count == n and snaps[-1].measures.startswith("interval between")


@pytest.mark.parametrize("mode", ["events", "aggregate"])
def test_cuda_calls_puts_the_known_delay_in_its_bucket(bpftrace, fakelibs, tmp_path, monkeypatch, mode: str) -> None:
    n = 40
    monkeypatch.setenv("DRIVER_TIMES", str(tmp_path / "t.txt"))
    r, _ = run(["cuda_calls"], [str(fakelibs.driver), "cuda", str(fakelibs.cuda), str(n), str(DELAY_US), *STREAMS],
               {"cuda": fakelibs.cuda}, mode=mode)
    m = metric(r, "cuda_calls", "launch_call")
    assert m["count"] == n and m["lost_events"] == 0
    assert {k: v["count"] for k, v in m["breakdown"].items()} == {STREAMS[0]: n // 2, STREAMS[1]: n // 2}
    t = truth(tmp_path / "t.txt")
    buckets = m["histogram"]["buckets"]
    assert sum(b[2] for b in buckets) == n
    assert buckets[0][1] * 1000 > DELAY_US * 1000  # nothing shorter than the sleep
    for i, stream in enumerate(STREAMS):
        durs = t[i]["dur"]
        # the eBPF call duration lies inside the driver's measurement of the same calls
        mean_ns = m["breakdown"][stream]["mean"] * 1000
        assert DELAY_US * (i + 1) * 1000 <= mean_ns <= durs.mean()
        # the bucket holding the driver-measured median holds the tracer's median too
        driver_p50 = np.percentile(durs, 50, method="inverted_cdf")
        if mode == "events":
            assert same_bucket(m["breakdown"][stream]["p50"] * 1000 - 1, driver_p50)
        want = bucket_index_scalar(int(driver_p50))
        held = sum(b[2] for b in buckets if abs(bucket_index_scalar(round(b[0] * 1000)) - want) <= 1)
        assert held >= n // 4, (i, buckets)


@pytest.mark.parametrize("entry", ["cudaex", "graph"])
def test_cuda_other_launch_entry_points_read_their_stream(bpftrace, fakelibs, entry: str) -> None:
    n = 20
    r, _ = run(["cuda"], [str(fakelibs.driver), entry, str(fakelibs.cuda), str(n), "0", *STREAMS],
               {"cuda": fakelibs.cuda})
    m = metric(r, "cuda", "launch")
    assert m["count"] == n
    assert set(m["breakdown"]) == set(STREAMS)


def test_hip_fake_library_stream_is_the_second_stack_slot(bpftrace, fakelibs) -> None:
    n = 40
    r, _ = run(["hip_calls"], [str(fakelibs.driver), "hip", str(fakelibs.hip), str(n), str(DELAY_US), *STREAMS],
               {"hip": fakelibs.hip})
    m = metric(r, "hip_calls", "launch_call")
    assert m["count"] == n and m["lost_events"] == 0
    assert {k: v["count"] for k, v in m["breakdown"].items()} == {STREAMS[0]: n // 2, STREAMS[1]: n // 2}
    assert m["breakdown"][STREAMS[1]]["mean"] >= 2 * DELAY_US


def test_hip_probe_set_on_the_real_rocm_runtime_library(bpftrace, fakelibs) -> None:
    from aorta_tui.trace.targets import resolve_library

    real, how = resolve_library(["libamdhip64.so*"])
    if real is None or "fakelib" in str(real):
        pytest.skip(f"Debian's libamdhip64-5 is not installed ({how}); apt-get install libamdhip64-5")
    n = 25
    r, _ = run(["hip"], [str(fakelibs.driver), "realhip", str(real), str(n), "0", *STREAMS], {})
    m = metric(r, "hip", "launch")
    assert r["probe_sets"]["hip"]["detection"]["library"] == str(real)
    assert m["count"] == n
    assert set(m["breakdown"]) == set(STREAMS)


def test_memory_probe_set_records_allocation_sizes_and_pointers(bpftrace, fakelibs) -> None:
    n = 30
    r, _ = run(["memory"], [str(fakelibs.driver), "alloc", str(fakelibs.cuda), str(n), "4096", *STREAMS],
               {"cuda": fakelibs.cuda})
    alloc = metric(r, "memory", "cuda_alloc")
    free = metric(r, "memory", "cuda_free")
    assert alloc["count"] == n and free["count"] == n
    assert alloc["total_bytes"] == sum(4096 * (i % 2 + 1) for i in range(n))
    # the fake allocator hands out consecutive 1 MiB-spaced pointers; frees name the same ones
    assert set(alloc["breakdown"]) == set(free["breakdown"])
    assert len(alloc["breakdown"]) == n
    amdgpu_here = Path("/sys/kernel/tracing/events/amdgpu/amdgpu_bo_move").exists()
    assert alloc["attached"] and metric(r, "memory", "bo_move")["attached"] == amdgpu_here


def test_observer_cost_is_calibrated_on_the_probed_library(bpftrace, fakelibs, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    n = 200
    s = TraceSession(["cuda"], command=[str(fakelibs.driver), "cuda", str(fakelibs.cuda), str(n), "0", *STREAMS],
                     library_paths={"cuda": fakelibs.cuda}, calibrate=True, device_timestamps="off")
    with s:
        s.wait(timeout=60)
    r = s.result().to_json()
    cost = r["probe_sets"]["cuda"]["observer_cost"]
    assert cost["calibrated_on"] == f"{fakelibs.cuda}:cuDriverGetVersion"
    assert cost["per_hit_us"] > 0 and cost["probe_hits"] == n
    assert cost["cpu_fraction"] == pytest.approx(cost["probe_hits_per_s"] * cost["per_hit_us"] / 1e6, rel=1e-6)
    assert cost["entry_and_return_us"] > 0  # calibrated too, for the *_calls sets
    # issue 34: what the program pays, from the launches and the calibrated launch uprobe (no
    # collector here: eBPF only), as a share of the run, never "% of a CPU"
    pc = cost["program_cost"]
    assert pc["launches"] == n and pc["added_per_launch_us"] == pytest.approx(cost["per_hit_us"])
    assert pc["share"] == pytest.approx(n * cost["per_hit_us"] / 1e6 / r["wall_s"], rel=1e-6)
    assert (tmp_path / "cache" / "aorta-tui" / "trace-calibration.json").exists()


def test_hsa_doorbell_stores_are_counted_per_signal(bpftrace, fakelibs) -> None:
    n = 30
    r, _ = run(["hsa"], [str(fakelibs.driver), "hsa", str(fakelibs.hip), str(n), "0", *STREAMS],
               {"hsa": fakelibs.hip})
    m = metric(r, "hsa", "doorbell")
    assert m["count"] == n and m["lost_events"] == 0
    # the signal handle (passed by value) is the key
    assert {k: v["count"] for k, v in m["breakdown"].items()} == {STREAMS[0]: n // 2, STREAMS[1]: n // 2}


def test_a_collector_that_never_spoke_is_a_warning_not_zero_launches(bpftrace, fakelibs) -> None:
    """The default takes launches from the CUPTI collector when CUPTI is found; a program whose
    libcuda never loads it (this fake one) must not read as a program that launched nothing."""
    r, _ = run(["cuda"], [str(fakelibs.driver), "cuda", str(fakelibs.cuda), "10", "100", *STREAMS],
               {"cuda": fakelibs.cuda}, device_timestamps="auto")
    dt = r["probe_sets"]["cuda"].get("device_timestamps") or {}
    if dt.get("launch_source", {}).get("mode", "ebpf") == "ebpf":
        pytest.skip("no CUPTI here: launches come from the uprobe, as the other tests check")
    m = metric(r, "cuda", "launch")
    assert m["count"] == 0 and m["records_sent_by_collector"] is None
    assert any("no record came from the CUPTI collector" in w and "--launch-source ebpf" in w
               for w in r["warnings"]), r["warnings"]
