"""Issue 34: launch -> start in three parts (host, push, GPU queue) from CUPTI's latency
timestamps, and the default mode that takes launches from the kernel records alone. Records are
packed in the collector's real wire format (KERNEL_LAT, STREAM, POOL) and parsed by the real
parser; only the GPU is synthetic."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.trace.device.join import DispatchJoin
from aorta_tui.trace.device.latency import STREAM_ID_UNKNOWN, kernel_columns, split
from aorta_tui.trace.device.records import DOMAIN_DRIVER, Rec, pack, parse

T0 = 10**12
PID = 777
HANDLE = 0x5555_0000_1230


class Sink:
    def __init__(self) -> None:
        self.got: dict[str, list[tuple[int, int, int, int]]] = defaultdict(list)

    def __call__(self, name, ts, pid, key, value) -> None:  # noqa: ANN001 - the join's Emit
        assert len(ts) == len(pid) == len(key) == len(value)
        self.got[name] += [tuple(int(x) for x in row) for row in zip(ts, pid, key, value, strict=True)]

    def values(self, name: str) -> list[int]:
        return [v for *_r, v in self.got[name]]


def kernel_lat(corr: int, queued: int, submitted: int, start: int, end: int, stream_id: int = 13,
               graph: int = 0, pid: int = PID) -> bytes:
    return pack(Rec.KERNEL_LAT, pid, corr | (graph << 32), start, end, 0 | (1 << 32), stream_id, queued, submitted)


def stream(stream_id: int, handle: int, pid: int = PID) -> bytes:
    return pack(Rec.STREAM, pid, stream_id, handle, 1, 0)


def activity_join() -> tuple[DispatchJoin, Sink, list]:
    sink = Sink()
    seen: list = []
    j = DispatchJoin(sink, launches="activity", on_launches=lambda *a: seen.append(a))
    j.add_device(parse(pack(Rec.HELLO, PID, 130000, 100, 0, 1, 0, 0, 1)))
    return j, sink, seen


def test_default_mode_splits_queued_to_start_into_push_and_gpu_queue_keyed_by_the_handle() -> None:
    j, sink, seen = activity_join()
    j.add_device(parse(stream(13, HANDLE) + kernel_lat(5, T0, T0 + 3_000, T0 + 3_500, T0 + 9_000)))
    assert sink.got["launch_to_start"] == [(T0, PID, HANDLE, 3_500)]
    assert sink.values("launch_push") == [3_000]
    assert sink.values("launch_gpu_queue") == [500]
    assert "launch_host" not in sink.got  # no entry time in this mode: never made up
    assert sink.values("kernel_duration") == [5_500]
    assert j.counts["activity_launches"] == 1 and j.counts["stream_unmapped"] == 0
    (ts, pid, _tid, key), = seen
    assert ts.tolist() == [T0] and key.tolist() == [HANDLE] and pid.tolist() == [PID]


def test_a_stream_never_mapped_keeps_its_cupti_id_and_is_counted() -> None:
    j, sink, _ = activity_join()
    j.add_device(parse(stream(99, 0, pid=PID) + pack(Rec.STREAM, PID, STREAM_ID_UNKNOWN, 0xABC, 1, 999)
                       + kernel_lat(1, T0, T0 + 10, T0 + 20, T0 + 30, stream_id=13)))
    assert [k for _t, _p, k, _v in sink.got["launch_to_start"]] == [13]
    assert j.counts["stream_unmapped"] == 1
    assert j.streams.refused == 1


def test_unknown_latency_timestamps_count_the_launch_but_give_no_parts() -> None:
    j, sink, seen = activity_join()
    j.add_device(parse(kernel_lat(1, 0, 0, T0 + 20, T0 + 30)))
    assert j.counts["activity_launches"] == 1 and len(seen) == 1
    assert not sink.got["launch_to_start"] and not sink.got["launch_push"]
    assert j.counts["latency_unknown"] == 1


def test_a_graph_counts_one_launch_at_its_first_kernel() -> None:
    j, sink, _ = activity_join()
    recs = b"".join(kernel_lat(40, T0 + i, T0 + i + 5, T0 + 100 * i + 50, T0 + 100 * i + 90, graph=3)
                    for i in range(3))
    j.add_device(parse(recs))
    assert j.counts["activity_launches"] == 1
    assert len(sink.got["launch_to_start"]) == 1 and len(sink.got["kernel_duration"]) == 3


def test_backlog_the_gpu_queue_part_carries_the_wait() -> None:
    """A long kernel ahead: the tiny kernels' wait is in submitted -> start, not in push."""
    j, sink, _ = activity_join()
    sleep = kernel_lat(1, T0, T0 + 3_000, T0 + 4_000, T0 + 10_000_000)
    tiny = b"".join(kernel_lat(2 + i, T0 + 10_000 * (i + 1), T0 + 10_000 * (i + 1) + 2_000,
                               T0 + 10_000_000 + 1_000 * i, T0 + 10_000_000 + 1_000 * i + 500) for i in range(50))
    j.add_device(parse(sleep + tiny))
    push, gpu = sink.values("launch_push")[1:], sink.values("launch_gpu_queue")[1:]
    assert max(push) == 2_000 and min(gpu) > 9_000_000
    # the sleep has started before the first tiny launch: each finds the tiny ones before it waiting
    assert sink.values("queued")[1:] == list(range(50))


def test_with_an_entry_time_the_three_parts_add_up_to_launch_to_start() -> None:
    sink = Sink()
    j = DispatchJoin(sink, launches="collector")
    j.add_device(parse(pack(Rec.HELLO, PID, 130000, 100, 1 << 17, 1, 1)))
    j.add_device(parse(pack(Rec.LAUNCH, PID, 9, 5, T0, HANDLE, 307 | (DOMAIN_DRIVER << 32))
                       + kernel_lat(5, T0 + 7_000, T0 + 10_000, T0 + 10_600, T0 + 20_000)))
    (host,), (push,), (gpu,) = sink.values("launch_host"), sink.values("launch_push"), sink.values("launch_gpu_queue")
    assert (host, push, gpu) == (7_000, 3_000, 600)
    assert sink.values("launch_to_start") == [host + push + gpu]


def test_the_clock_offset_maps_queued_and_submitted_like_start() -> None:
    j, sink, _ = activity_join()
    mono, off = 5 * 10**11, 123_456
    j.add_device(parse(pack(Rec.CLOCK, PID, mono, mono + off, mono)))
    j.add_device(parse(kernel_lat(1, T0 + off, T0 + off + 100, T0 + off + 300, T0 + off + 400)))
    assert sink.got["launch_to_start"] == [(T0, PID, 13, 300)]


def test_pool_and_hello_records_reach_the_summary() -> None:
    j, _sink, _ = activity_join()
    j.add_device(parse(pack(Rec.POOL, PID, 2, 14, 4 << 20, 1)))
    p = j.summary()["processes"][str(PID)]
    assert p["buffer_pool"] == {"buffers_refused": 2, "buffers_ready": 14, "buffer_bytes": 4 << 20,
                                "latency_timestamps": 1}
    assert p["hello"]["latency_timestamps"] == 1


def test_the_pool_record_says_which_device_records_the_collector_asked_for() -> None:
    j, _sink, _ = activity_join()
    j.add_device(parse(pack(Rec.POOL, PID, 0, 16, 4 << 20, 1, 1)))  # latency on: kernels only
    summary = j.summary()
    assert summary["processes"][str(PID)]["buffer_pool"]["activity_kinds"] == ["kernel"]
    # copies not asked for are not measured, never "0 copies"
    assert summary["counts"]["memcpy"] is None and summary["counts"]["memset"] is None
    assert set(summary["not_recorded"]) == {"memcpy", "memset"}
    j.add_device(parse(pack(Rec.POOL, PID, 0, 16, 4 << 20, 27, 7)))  # latency off: copies too
    summary = j.summary()
    assert summary["processes"][str(PID)]["buffer_pool"]["activity_kinds"] == ["kernel", "memcpy", "memset"]
    assert summary["counts"]["memcpy"] == 0 and "not_recorded" not in summary  # asked for: a real 0


u32 = st.integers(0, 2**32 - 1)
ts = st.integers(1, 2**62)


@settings(max_examples=200, deadline=None)
@given(corr=u32, graph=u32, queued=ts, submitted=ts, start=ts, end=ts, sid=u32)
def test_kernel_lat_fields_round_trip_through_the_wire_format(corr, graph, queued, submitted, start, end, sid) -> None:
    parsed = parse(kernel_lat(corr, queued, submitted, start, end, stream_id=sid, graph=graph))
    k = parsed.of(Rec.KERNEL_LAT)
    cols = kernel_columns(k)
    assert (cols.corr.tolist(), cols.graph.tolist()) == ([corr], [graph])
    assert (cols.queued.tolist(), cols.submitted.tolist()) == ([queued], [submitted])
    assert k["f"][0, 4] == sid


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9),
                          st.integers(0, 10**9)), min_size=1, max_size=40))
def test_the_parts_always_add_up_and_unknown_is_never_a_part(rows) -> None:
    entry = np.array([r[0] for r in rows], dtype=np.int64) + T0
    q = np.array([r[1] for r in rows], dtype=np.int64)
    q = np.where(q % 7 == 0, 0, q + entry)  # some unknown (0)
    s = np.where(q > 0, q + np.array([r[2] for r in rows]), 0)
    start = entry + 3 * 10**9 + np.array([r[3] for r in rows])
    parts = split(entry, q, s, start)
    assert parts.known.tolist() == (q > 0).tolist()
    total = parts.host + parts.push + parts.gpu_queue
    assert total.tolist() == (start - entry)[parts.known].tolist()


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=0, max_size=64 * 6))
def test_garbage_never_raises_in_the_activity_join(data) -> None:
    j, _sink, _ = activity_join()
    j.add_device(parse(data))
    j.finish()


def test_perfetto_draws_the_parts_end_to_end_on_the_launch_path_track() -> None:
    from aorta_tui.trace.export import to_chrome_trace

    recs = [{"set": "cuda", "metric": m, "ts_ns": T0, "key": HANDLE, "aux": 0, "pid": PID, "tid": None,
             "value": v, "kind": "duration"}
            for m, v in (("launch_host", 7_000), ("launch_push", 3_000), ("launch_gpu_queue", 600))]
    ev = [e for e in to_chrome_trace(recs)["traceEvents"] if e.get("ph") == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in ev] == [
        ("cuda.launch_host", T0 / 1000, 7.0), ("cuda.launch_push", T0 / 1000 + 7.0, 3.0),
        ("cuda.launch_gpu_queue", T0 / 1000 + 10.0, 0.6)]
    assert len({e["tid"] for e in ev}) == 1
