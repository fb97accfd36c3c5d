"""Join the eBPF launch stream with the collector's device records, live.

Three links, none of them by order:

1. **kernel -> launch callback, by correlation id.** CUPTI gives every kernel record the
   correlation id of the API call that launched it; the collector's launch callback recorded
   that id with the calling thread and a CLOCK_MONOTONIC reading.
2. **launch callback -> eBPF launch, by thread and nesting.** The eBPF uprobe fires at the
   first instruction of ``cuLaunchKernel`` (or ``Ex``/``cuGraphLaunch``); a driver-level
   callback fires inside that same call on the same thread, so its launch is the thread's last
   eBPF launch at or before the callback. A runtime-level callback (``cudaLaunchKernel``) fires
   before the driver call it makes, so its launch is the thread's first eBPF launch at or after
   it. Both clocks are CLOCK_MONOTONIC (bpftrace ``nsecs`` and the collector's
   ``clock_gettime``). A candidate further than ``JOIN_WINDOW_NS`` away, or already taken, is
   no match: it is counted, never forced.
3. **device clock -> host clock, measured.** Kernel start/end are CUPTI timestamps; the
   collector asks CUPTI for CLOCK_MONOTONIC and also writes CLOCK records that bracket
   ``cuptiGetTimestamp()`` between two CLOCK_MONOTONIC readings. Their offset maps device
   times onto the host clock and their width bounds the error of that step.

**Launches from the collector** (``launches="collector"``, the default of a traced command in
events mode): the collector's launch callback already runs at API entry on the launching
thread, with the stream handle from the call's parameters, so the eBPF launch uprobe is
redundant there and is not attached. Link 2 then disappears: a kernel's launch *is* its
callback (time, thread, stream), and ``launch`` itself (count and interval per stream) is fed
from the callbacks (``on_launches``). ``"cross-check"`` keeps both and joins through eBPF as
before, counting the callbacks per stream beside the eBPF launches.

**Launches from the activity records alone** (``launches="activity"``, the default of a traced
command, issue 34): no launch callback and no launch uprobe. Every kernel record carries CUPTI's
latency timestamps (``queued``, ``submitted``: device/latency.py); a kernel's launch is its
``queued`` time, its stream the handle that the collector's stream-creation callback mapped its
CUPTI stream id to (the CUPTI id itself where none did). launch -> start is then queued -> start:
the host part before ``queued`` is not seen (no entry time), and says so.

Every mode also splits launch -> start into host / push / GPU queue (``launch_host``,
``launch_push``, ``launch_gpu_queue``) wherever the latency timestamps are known.

Metrics (all keyed by the eBPF stream handle, so they sit beside ``cuda.launch``):
``launch_to_start`` (eBPF launch entry -> kernel start; for a graph, its first kernel),
``kernel_duration`` (start -> end of every kernel), ``queued`` (kernels launched on the stream
and not yet started, seen by each new launch) and ``gpu_idle`` (per device: gap between the
end of all earlier kernels and the start of the next).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aorta_tui.trace.device.latency import StreamMap, kernel_columns, split, to_host_clock
from aorta_tui.trace.device.records import (
    ACTIVITY_KIND_BITS,
    DTYPE,
    INSIDE_CALL_DOMAINS,
    Parsed,
    Rec,
    describe_error,
)

JOIN_WINDOW_NS = 50_000_000  # a launch call's callback and its uprobe are never further apart
WAIT_FOR_EBPF_NS = 5_000_000_000  # how long a device launch waits for its eBPF record
EBPF_KEEP_NS = 120_000_000_000  # an eBPF launch whose kernel has not started after this: unmatched
TAKEN_KEEP_NS = 10_000_000_000  # a taken launch stays this long: a graph's later kernels reuse it
ORPHAN_CALLBACK_NS = 30_000_000_000  # a launch callback no kernel claimed (e.g. the runtime twin)
CLOCK_SAMPLES_KEPT = 64

Emit = Callable[[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]
# emit(metric name, ts, pid, key, value): values in ns (counts for ``queued``)
OnLaunches = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]
# on_launches(ts, pid, tid, stream): launches seen by the collector (launches="collector")
LAUNCH_SOURCES = ("ebpf", "collector", "cross-check", "activity")


def _empty_u() -> np.ndarray:
    return np.empty(0, dtype=np.int64)


def _merged(key_old: np.ndarray, key_new: np.ndarray, *cols: tuple[np.ndarray, np.ndarray],
            ) -> list[np.ndarray]:
    """Old and new rows merged, sorted by key (stable): the key first, then every column."""
    key = np.concatenate([key_old, key_new])
    order = np.argsort(key, kind="stable")
    return [key[order], *(np.concatenate([old, new])[order] for old, new in cols)]


@dataclass
class _Callbacks:
    """Launch callbacks of one process not yet claimed by a kernel, sorted by correlation id."""

    corr: np.ndarray = field(default_factory=_empty_u)
    tid: np.ndarray = field(default_factory=_empty_u)
    t: np.ndarray = field(default_factory=_empty_u)
    domain: np.ndarray = field(default_factory=_empty_u)
    stream: np.ndarray = field(default_factory=_empty_u)  # from the call's parameters (driver layer)

    def add(self, corr: np.ndarray, tid: np.ndarray, t: np.ndarray, domain: np.ndarray,
            stream: np.ndarray) -> None:
        self.corr, self.tid, self.t, self.domain, self.stream = _merged(
            self.corr, corr, (self.tid, tid), (self.t, t), (self.domain, domain), (self.stream, stream))

    def keep(self, mask: np.ndarray) -> None:
        self.corr, self.tid, self.t, self.domain, self.stream = (
            a[mask] for a in (self.corr, self.tid, self.t, self.domain, self.stream))


@dataclass
class _ThreadLaunches:
    """eBPF launches of one thread, sorted by time, with a taken flag."""

    ts: np.ndarray = field(default_factory=_empty_u)
    stream: np.ndarray = field(default_factory=_empty_u)
    taken: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))

    def add(self, ts: np.ndarray, stream: np.ndarray) -> None:
        self.ts, self.stream, self.taken = _merged(
            self.ts, ts, (self.stream, stream), (self.taken, np.zeros(len(ts), dtype=bool)))


@dataclass
class _Waiting:
    """Device launches whose eBPF launch has not arrived yet."""

    pid: np.ndarray = field(default_factory=_empty_u)
    tid: np.ndarray = field(default_factory=_empty_u)
    t: np.ndarray = field(default_factory=_empty_u)
    domain: np.ndarray = field(default_factory=_empty_u)
    corr: np.ndarray = field(default_factory=_empty_u)
    start: np.ndarray = field(default_factory=_empty_u)
    end: np.ndarray = field(default_factory=_empty_u)
    device: np.ndarray = field(default_factory=_empty_u)
    first: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))
    queued: np.ndarray = field(default_factory=_empty_u)  # host clock, 0 unknown
    submitted: np.ndarray = field(default_factory=_empty_u)

    COLS = ("pid", "tid", "t", "domain", "corr", "start", "end", "device", "first", "queued", "submitted")

    def extend(self, **cols: np.ndarray) -> None:
        for name in self.COLS:
            setattr(self, name, np.concatenate([getattr(self, name), cols[name]]))

    def take(self) -> dict[str, np.ndarray]:
        out = {name: getattr(self, name) for name in self.COLS}
        for name in self.COLS:
            setattr(self, name, out[name][:0])
        return out

    def __len__(self) -> int:
        return int(len(self.t))


@dataclass
class ClockAlignment:
    """CLOCK records: cuptiGetTimestamp bracketed by two CLOCK_MONOTONIC readings."""

    offsets: list[int] = field(default_factory=list)  # cupti - midpoint, ns
    half_widths: list[int] = field(default_factory=list)
    samples: int = 0
    timestamp_callback: bool | None = None
    source: str = "cupti"  # or "rocprofiler": whose device timestamps these are

    def add(self, before: np.ndarray, cupti: np.ndarray, after: np.ndarray) -> None:
        mid = (before + after) // 2
        self.offsets = (self.offsets + (cupti - mid).tolist())[-CLOCK_SAMPLES_KEPT:]
        self.half_widths = (self.half_widths + ((after - before) // 2).tolist())[-CLOCK_SAMPLES_KEPT:]
        self.samples += int(len(mid))

    @property
    def offset_ns(self) -> int | None:
        return int(np.median(self.offsets)) if self.offsets else None

    @property
    def uncertainty_ns(self) -> int | None:
        """Bracket half-width plus half the spread of the kept offsets (drift, jitter)."""
        if not self.offsets:
            return None
        spread = (max(self.offsets) - min(self.offsets)) // 2
        return int(max(self.half_widths) + spread)

    def to_dict(self) -> dict[str, Any]:
        if self.source == "rocprofiler":
            label, how, stamp = ("rocprofiler-sdk↔CLOCK_MONOTONIC, measured",
                                 "rocprofiler-sdk timestamps (CLOCK_BOOTTIME; launch times converted "
                                 "in the collector)", "rocprofiler_get_timestamp()")
        else:
            label = "CUPTI↔CLOCK_MONOTONIC, measured"
            how = ("CUPTI timestamps on CLOCK_MONOTONIC (cuptiActivityRegisterTimestampCallback)"
                   if self.timestamp_callback else "CUPTI's default clock")
            stamp = "cuptiGetTimestamp()"
        return {
            "label": label,
            "method": f"{how}; offset measured by bracketing {stamp} between two "
                      "CLOCK_MONOTONIC readings (bpftrace nsecs is CLOCK_MONOTONIC)",
            "offset_ns": self.offset_ns,
            "uncertainty_ns": self.uncertainty_ns,
            "samples": self.samples,
            "not_included": ("the runtime's own GPU->CPU timestamp conversion (never checked on "
                             "AMD hardware)" if self.source == "rocprofiler" else
                             "CUPTI's own GPU->CPU timestamp conversion (checked against a "
                             "sleep kernel of measured length, docs/tracing.md)"),
        }


@dataclass
class ProcessStats:
    hello: dict[str, int] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    exited_cleanly: bool = False
    errors: list[str] = field(default_factory=list)
    pool: dict[str, Any] = field(default_factory=dict)  # the activity buffer pool (POOL records)


STATS_FIELDS = ("launch_callbacks", "dropped_ring", "dropped_pipe", "dropped_cupti",
                "activity_records", "buffers", "dropped_staging")


class DispatchJoin:
    """Feed it eBPF launches (``add_launches``) and device records (``add_device``), in any
    order and from any thread; it calls ``emit`` with joined metric values."""

    def __init__(self, emit: Emit, *, source: str = "cupti", launches: str = "ebpf",
                 on_launches: OnLaunches | None = None) -> None:
        if launches not in LAUNCH_SOURCES:
            raise ValueError(f"launches={launches!r} is not one of {LAUNCH_SOURCES}")
        self.emit = emit
        self.source = source  # "cupti" or "rocprofiler": names the records in what is reported
        # where a kernel's launch (time, thread, stream) comes from: see the module docstring
        self.launches = launches
        self.on_launches = on_launches
        self.collector_launches_per_pid: dict[int, int] = {}  # LAUNCH records read, per process
        self.collector_per_stream: dict[int, int] = {}  # callbacks after the trace start, per stream
        self.clock = ClockAlignment(source=source)
        self.procs: dict[int, ProcessStats] = {}
        self._callbacks: dict[int, _Callbacks] = {}
        self._launches: dict[tuple[int, int], _ThreadLaunches] = {}
        self._waiting = _Waiting()
        self._graph_first_seen: set[tuple[int, int]] = set()
        self._last_start: dict[int, np.ndarray] = {}  # per stream: starts of recent launches, in order
        self._last_end: dict[int, int] = {}  # per device: latest end seen
        self._newest_ebpf: dict[int, int] = {}  # per pid: newest eBPF launch time
        self._retry = np.empty(0, dtype=DTYPE)  # kernels whose callback was not read yet
        # every eBPF record stamped before this has been read (bpftrace's heartbeat): a callback
        # is joined only then, so a launch still in a per-CPU buffer is never passed over
        self._complete_until: float = -1
        self._newest_thread: dict[tuple[int, int], int] = {}
        self.counts: dict[str, int] = dict.fromkeys(
            ("ebpf_launches", "launches_with_device_record", "kernels", "kernels_joined",
             "kernels_without_callback", "callbacks_without_kernel", "device_launches_without_ebpf",
             "ebpf_taken_twice", "negative_launch_to_start", "malformed_records", "memcpy", "memset",
             "launches_before_trace", "kernels_before_trace", "collector_launches",
             "activity_launches", "latency_unknown", "stream_unmapped", "negative_part"), 0)
        self.streams = StreamMap()
        self._started_ns: int | None = None  # launches before this had no uprobes attached
        self._before_corr: dict[int, int] = {}  # per pid: highest correlation id launched before
        self.per_stream: dict[int, dict[str, int]] = {}
        self.kernels_per_pid: dict[int, int] = {}  # kernel records read, per process
        # callback time minus eBPF launch time of joined launches: the join's own check (a
        # driver callback runs inside the probed call, so this is small and positive)
        self._lag_samples: list[int] = []
        self.samples: list[dict[str, int]] = []  # the first joined launches, for diagnosis

    # -- inputs ---------------------------------------------------------------------------------
    def add_launches(self, ts: np.ndarray, pid: np.ndarray, tid: np.ndarray, stream: np.ndarray) -> None:
        """eBPF ``cuda.launch`` records (CLOCK_MONOTONIC ns)."""
        if len(ts) == 0:
            return
        self.counts["ebpf_launches"] += int(len(ts))
        keys = pid.astype(np.int64) * (1 << 32) + tid.astype(np.int64)
        for k in np.unique(keys).tolist():
            sel = keys == k
            p, t = k >> 32, k & 0xFFFFFFFF
            self._launches.setdefault((p, t), _ThreadLaunches()).add(ts[sel], stream[sel])
            self._newest_ebpf[p] = max(self._newest_ebpf.get(p, 0), int(ts[sel].max()))
            self._newest_thread[(p, t)] = max(self._newest_thread.get((p, t), 0), int(ts[sel].max()))
        for s, c in zip(*np.unique(stream, return_counts=True), strict=True):
            self.per_stream.setdefault(int(s), {"launches": 0, "with_device_record": 0})["launches"] += int(c)
        if len(self._waiting):
            self._match(self._waiting.take())

    def trace_started(self, ts_ns: int) -> None:
        """The uprobes are attached from ``ts_ns`` on: earlier launches are left out, counted."""
        self._started_ns = ts_ns
        for pid, cbs in self._callbacks.items():
            self._drop_before(pid, cbs)
        if len(self._waiting):
            w = self._waiting.take()
            early = w["t"] < ts_ns
            self.counts["kernels_before_trace"] += int(early.sum())
            self._waiting.extend(**{c: w[c][~early] for c in _Waiting.COLS})

    def _drop_before(self, pid: int, cbs: _Callbacks) -> None:
        if self._started_ns is None or len(cbs.t) == 0:
            return
        early = cbs.t < self._started_ns
        if early.any():
            self.counts["launches_before_trace"] += int(early.sum())
            self._before_corr[pid] = max(self._before_corr.get(pid, 0), int(cbs.corr[early].max()))
            cbs.keep(~early)

    def add_heartbeat(self, ts_ns: int) -> None:
        """bpftrace's heartbeat: every eBPF record stamped before ``ts_ns`` has been read."""
        if ts_ns > self._complete_until:
            self._complete_until = ts_ns
            if len(self._waiting):
                self._match(self._waiting.take())

    def add_device(self, parsed: Parsed) -> None:
        self.counts["malformed_records"] += parsed.malformed
        self._control_records(parsed)
        cb = parsed.of(Rec.LAUNCH)
        for pid in np.unique(cb["pid"]).tolist() if len(cb) else []:
            sel = cb[cb["pid"] == pid]["f"].astype(np.int64)
            self.collector_launches_per_pid[pid] = self.collector_launches_per_pid.get(pid, 0) + len(sel)
            self._collector_launches(pid, sel)
            cbs = self._callbacks.setdefault(pid, _Callbacks())
            cbs.add(sel[:, 1], sel[:, 0], sel[:, 2], sel[:, 4] >> 32, sel[:, 3])
            self._drop_before(pid, cbs)
        self.streams.add(parsed.of(Rec.STREAM))
        kernels = parsed.of(Rec.KERNEL)
        if len(parsed.of(Rec.KERNEL_LAT)):
            kernels = np.concatenate([kernels, parsed.of(Rec.KERNEL_LAT)])
        self.counts["memcpy"] += len(parsed.of(Rec.MEMCPY))
        self.counts["memset"] += len(parsed.of(Rec.MEMSET))
        if len(kernels):
            self.counts["kernels"] += int(len(kernels))
            for p, n in zip(*np.unique(kernels["pid"], return_counts=True), strict=True):
                self.kernels_per_pid[int(p)] = self.kernels_per_pid.get(int(p), 0) + int(n)
            self._gpu_idle_records(kernels)
        # a kernel may be read just before its callback (both left in one flush): retry it once
        retry, self._retry = self._retry, np.empty(0, dtype=DTYPE)
        if len(retry) or len(kernels):
            self._kernels(np.concatenate([retry, kernels]), retry_count=len(retry))
        self._expire()

    def _collector_launches(self, pid: int, f: np.ndarray) -> None:
        """Launch callbacks as launches (count and interval per stream), those after the trace
        started; in ``ebpf`` mode they only wait for their kernels."""
        if self.launches == "ebpf":
            return
        t, stream = f[:, 2], f[:, 3]
        after = t >= self._started_ns if self._started_ns is not None else np.ones(len(t), dtype=bool)
        if not after.any():
            return
        t, stream, tid = t[after], stream[after], f[after, 0]
        self.counts["collector_launches"] += int(len(t))
        for st, c in zip(*np.unique(stream, return_counts=True), strict=True):
            self.collector_per_stream[int(st)] = self.collector_per_stream.get(int(st), 0) + int(c)
            if self.launches == "collector":
                self.per_stream.setdefault(int(st), {"launches": 0, "with_device_record": 0})["launches"] += int(c)
        if self.launches == "collector" and self.on_launches is not None:
            self.on_launches(t, np.full(len(t), pid, dtype=np.int64), tid, stream)

    def _control_records(self, parsed: Parsed) -> None:
        for r in parsed.of(Rec.HELLO):
            f = r["f"].tolist()
            self.procs.setdefault(int(r["pid"]), ProcessStats()).hello = {
                ("rocprofiler_sdk_version" if self.source == "rocprofiler" else "cupti_version"): f[0],
                "flush_ms": f[1], "ring_slots": f[2],
                "timestamp_callback": f[3], "domains": f[4], "multiple_subscribers": f[5],
                "latency_timestamps": f[6]}
            self.clock.timestamp_callback = bool(f[3])
        for r in parsed.of(Rec.POOL):
            f = r["f"].tolist()
            pool = {"buffers_refused": f[0], "buffers_ready": f[1], "buffer_bytes": f[2], "latency_timestamps": f[3]}
            if f[4]:  # the CUPTI collector's: which device records it asked for (cupti_collector.c)
                pool["activity_kinds"] = [name for bit, name in ACTIVITY_KIND_BITS if f[4] & bit]
            self.procs.setdefault(int(r["pid"]), ProcessStats()).pool = pool
        clk = parsed.of(Rec.CLOCK)
        if len(clk):
            f = clk["f"].astype(np.int64)
            self.clock.add(f[:, 0], f[:, 1], f[:, 2])
        for kind in (Rec.STATS, Rec.BYE):
            for r in parsed.of(kind):
                ps = self.procs.setdefault(int(r["pid"]), ProcessStats())
                ps.stats = dict(zip(STATS_FIELDS, r["f"].tolist(), strict=True))
                ps.exited_cleanly = ps.exited_cleanly or kind == Rec.BYE
        for r in parsed.of(Rec.ERROR):
            f = r["f"].tolist()
            self.procs.setdefault(int(r["pid"]), ProcessStats()).errors.append(describe_error(f[0], f[1]))

    # -- link 1: kernel -> callback -------------------------------------------------------------
    def _device_times(self, kernels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        f = kernels["f"].astype(np.int64)
        offset = self.clock.offset_ns or 0  # CUPTI clock -> CLOCK_MONOTONIC, measured
        return f, f[:, 1] - offset, f[:, 2] - offset, f[:, 3] & 0xFFFFFFFF

    def _gpu_idle_records(self, kernels: np.ndarray) -> None:
        _f, start, end, device = self._device_times(kernels)
        self._gpu_idle(start, end, device, kernels["pid"].astype(np.int64))

    def _kernels(self, kernels: np.ndarray, retry_count: int = 0) -> None:
        if self.launches == "activity":
            self._activity_kernels(kernels)
            return
        f, start, end, device = self._device_times(kernels)
        cols = kernel_columns(kernels)
        offset = self.clock.offset_ns or 0
        queued, submitted = to_host_clock(cols.queued, offset), to_host_clock(cols.submitted, offset)
        pids = kernels["pid"].astype(np.int64)
        is_retry = np.arange(len(kernels)) < retry_count
        for pid in np.unique(pids).tolist():
            sel = pids == pid
            cbs = self._callbacks.get(pid)
            corr, graph = cols.corr[sel], cols.graph[sel]
            if cbs is None or len(cbs.corr) == 0:
                hit = np.zeros(int(sel.sum()), dtype=bool)
            else:
                idx = np.minimum(np.searchsorted(cbs.corr, corr), len(cbs.corr) - 1)
                hit = cbs.corr[idx] == corr
            early = ~hit & (corr <= self._before_corr.get(pid, -1))
            self.counts["kernels_before_trace"] += int(early.sum())
            hit_or_early = hit | early
            miss_retried = ~hit_or_early & is_retry[sel]
            self.counts["kernels_without_callback"] += int(miss_retried.sum())
            again = ~hit_or_early & ~is_retry[sel]
            if again.any():
                self._retry = np.concatenate([self._retry, kernels[sel][again]])
            if cbs is None or not hit.any():  # no callbacks: nothing hit
                continue
            first = np.ones(int(hit.sum()), dtype=bool)
            h_idx, h_corr, h_graph = idx[hit], corr[hit], graph[hit]
            # a graph's kernels share its launch's correlation id: only the first starts the clock
            for i in np.flatnonzero(h_graph != 0).tolist():
                key = (pid, int(h_corr[i]))
                first[i] = key not in self._graph_first_seen
                self._graph_first_seen.add(key)
            claimed = np.zeros(len(cbs.corr), dtype=bool)
            claimed[h_idx[h_graph == 0]] = True  # a plain kernel's callback is done with
            d = {"pid": np.full(len(h_idx), pid, dtype=np.int64), "tid": cbs.tid[h_idx], "t": cbs.t[h_idx],
                 "domain": cbs.domain[h_idx], "corr": h_corr, "start": start[sel][hit],
                 "end": end[sel][hit], "device": device[sel][hit], "first": first,
                 "queued": queued[sel][hit], "submitted": submitted[sel][hit]}
            if self.launches == "collector":
                # the callback is the launch: its own time, thread and stream (link 2 is moot)
                self._emit_joined(d, np.ones(len(h_idx), dtype=bool), cbs.stream[h_idx], cbs.t[h_idx])
            else:
                self._match(d)
            cbs.keep(~claimed)

    # -- link 2: callback -> eBPF launch --------------------------------------------------------
    def _match(self, d: dict[str, np.ndarray]) -> None:
        n = len(d["t"])
        if n == 0:
            return
        stream = np.zeros(n, dtype=np.int64)
        launch_ts = np.zeros(n, dtype=np.int64)
        ok = np.zeros(n, dtype=bool)
        wait = np.zeros(n, dtype=bool)
        keys = d["pid"] * (1 << 32) + d["tid"]
        for k in np.unique(keys).tolist():
            rows = np.flatnonzero(keys == k)
            tl = self._launches.get((k >> 32, k & 0xFFFFFFFF))
            if tl is None or len(tl.ts) == 0:
                wait[rows] = True
                continue
            t = d["t"][rows]
            # ready: every eBPF record of this thread up to the callback has been read (a later
            # launch of the thread, or a heartbeat after it); otherwise wait, never guess
            ready = (t <= self._complete_until) | (t < self._newest_thread.get((k >> 32, k & 0xFFFFFFFF), 0))
            driver = np.isin(d["domain"][rows], INSIDE_CALL_DOMAINS)  # CUPTI driver, HIP API records
            # driver callbacks: the last launch at or before; runtime: the first at or after
            j = np.where(driver, np.searchsorted(tl.ts, t, side="right") - 1,
                         np.searchsorted(tl.ts, t, side="left"))
            inside = (j >= 0) & (j < len(tl.ts))
            jj = np.clip(j, 0, len(tl.ts) - 1)
            near = inside & (np.abs(tl.ts[jj] - t) <= JOIN_WINDOW_NS)
            # a graph's later kernels reuse the launch its first kernel took
            fresh = d["first"][rows]
            free = ready & near & (~tl.taken[jj] | ~fresh)
            # two callbacks of one batch never take one launch: the first keeps it
            claim = np.flatnonzero(free & fresh)
            _u, first_of = np.unique(jj[claim], return_index=True)
            dup = np.ones(len(claim), dtype=bool)
            dup[first_of] = False
            free[claim[dup]] = False
            self.counts["ebpf_taken_twice"] += int((ready & near & tl.taken[jj] & fresh).sum()) + int(dup.sum())
            wait[rows] = ~ready
            hit_rows = rows[free]
            tl.taken[jj[free]] = True
            stream[hit_rows] = tl.stream[jj[free]]
            launch_ts[hit_rows] = tl.ts[jj[free]]
            ok[hit_rows] = True
        late = ~ok & ~wait
        self.counts["device_launches_without_ebpf"] += int((late & d["first"]).sum())
        if wait.any():
            self._waiting.extend(**{c: d[c][wait] for c in _Waiting.COLS})
        if ok.any():
            self._emit_joined(d, ok, stream, launch_ts)

    def _emit_joined(self, d: dict[str, np.ndarray], ok: np.ndarray, stream: np.ndarray,
                     launch_ts: np.ndarray) -> None:
        if len(self._lag_samples) < 100_000 and self.launches not in ("collector", "activity"):
            self._lag_samples += (d["t"][ok] - launch_ts[ok]).tolist()[:100_000]
        if len(self.samples) < 200:
            for i in np.flatnonzero(ok)[: 200 - len(self.samples)].tolist():
                self.samples.append({"tid": int(d["tid"][i]), "ebpf_ts": int(launch_ts[i]), "callback_ts": int(d["t"][i]),
                                     "domain": int(d["domain"][i]), "corr": int(d["corr"][i]),
                                     "start": int(d["start"][i]), "end": int(d["end"][i]),
                                     "stream": int(stream[i])})
        pid, start, end = d["pid"][ok], d["start"][ok], d["end"][ok]
        s, lts, first = stream[ok], launch_ts[ok], d["first"][ok]
        self.counts["kernels_joined"] += int(len(s))
        self.emit("kernel_duration", start, pid, s, end - start)
        lts_f, s_f, start_f, pid_f = lts[first], s[first], start[first], pid[first]
        delay = start_f - lts_f
        self.counts["negative_launch_to_start"] += int((delay < 0).sum())
        self.counts["launches_with_device_record"] += int(len(s_f))
        for st, c in zip(*np.unique(s_f, return_counts=True), strict=True):
            self.per_stream.setdefault(int(st), {"launches": 0, "with_device_record": 0})["with_device_record"] += int(c)
        self.emit("launch_to_start", lts_f, pid_f, s_f, delay)
        self._queued(lts_f, pid_f, s_f, start_f)
        self._emit_parts(lts_f, d["queued"][ok][first], d["submitted"][ok][first], start_f, pid_f, s_f,
                         entry_known=True)

    def _emit_parts(self, lts: np.ndarray, queued: np.ndarray, submitted: np.ndarray, start: np.ndarray,
                    pid: np.ndarray, stream: np.ndarray, *, entry_known: bool) -> None:
        """host / push / GPU queue of each launch whose latency timestamps are known."""
        parts = split(lts if entry_known else None, queued, submitted, start)
        self.counts["latency_unknown"] += int((~parts.known).sum())
        k = parts.known
        if not k.any():
            return
        ts, p, s = lts[k], pid[k], stream[k]
        values = [("launch_push", parts.push), ("launch_gpu_queue", parts.gpu_queue)]
        if parts.host is not None:
            values.insert(0, ("launch_host", parts.host))
        for name, v in values:
            # a negative part is a clock step between CUPTI and the entry clock: counted, kept
            self.counts["negative_part"] += int((v < 0).sum())
            self.emit(name, ts, p, s, v)

    def _activity_kernels(self, kernels: np.ndarray) -> None:
        """Default mode: the kernel record is the launch (its queued time, its stream)."""
        f, start, end, device = self._device_times(kernels)
        cols = kernel_columns(kernels)
        offset = self.clock.offset_ns or 0
        queued, submitted = to_host_clock(cols.queued, offset), to_host_clock(cols.submitted, offset)
        pids = kernels["pid"].astype(np.int64)
        for pid in np.unique(pids).tolist():
            sel = np.flatnonzero(pids == pid)
            first = np.ones(len(sel), dtype=bool)
            for i in np.flatnonzero(cols.graph[sel] != 0).tolist():  # a graph starts at its first kernel
                key = (pid, int(cols.corr[sel][i]))
                first[i] = key not in self._graph_first_seen
                self._graph_first_seen.add(key)
            stream, unmapped = self.streams.keys(pid, f[sel, 4])
            self.counts["stream_unmapped"] += unmapped
            # a kernel with no queued time is still a launch: counted at its start
            lts = np.where(queued[sel] > 0, queued[sel], start[sel])
            if self._started_ns is not None:
                early = lts < self._started_ns
                self.counts["kernels_before_trace"] += int(early.sum())
                first &= ~early
            d = {"pid": np.full(len(sel), pid, dtype=np.int64), "tid": np.zeros(len(sel), dtype=np.int64),
                 "t": lts, "domain": np.zeros(len(sel), dtype=np.int64), "corr": cols.corr[sel],
                 "start": start[sel], "end": end[sel], "device": device[sel], "first": first,
                 "queued": queued[sel], "submitted": submitted[sel]}
            self._activity_launches(pid, lts[first], stream[first])
            self._emit_activity(d, stream)

    def _activity_launches(self, pid: int, lts: np.ndarray, stream: np.ndarray) -> None:
        self.counts["activity_launches"] += int(len(lts))
        for st, c in zip(*np.unique(stream, return_counts=True), strict=True):
            self.per_stream.setdefault(int(st), {"launches": 0, "with_device_record": 0})["launches"] += int(c)
        if self.on_launches is not None and len(lts):
            self.on_launches(lts, np.full(len(lts), pid, dtype=np.int64), np.zeros(len(lts), dtype=np.int64), stream)

    def _emit_activity(self, d: dict[str, np.ndarray], stream: np.ndarray) -> None:
        """queued -> start as launch -> start (only where queued is known), and the two parts."""
        pid, start, end, first = d["pid"], d["start"], d["end"], d["first"]
        self.counts["kernels_joined"] += int(len(start))
        self.emit("kernel_duration", start, pid, stream, end - start)
        lat = first & (d["queued"] > 0)
        self.counts["latency_unknown"] += int((first & ~lat).sum())
        lts, s_f, start_f, pid_f = d["queued"][lat], stream[lat], start[lat], pid[lat]
        delay = start_f - lts
        self.counts["negative_launch_to_start"] += int((delay < 0).sum())
        self.counts["launches_with_device_record"] += int(len(s_f))
        for st, c in zip(*np.unique(s_f, return_counts=True), strict=True):
            self.per_stream.setdefault(int(st), {"launches": 0, "with_device_record": 0})["with_device_record"] += int(c)
        self.emit("launch_to_start", lts, pid_f, s_f, delay)
        self._queued(lts, pid_f, s_f, start_f)
        parts = split(None, lts, d["submitted"][lat], start_f)
        self.counts["latency_unknown"] += int((~parts.known).sum())
        k = parts.known
        if k.any():
            self.emit("launch_push", lts[k], pid_f[k], s_f[k], parts.push)
            self.emit("launch_gpu_queue", lts[k], pid_f[k], s_f[k], parts.gpu_queue)

    # -- derived metrics ------------------------------------------------------------------------
    def _queued(self, lts: np.ndarray, pid: np.ndarray, stream: np.ndarray, start: np.ndarray) -> None:
        """Kernels launched earlier on the same stream that had not started at this launch.

        Kernels of one stream start in launch order, so the starts of its launches, taken in
        launch order, are sorted: the count is a searchsorted, not a scan."""
        depth = np.zeros(len(lts), dtype=np.int64)
        for st in np.unique(stream).tolist():
            rows = np.flatnonzero(stream == st)
            rows = rows[np.argsort(lts[rows], kind="stable")]
            prior = self._last_start.get(st, _empty_u())
            starts = np.concatenate([prior, start[rows]])
            starts_sorted = np.maximum.accumulate(starts)  # guards against tiny reordering
            pos = len(prior) + np.arange(len(rows))
            started = np.searchsorted(starts_sorted, lts[rows], side="right")
            depth[rows] = np.maximum(0, pos - np.minimum(started, pos))
            # starts before the newest launch can never count for a later launch
            keep = starts_sorted > lts[rows].max()
            self._last_start[st] = starts_sorted[keep]
        self.emit("queued", lts, pid, stream, depth)

    def _gpu_idle(self, start: np.ndarray, end: np.ndarray, device: np.ndarray, pid: np.ndarray) -> None:
        for dev in np.unique(device).tolist():
            rows = np.flatnonzero(device == dev)
            rows = rows[np.argsort(start[rows], kind="stable")]
            s, e = start[rows], end[rows]
            prev_max = np.maximum.accumulate(np.concatenate([[self._last_end.get(dev, s[0])], e]))[:-1]
            gap = s - prev_max
            idle = gap > 0
            self._last_end[dev] = int(max(prev_max[-1], e.max()))
            if idle.any():
                self.emit("gpu_idle", s[idle], pid[rows][idle], np.full(int(idle.sum()), dev, dtype=np.int64), gap[idle])

    # -- bookkeeping ----------------------------------------------------------------------------
    def _expire(self, final: bool = False) -> None:
        newest_cb = max((int(c.t.max()) for c in self._callbacks.values() if len(c.t)), default=0)
        for cbs in self._callbacks.values():
            if len(cbs.t) == 0:
                continue
            old = np.ones(len(cbs.t), dtype=bool) if final else cbs.t < newest_cb - ORPHAN_CALLBACK_NS
            if old.any():
                pid = next(p for p, c in self._callbacks.items() if c is cbs)
                # a graph's callback stays for its later kernels; it is no orphan
                graph = np.array([(pid, int(c)) in self._graph_first_seen for c in cbs.corr[old].tolist()], dtype=bool)
                self.counts["callbacks_without_kernel"] += int(old.sum() - graph.sum())
                cbs.keep(~old)
        if len(self._waiting):
            w = self._waiting
            newest = np.array([self._newest_ebpf.get(int(p), 0) for p in w.pid.tolist()], dtype=np.int64)
            old = np.ones(len(w), dtype=bool) if final else w.t < newest - WAIT_FOR_EBPF_NS
            if old.any():
                self.counts["device_launches_without_ebpf"] += int((old & w.first).sum())
                kept = w.take()
                self._waiting.extend(**{c: kept[c][~old] for c in _Waiting.COLS})
        for key, tl in list(self._launches.items()):
            newest_ts = self._newest_ebpf.get(key[0], 0)
            drop = (tl.taken & (tl.ts < newest_ts - TAKEN_KEEP_NS)) | (final | (tl.ts < newest_ts - EBPF_KEEP_NS))
            if drop.all() and not final:
                del self._launches[key]
            elif drop.any() and (final or drop.sum() > len(drop) // 2):
                tl.ts, tl.stream, tl.taken = tl.ts[~drop], tl.stream[~drop], tl.taken[~drop]

    def finish(self) -> None:
        """At the end: retry what waits, then count everything still unmatched."""
        if len(self._retry):
            retry, self._retry = self._retry, np.empty(0, dtype=DTYPE)
            self._kernels(retry, retry_count=len(retry))
        self._complete_until = float("inf")  # the program has ended: every record is in
        if len(self._waiting):
            pending = self._waiting.take()
            self._newest_ebpf = {p: t + WAIT_FOR_EBPF_NS for p, t in self._newest_ebpf.items()}
            self._match(pending)
        self._expire(final=True)

    def _kinds_not_asked(self) -> list[str]:
        """The copy record kinds no collector of the trace asked CUPTI for (POOL's kinds):
        their count is not 0 copies, it is not measured."""
        pools = [ps.pool["activity_kinds"] for ps in self.procs.values() if "activity_kinds" in ps.pool]
        return [kind for kind in ("memcpy", "memset")
                if pools and not self.counts[kind] and all(kind not in asked for asked in pools)]

    def summary(self) -> dict[str, Any]:
        c: dict[str, int | None] = dict(self.counts)
        not_asked = self._kinds_not_asked()
        for kind in not_asked:
            c[kind] = None
        dropped = {k: sum(p.stats.get(k, 0) for p in self.procs.values())
                   for k in ("dropped_ring", "dropped_pipe", "dropped_cupti", "dropped_staging")}
        return {
            "counts": c,
            **({"not_recorded": {kind: "the collector asked CUPTI for kernel records only (with latency "
                                       "timestamps on, copy records deadlocked CUPTI 13.0: docs/tracing.md)"
                                 for kind in not_asked}} if not_asked else {}),
            "dropped_by_collector": dropped,
            "per_stream": {hex(s & 0xFFFFFFFFFFFFFFFF): v for s, v in sorted(self.per_stream.items())},
            "clock": self.clock.to_dict(),
            "processes": {str(p): {"hello": ps.hello, "stats": ps.stats, "exited_cleanly": ps.exited_cleanly,
                                   "buffer_pool": ps.pool,
                                   "kernel_records": self.kernels_per_pid.get(p, 0),
                                   "errors": ps.errors} for p, ps in sorted(self.procs.items())},
            "callback_minus_ebpf_ns": (_quantiles(self._lag_samples) if self.launches not in ("collector", "activity") else
                                       {"n": 0, "p1": None, "p50": None, "p99": None,
                                        "reason": "no eBPF launch uprobe (launches from the collector)"}),
            "samples": self.samples[:50],
            "launches_from": self.launches,
            "streams_mapped": len(self.streams), "stream_id_lookups_refused": self.streams.refused,
            "join": ("none: each kernel record is its launch (queued time; stream handle from the "
                     "stream-creation callback)" if self.launches == "activity" else
                     "kernel->launch callback by correlation id; the callback is the launch (its "
                     "time, thread and stream); never by order" if self.launches == "collector" else
                     "kernel->launch callback by correlation id; callback->eBPF launch by thread "
                     f"and nesting (within {JOIN_WINDOW_NS // 1_000_000} ms); never by order"),
            **({"cross_check": self.cross_check()} if self.launches == "cross-check" else {}),
        }

    def cross_check(self) -> dict[str, Any]:
        """eBPF launches against the collector's launch callbacks, per stream (both after the
        trace started): two independent counts of the same calls."""
        streams = sorted(set(self.per_stream) | set(self.collector_per_stream))
        per = {hex(s & 0xFFFFFFFFFFFFFFFF): {"ebpf": self.per_stream.get(s, {}).get("launches", 0),
                                             "collector": self.collector_per_stream.get(s, 0)} for s in streams}
        equal = all(v["ebpf"] == v["collector"] for v in per.values())
        return {"ebpf_launches": self.counts["ebpf_launches"],
                "collector_launches": self.counts["collector_launches"],
                "per_stream": per, "equal": equal and self.counts["ebpf_launches"] == self.counts["collector_launches"]}


def _quantiles(values: list[int]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p1": None, "p50": None, "p99": None}
    a = np.asarray(values)
    p1, p50, p99 = np.percentile(a, [1, 50, 99]).tolist()
    return {"n": int(len(a)), "p1": p1, "p50": p50, "p99": p99}
