"""The join on records recorded on the H200: the collector's bytes and the eBPF launches of a
real trace, replayed on the CPU in arrival-like batches, give the counts and the figures the
live session gave there (tests/fixtures/trace/gpu-h200/dispatch/README.md)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from aorta_tui.trace.device.join import DispatchJoin
from aorta_tui.trace.device.records import RECORD_BYTES, parse

REC = Path(__file__).resolve().parents[1] / "fixtures" / "trace" / "gpu-h200" / "dispatch"


def _ebpf_launches() -> np.ndarray:
    with gzip.open(REC / "rec.raw.jsonl.gz", "rt") as fh:
        rows = [json.loads(ln) for ln in fh if '"metric":"launch"' in ln]
    return np.array([(r["ts_ns"], r["pid"], r["tid"], r["key"]) for r in rows], dtype=np.int64)


def _replay(chunk_records: int, ebpf_batch: int) -> tuple[DispatchJoin, dict[str, list[int]]]:
    got: dict[str, list[int]] = {}

    def emit(name: str, ts: np.ndarray, pid: np.ndarray, key: np.ndarray, value: np.ndarray) -> None:
        got.setdefault(name, []).extend(value.tolist())

    join = DispatchJoin(emit)
    launches = _ebpf_launches()
    launches = launches[np.argsort(launches[:, 0], kind="stable")]
    data = (REC / "rec.cupti.bin").read_bytes()
    step = chunk_records * RECORD_BYTES
    chunks = [data[i:i + step] for i in range(0, len(data), step)]
    # alternate: a batch of eBPF launches with its heartbeat, then a read of device records
    n_rounds = max(len(chunks), -(-len(launches) // ebpf_batch))
    rest = b""
    for i in range(n_rounds):
        part = launches[i * ebpf_batch:(i + 1) * ebpf_batch]
        if len(part):
            join.add_launches(part[:, 0], part[:, 1], part[:, 2], part[:, 3])
            join.add_heartbeat(int(part[:, 0].max()))
        if i < len(chunks):
            parsed = parse(rest + chunks[i])
            rest = parsed.rest
            join.add_device(parsed)
    join.finish()
    return join, got


@pytest.mark.parametrize(("chunk_records", "ebpf_batch"), [(64, 500), (1000, 97), (17, 5000)])
def test_recorded_h200_trace_joins_every_launch_exactly(chunk_records: int, ebpf_batch: int) -> None:
    result = json.loads((REC / "rec.json").read_text())
    live = result["probe_sets"]["cuda"]
    join, got = _replay(chunk_records, ebpf_batch)
    c = join.counts
    # the live session joined every one of its launches; so must the replay, in any batching
    assert c["ebpf_launches"] == live["metrics"]["launch"]["count"] == 7273
    assert c["launches_with_device_record"] == c["kernels_joined"] == c["kernels"] == 7273
    for k in ("kernels_without_callback", "callbacks_without_kernel", "device_launches_without_ebpf",
              "ebpf_taken_twice", "negative_launch_to_start", "malformed_records"):
        assert c[k] == 0, k
    # exact percentiles, the method the session uses (every value kept)
    for name in ("launch_to_start", "kernel_duration", "queued"):
        vals = np.asarray(got[name])
        want = live["metrics"][name]["histogram"]["percentiles"]
        scale = 1.0 if name == "queued" else 1000.0
        assert np.percentile(vals, 50, method="inverted_cdf") / scale == pytest.approx(want["p50"])
        assert vals.max() / scale == pytest.approx(want["max"])
    assert join.clock.uncertainty_ns is not None and join.clock.uncertainty_ns < 5_000


def test_recorded_backlog_behaves_as_the_physics_says() -> None:
    """bursts.py queues 100 tiny kernels behind a ~5 ms sleep kernel: the tiny kernels wait
    about that long, and each launch finds up to 99 kernels still waiting."""
    _join, got = _replay(64, 500)
    delays = np.asarray(got["launch_to_start"])
    queued = np.asarray(got["queued"])
    assert np.percentile(delays, 50) > 1_000_000  # most launches wait behind the sleep (ns)
    assert queued.max() == 99
    assert (np.asarray(got["kernel_duration"]) > 0).all()


def test_perfetto_draws_a_flow_from_every_launch_to_its_kernel() -> None:
    from aorta_tui.trace.export import GPU_PID, read_raw, to_chrome_trace

    trace = to_chrome_trace(read_raw(REC / "rec.raw.jsonl.gz"))
    ev = trace["traceEvents"]
    starts = {e["id"]: e for e in ev if e["ph"] == "s" and e["name"] == "launch->start"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f" and e["name"] == "launch->start"}
    assert len(starts) == len(ends) == 7273  # one arrow per joined launch
    for fid, s in list(starts.items())[:500]:
        f = ends[fid]
        assert f["pid"] == GPU_PID and s["pid"] != GPU_PID  # from the host thread to a GPU track
        assert f["ts"] >= s["ts"]  # a kernel never starts before its launch call
    kernels = [e for e in ev if e["ph"] == "X" and e["name"] == "cuda.kernel_duration"]
    assert len(kernels) == 7273 and all(e["pid"] == GPU_PID for e in kernels)
