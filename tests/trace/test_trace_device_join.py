"""DispatchJoin (aorta_tui/trace/device/join.py) on synthetic eBPF launches and device records
in the collector's real wire format: what joins to what, the derived values, and what is counted
when nothing matches. Only the GPU is synthetic; the records are packed as the collector writes
them and parsed by the real parser."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.trace.device.join import DispatchJoin
from aorta_tui.trace.device.records import DOMAIN_DRIVER, DOMAIN_RUNTIME, Rec, pack, parse

T0 = 10**12  # far from 0, so "newest - window" arithmetic never goes negative
PID = 4321
CBID_LAUNCH = 307  # CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel; the join never reads it


class Sink:
    """Collects every emitted value as (ts, pid, key, value) per metric."""

    def __init__(self) -> None:
        self.got: dict[str, list[tuple[int, int, int, int]]] = defaultdict(list)

    def __call__(self, name: str, ts: np.ndarray, pid: np.ndarray, key: np.ndarray, value: np.ndarray) -> None:
        assert len(ts) == len(pid) == len(key) == len(value)
        self.got[name] += [tuple(int(x) for x in row) for row in zip(ts, pid, key, value, strict=True)]

    def values(self, name: str) -> list[int]:
        return [v for _t, _p, _k, v in self.got[name]]

    def by_key(self, name: str) -> dict[int, list[int]]:
        out: dict[int, list[int]] = defaultdict(list)
        for _t, _p, k, v in self.got[name]:
            out[k].append(v)
        return dict(out)


def hello(pid: int = PID) -> bytes:
    return pack(Rec.HELLO, pid, 130000, 100, 1 << 17, 1, 1)


def clock(mono: int, offset: int = 0, width: int = 0, pid: int = PID) -> bytes:
    """A CLOCK record whose measured offset (cupti - midpoint) is ``offset``."""
    return pack(Rec.CLOCK, pid, mono, mono + width // 2 + offset, mono + width)


def callback(corr: int, t: int, tid: int, domain: int = DOMAIN_DRIVER, stream: int = 0, pid: int = PID) -> bytes:
    return pack(Rec.LAUNCH, pid, tid, corr, t, stream, CBID_LAUNCH | (domain << 32))


def kernel(corr: int, start: int, end: int, device: int = 0, graph: int = 0, pid: int = PID) -> bytes:
    return pack(Rec.KERNEL, pid, corr, start, end, device | (1 << 32), 7, graph)


def launches(j: DispatchJoin, rows: list[tuple[int, int, int]], pid: int = PID, hb: bool = True) -> None:
    """eBPF launches as (ts, tid, stream)."""
    a = np.array(rows, dtype=np.int64).reshape(-1, 3)
    j.add_launches(a[:, 0], np.full(len(a), pid, dtype=np.int64), a[:, 1], a[:, 2])
    # bpftrace's heartbeat follows its records: everything up to 1 ms after them has been read
    if hb:
        heartbeat(j, int(a[:, 0].max()) + 1_000_000)


def heartbeat(j: DispatchJoin, ts: int) -> None:
    """bpftrace's heartbeat: every eBPF record stamped before ``ts`` has been read."""
    j.add_heartbeat(ts)


def device(j: DispatchJoin, *recs: bytes) -> None:
    j.add_device(parse(b"".join(recs)))


def new() -> tuple[DispatchJoin, Sink]:
    s = Sink()
    return DispatchJoin(s), s


# -- link 2: callback -> eBPF launch ----------------------------------------------------------------
def test_driver_callback_joins_the_threads_last_launch_at_or_before_it() -> None:
    j, s = new()
    launches(j, [(T0, 11, 0xA), (T0 + 10_000, 11, 0xA), (T0 + 20_000, 11, 0xA)])
    # callbacks 700 ns into the second and third calls (a driver callback runs inside the call)
    device(j, hello(), clock(T0 - 1000), callback(2, T0 + 10_700, 11), callback(3, T0 + 20_000, 11),
           kernel(2, T0 + 50_000, T0 + 51_000), kernel(3, T0 + 60_000, T0 + 61_500))
    assert s.values("launch_to_start") == [40_000, 40_000]  # start - the call's own entry
    assert sorted(s.values("kernel_duration")) == [1000, 1500]
    assert j.counts["kernels_joined"] == 2 and j.counts["device_launches_without_ebpf"] == 0


def test_runtime_callback_joins_the_threads_first_launch_at_or_after_it() -> None:
    j, s = new()
    launches(j, [(T0, 11, 0xA), (T0 + 10_000, 11, 0xA)])
    # cudaLaunchKernel's callback fires before the cuLaunchKernel it calls
    device(j, clock(T0 - 1000), callback(1, T0 - 300, 11, DOMAIN_RUNTIME), callback(2, T0 + 9_000, 11, DOMAIN_RUNTIME),
           kernel(1, T0 + 5_000, T0 + 6_000), kernel(2, T0 + 15_000, T0 + 16_000))
    assert [(t, v) for t, _p, _k, v in s.got["launch_to_start"]] == [(T0, 5_000), (T0 + 10_000, 5_000)]


def test_measured_clock_offset_is_subtracted_from_device_times() -> None:
    j, s = new()
    launches(j, [(T0, 11, 0xA)])
    # CUPTI's clock reads 5000 ns ahead of CLOCK_MONOTONIC, bracketed within +-100 ns
    device(j, hello(), clock(T0 - 10_000, offset=5000, width=200), callback(1, T0 + 500, 11),
           kernel(1, T0 + 2_000 + 5000, T0 + 3_000 + 5000))
    assert s.values("launch_to_start") == [2_000]
    assert s.values("kernel_duration") == [1_000]
    c = j.clock.to_dict()
    assert c["offset_ns"] == 5000 and c["uncertainty_ns"] == 100 and c["samples"] == 1
    assert "CLOCK_MONOTONIC" in c["method"]


def test_queued_depth_behind_one_long_kernel_matches_the_hand_computed_backlog() -> None:
    j, s = new()
    n = 8
    lts = [T0 + i * 1_000 for i in range(n + 1)]  # launch entries, 1 us apart
    launches(j, [(t, 11, 0xB) for t in lts])
    # kernel 0 starts at once and runs 1 ms; the tiny ones then run back to back
    starts = [T0 + 500] + [T0 + 1_000_500 + i * 100 for i in range(n)]
    ends = [T0 + 1_000_500] + [st + 100 for st in starts[1:]]
    recs = [callback(i + 1, t + 200, 11) for i, t in enumerate(lts)]
    recs += [kernel(i + 1, a, b) for i, (a, b) in enumerate(zip(starts, ends, strict=True))]
    device(j, clock(T0 - 1000), *recs)
    # at launch i, kernels 0..i-1 launched earlier; kernel 0 already started: depths 0,0,1,2,...
    hand = [sum(1 for k in range(i) if starts[k] > lts[i]) for i in range(n + 1)]
    assert hand == [0, 0, *range(1, n)]
    assert s.by_key("queued") == {0xB: hand}
    assert s.values("launch_to_start") == [a - t for a, t in zip(starts, lts, strict=True)]
    # the backlog: every tiny kernel waits at least the long kernel minus its own launch offset
    assert all(v >= 1_000_000 - i * 1_000 for i, v in enumerate(s.values("launch_to_start")[1:], 1))


def test_gpu_idle_gaps_are_per_device() -> None:
    j, s = new()
    device(j, clock(T0 - 1000),
           kernel(1, T0 + 100, T0 + 200, device=0), kernel(2, T0 + 250, T0 + 300, device=0),
           kernel(3, T0 + 280, T0 + 400, device=0),  # overlaps: no gap
           kernel(4, T0 + 500, T0 + 600, device=0),
           kernel(5, T0 + 1000, T0 + 1100, device=1), kernel(6, T0 + 1300, T0 + 1400, device=1))
    assert s.by_key("gpu_idle") == {0: [50, 100], 1: [200]}
    # a later read continues from the last end seen on the device
    device(j, kernel(7, T0 + 900, T0 + 950, device=0))
    assert s.by_key("gpu_idle")[0] == [50, 100, 300]


def test_graph_launch_gives_one_launch_to_start_and_every_kernel_duration() -> None:
    j, s = new()
    launches(j, [(T0, 11, 0xC)])
    device(j, clock(T0 - 1000), callback(9, T0 + 400, 11),
           kernel(9, T0 + 3_000, T0 + 4_000, graph=77), kernel(9, T0 + 4_100, T0 + 4_300, graph=77),
           kernel(9, T0 + 4_400, T0 + 5_000, graph=77))
    assert s.values("launch_to_start") == [3_000]
    assert sorted(s.values("kernel_duration")) == [200, 600, 1000]
    assert len(s.values("queued")) == 1
    assert j.counts["kernels_joined"] == 3 and j.counts["launches_with_device_record"] == 1
    assert j.counts["ebpf_taken_twice"] == 0
    j.finish()
    assert j.counts["device_launches_without_ebpf"] == 0 and j.counts["kernels_without_callback"] == 0


def test_graph_kernels_in_a_later_flush_still_join_and_the_callback_is_not_an_orphan() -> None:
    j, s = new()
    launches(j, [(T0, 11, 0xC)])
    device(j, clock(T0 - 1000), callback(9, T0 + 400, 11), kernel(9, T0 + 3_000, T0 + 4_000, graph=77))
    device(j, kernel(9, T0 + 4_100, T0 + 4_300, graph=77))  # the next flush
    j.finish()
    assert sorted(s.values("kernel_duration")) == [200, 1000]
    assert j.counts["callbacks_without_kernel"] == 0


# -- arrival in any order ---------------------------------------------------------------------------
def test_device_records_before_their_ebpf_launches_still_join() -> None:
    j, s = new()
    device(j, clock(T0 - 1000), callback(1, T0 + 300, 11), kernel(1, T0 + 2_000, T0 + 2_500))
    assert s.values("launch_to_start") == []  # waiting for the eBPF record
    launches(j, [(T0, 11, 0xA)])
    assert s.values("launch_to_start") == [2_000]
    assert s.values("kernel_duration") == [500]


def test_kernel_before_its_callback_in_one_read_and_across_two_reads() -> None:
    j, s = new()
    launches(j, [(T0, 11, 0xA), (T0 + 10_000, 11, 0xA)])
    device(j, clock(T0 - 1000), kernel(1, T0 + 2_000, T0 + 2_500), callback(1, T0 + 300, 11))
    assert s.values("launch_to_start") == [2_000]
    device(j, kernel(2, T0 + 12_000, T0 + 13_000))  # its callback is in the next read
    assert s.values("launch_to_start") == [2_000]
    device(j, callback(2, T0 + 10_300, 11))
    assert s.values("launch_to_start") == [2_000, 2_000]
    j.finish()
    assert j.counts["kernels_without_callback"] == 0


# -- unmatched things are counted, never joined by order ------------------------------------------
def test_two_interleaved_threads_each_kernel_joins_its_own_threads_launch() -> None:
    j, s = new()
    launches(j, [(T0, 11, 0xA), (T0 + 1_000, 22, 0xB), (T0 + 2_000, 11, 0xA), (T0 + 3_000, 22, 0xB)])
    device(j, clock(T0 - 1000),
           callback(1, T0 + 100, 11), callback(2, T0 + 1_100, 22),
           callback(3, T0 + 2_100, 11), callback(4, T0 + 3_100, 22),
           # thread 22's kernels start first: order of arrival says nothing
           kernel(2, T0 + 10_000, T0 + 10_100), kernel(4, T0 + 10_200, T0 + 10_300),
           kernel(1, T0 + 20_000, T0 + 20_100), kernel(3, T0 + 20_200, T0 + 20_300))
    assert s.by_key("launch_to_start") == {0xA: [20_000, 18_200], 0xB: [9_000, 7_200]}
    assert j.per_stream == {0xA: {"launches": 2, "with_device_record": 2},
                            0xB: {"launches": 2, "with_device_record": 2}}


def test_a_thread_without_callbacks_never_lends_its_launch_to_another_threads_kernel() -> None:
    j, s = new()
    # thread 22 launches right before thread 11's callback, but 11 has no eBPF launch of its own
    launches(j, [(T0, 22, 0xB)])
    device(j, clock(T0 - 1000), callback(1, T0 + 100, 11), kernel(1, T0 + 2_000, T0 + 2_100))
    j.finish()
    assert s.values("launch_to_start") == []
    assert j.counts["device_launches_without_ebpf"] == 1
    assert j.per_stream == {0xB: {"launches": 1, "with_device_record": 0}}


def test_unmatched_records_are_counted_at_finish() -> None:
    j, s = new()
    launches(j, [(T0, 11, 0xA), (T0 + 10_000, 11, 0xA)])
    device(j, clock(T0 - 1000),
           callback(1, T0 + 300, 11),  # never gets a kernel
           kernel(99, T0 + 5_000, T0 + 6_000),  # no callback ever
           callback(2, T0 + 10_300, 11), kernel(2, T0 + 12_000, T0 + 13_000))
    j.finish()
    assert s.values("launch_to_start") == [2_000]
    c = j.counts
    assert c["kernels"] == 2 and c["kernels_joined"] == 1
    assert c["kernels_without_callback"] == 1
    assert c["callbacks_without_kernel"] == 1
    assert c["ebpf_launches"] == 2 and c["launches_with_device_record"] == 1
    summary = j.summary()
    assert summary["per_stream"] == {"0xa": {"launches": 2, "with_device_record": 1}}
    assert "never by order" in summary["join"]


def test_stats_bye_and_errors_are_reported_per_process() -> None:
    j, _s = new()
    device(j, hello(10), pack(Rec.STATS, 10, 100, 1, 2, 3, 50, 4, 5), pack(Rec.ERROR, 11, 39, 1),
           pack(Rec.STATS, 11, 7, 0, 0, 0, 0, 0, 0))
    p = j.summary()["processes"]
    assert p["10"]["stats"]["launch_callbacks"] == 100 and not p["10"]["exited_cleanly"]
    assert p["10"]["hello"]["cupti_version"] == 130000
    assert p["11"]["errors"] == ["cuptiSubscribe failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED "
                                 "(another profiler already uses CUPTI in this process)"]
    device(j, pack(Rec.BYE, 10, 120, 10, 20, 30, 60, 5, 40))
    s = j.summary()
    assert s["processes"]["10"]["exited_cleanly"]
    assert s["dropped_by_collector"] == {"dropped_ring": 10, "dropped_pipe": 20, "dropped_cupti": 30,
                                         "dropped_staging": 40}


def test_malformed_records_are_counted() -> None:
    j, _s = new()
    good = kernel(1, T0, T0 + 1)
    j.add_device(parse(b"\xff" * 64 + good))
    assert j.counts["malformed_records"] == 1 and j.counts["kernels"] == 1


def test_device_first_two_launches_of_one_thread() -> None:
    j, s = new()
    device(j, clock(T0 - 1000), callback(1, T0 + 300, 11), callback(2, T0 + 2_300, 11),
           kernel(1, T0 + 1_000, T0 + 1_100), kernel(2, T0 + 3_000, T0 + 3_100))
    launches(j, [(T0, 11, 0xA)], hb=False)  # one CPU's buffer first, no heartbeat after it yet
    launches(j, [(T0 + 2_000, 11, 0xA)])
    j.finish()
    assert sorted((t, v) for t, _p, _k, v in s.got["launch_to_start"]) == [(T0, 1_000), (T0 + 2_000, 1_000)]


# -- property: any arrival order and batching joins exactly as one batch -----------------------------
@dataclass
class Trace:
    ebpf: list[tuple[int, int, int]]  # (ts, tid, stream)
    device: list[bytes]  # in the collector's emission order


def _trace(n_threads: int, per_thread: list[int], delays: list[int], domains: list[int]) -> Trace:
    ebpf, cbs, kers = [], [], []
    stream_end: dict[int, int] = {}
    t = T0
    # launches round-robin over threads, 2 us apart; each thread has its own stream
    order = [tid for i in range(max(per_thread)) for tid in range(n_threads) if i < per_thread[tid]]
    for i, tid in enumerate(order):
        corr = i + 1
        t += 2_000
        stream = 0x100 + tid
        dom = domains[i % len(domains)]
        ebpf.append((t, 1000 + tid, stream))
        cb_t = t + 300 if dom == DOMAIN_DRIVER else t - 300
        cbs.append((cb_t, callback(corr, cb_t, 1000 + tid, dom)))
        start = max(t + delays[i % len(delays)], stream_end.get(stream, 0))
        end = start + 100 + (i % 7) * 50
        stream_end[stream] = end
        kers.append((start, kernel(corr, start, end)))
    # device order: callbacks as they happen; kernels in start order after their callbacks
    dev = [r for _t, r in sorted(cbs + kers, key=lambda x: x[0])]
    return Trace(ebpf, [hello(), clock(T0 - 5_000, offset=0)] + dev)


def _run(tr: Trace, ebpf_cuts: list[int], dev_cuts: list[int], interleave: list[bool],
         shuffle_seed: int) -> tuple[dict[str, list], dict[str, int]]:
    j, s = new()
    rng = np.random.default_rng(shuffle_seed)
    e_chunks = [tr.ebpf[a:b] for a, b in zip([0, *ebpf_cuts], [*ebpf_cuts, len(tr.ebpf)], strict=True)]
    raw = b"".join(tr.device)
    d_chunks = [raw[a:b] for a, b in zip([0, *dev_cuts], [*dev_cuts, len(raw)], strict=True)]
    rest = b""
    delivered = 0  # eBPF launches handed over so far (the list is in time order)

    def ebpf_chunk() -> None:
        nonlocal delivered
        chunk = e_chunks.pop(0)
        delivered += len(chunk)
        if chunk:
            launches(j, [chunk[i] for i in rng.permutation(len(chunk))])  # per-CPU buffers

    steps = list(interleave) + [True] * len(e_chunks) + [False] * len(d_chunks)
    for take_ebpf in steps:
        if take_ebpf and e_chunks:
            ebpf_chunk()
        elif not take_ebpf and d_chunks:
            p = parse(rest + d_chunks.pop(0))  # cut anywhere, as the FIFO reader reads
            rest = p.rest
            cb = p.of(Rec.LAUNCH)
            # eBPF ahead of the device stream (its flush period is 100 ms): a thread's launches up
            # to a callback have arrived when the callback is read. The join's limit without
            # that: test_device_first_two_launches_of_one_thread below.
            newest = int(cb["f"][:, 2].max()) + 1_000 if len(cb) else 0
            while e_chunks and delivered < len(tr.ebpf) and tr.ebpf[delivered][0] <= newest:
                ebpf_chunk()
            j.add_device(p)
    assert rest == b""
    j.finish()
    return {k: sorted(v) for k, v in s.got.items()}, dict(j.counts)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[Trace, list[int], list[int], list[bool], int]:
    n_threads = draw(st.integers(1, 3))
    per_thread = draw(st.lists(st.integers(1, 6), min_size=n_threads, max_size=n_threads))
    delays = draw(st.lists(st.integers(1_000, 3_000_000), min_size=1, max_size=5))
    domains = draw(st.lists(st.sampled_from([DOMAIN_DRIVER, DOMAIN_RUNTIME]), min_size=1, max_size=1))
    tr = _trace(n_threads, per_thread, delays, domains)
    n_bytes = 64 * len(tr.device)
    ebpf_cuts = sorted(draw(st.lists(st.integers(0, len(tr.ebpf)), max_size=4)))
    # the header (HELLO, CLOCK) is read first: the collector writes it at start-up
    dev_cuts = sorted({128, *draw(st.lists(st.integers(128, n_bytes), max_size=5))})
    interleave = draw(st.lists(st.booleans(), max_size=12))
    return tr, ebpf_cuts, dev_cuts, interleave, draw(st.integers(0, 2**31))


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_cases())
def test_any_arrival_order_joins_like_one_batch(attack_tally, case) -> None:
    tr, ebpf_cuts, dev_cuts, interleave, seed = case
    failed = 1
    try:
        want, want_counts = _run(tr, [], [], [True], 0)
        assert len(want["launch_to_start"]) == len(tr.ebpf)  # the one-batch join is complete
        got, got_counts = _run(tr, ebpf_cuts, dev_cuts, interleave, seed)
        assert got == want
        assert got_counts == want_counts
        failed = 0
    finally:
        attack_tally.record("device join arrival-order property", cases=1, failures=failed,
                            promise="any batching/interleaving joins exactly as one batch")
