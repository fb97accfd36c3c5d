"""A trace's result document as a typed value (issue 36 item 3): one serializer, one reader.

``TraceSession.result()`` builds a :class:`TraceResult`; ``trace queue -o`` writes
:meth:`TraceResult.to_json`, a sweep trial's ``trace.json`` too, and ``trace queue``'s summary,
its ``--json`` stream's last event and the queue result's ``ebpf`` section read the type.
:func:`read_trace_result` reads a written one back (size-limited, located errors, exit 2).

Each metric is its streaming statistics' summary (:class:`MetricSummary`, from
``trace/stream_stats.py``) plus where its records came from, which differs by source: CUPTI's
device records (:class:`DeviceRecords`), the collector's launch callbacks
(:class:`CollectorLaunches`) or the kernel's eBPF probes (:class:`KernelRecords`). Sections no
reader takes apart (detection, observer cost, clocks, calibration, the device timestamps' state)
stay JSON values, typed as such. Keys keep the order the file has always had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.events import HistogramSnapshot
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json, load_json_input

TRACE_SCHEMA_VERSION = 1
WHAT = "trace result"


@dataclass(frozen=True)
class Histogram:
    """A metric's histogram: ``[low, high, count]`` per non-empty bucket, in the metric's unit."""

    count: int
    buckets: tuple[tuple[float, float, int], ...]
    percentiles: dict[str, float | None]  # p50, p90, p99, p99.9, max
    percentile_method: str

    def bucket_rows(self) -> list[list[float]]:
        """The buckets as the file and the live snapshots write them."""
        return [[lo, hi, n] for lo, hi, n in self.buckets]

    def to_json(self) -> dict[str, Json]:
        return {"count": self.count, "buckets": self.bucket_rows(),  # type: ignore[dict-item]
                "percentiles": dict(self.percentiles), "percentile_method": self.percentile_method}


@dataclass(frozen=True)
class KeySpread:
    """A breakdown key's figures; absent for a point metric's key with no interval yet."""

    mean: float | None
    max: float | None
    p50: float | None


@dataclass(frozen=True)
class KeyFigures:
    """One breakdown key (a stream, a ring, a label): its events and, where measured, figures."""

    count: int
    spread: KeySpread | None

    def to_json(self) -> dict[str, Json]:
        if self.spread is None:
            return {"count": self.count}
        s = self.spread
        return {"count": self.count, "mean": s.mean, "max": s.max, "p50": s.p50}


@dataclass(frozen=True)
class MetricSummary:
    """One metric's streaming statistics (``MetricStats.summary``)."""

    measures: str
    histogram_measures: str
    kind: str  # interval, point, size
    unit: str
    count: int
    events_per_s: float | None
    histogram: Histogram
    total_bytes: int | None  # size metrics only
    breakdown_by: str
    breakdown: dict[str, KeyFigures]  # the busiest keys first, at most MAX_BREAKDOWN
    breakdown_truncated: int
    breakdown_reason: str | None
    per_pid: dict[str, int]

    def snapshot(self, run_id: str, probe_set: str, *, events_per_s: float, lost_events: int | None = 0,
                 malformed_lines: int = 0, observer_cost: dict[str, Any] | None = None,
                 clock: dict[str, Any] | None = None) -> HistogramSnapshot:
        """The live event of this summary (the trace monitor, ``--json``): its histogram and
        keys, at ``events_per_s`` (the last interval's rate), with the session's other fields
        (HistogramSnapshot's defaults where they are not given)."""
        return HistogramSnapshot(
            run_id=run_id, probe_set=probe_set, measures=self.histogram_measures, unit=self.unit,
            count=self.count, buckets=self.histogram.bucket_rows(),
            percentiles=dict(self.histogram.percentiles), events_per_s=events_per_s,
            lost_events=lost_events, malformed_lines=malformed_lines,
            breakdown={k: v.to_json() for k, v in self.breakdown.items()},
            observer_cost={} if observer_cost is None else observer_cost,
            clock={} if clock is None else clock)

    def to_json(self) -> dict[str, Json]:
        return {
            "measures": self.measures, "histogram_measures": self.histogram_measures,
            "kind": self.kind, "unit": self.unit, "count": self.count,
            "events_per_s": self.events_per_s, "histogram": self.histogram.to_json(),
            "total_bytes": self.total_bytes, "breakdown_by": self.breakdown_by,
            "breakdown": {k: v.to_json() for k, v in self.breakdown.items()},
            "breakdown_truncated": self.breakdown_truncated,
            "breakdown_reason": self.breakdown_reason, "per_pid": dict(self.per_pid),
        }


@dataclass(frozen=True)
class DeviceRecords:
    """A device metric: CUPTI's activity records, and what the collector or CUPTI dropped."""

    source: str
    timestamp_source: Json
    lost_events: int | None
    lost_events_reason: str
    clock: Json  # the two clocks' alignment ({} for a one-clock metric)
    includes: Json = None  # launch_to_start only: what the figure holds besides the launch path

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {"source": self.source}
        if self.timestamp_source is not None:  # None: a result written before it was said
            out["timestamp_source"] = self.timestamp_source
        out.update(lost_events=self.lost_events, lost_events_reason=self.lost_events_reason,
                   clock=self.clock)
        if self.includes is not None:
            out["includes"] = self.includes
        return out


@dataclass(frozen=True)
class CollectorLaunches:
    """A launch metric counted by the CUPTI collector (no launch uprobe attached)."""

    source: str
    timestamp_source: Json
    records_sent_by_collector: int | None
    records_received: int
    lost_events: int | None
    lost_events_reason: str | None  # None: not written (the count is exact)

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {"source": self.source, "timestamp_source": self.timestamp_source,
                                "records_sent_by_collector": self.records_sent_by_collector,
                                "records_received": self.records_received,
                                "records_sent_by_kernel": None, "lost_events": self.lost_events}
        if self.lost_events_reason is not None:
            out["lost_events_reason"] = self.lost_events_reason
        return out


@dataclass(frozen=True)
class KernelRecords:
    """An eBPF metric: what the kernel counted against what reached us."""

    records_sent_by_kernel: int | None  # None: bpftrace never printed its count
    records_received: int
    lost_events: int | None
    lost_events_reason: str | None = None
    timestamp_source: Json = None  # the device probe set's metrics only

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {}
        if self.timestamp_source is not None:
            out["timestamp_source"] = self.timestamp_source
        out.update(records_sent_by_kernel=self.records_sent_by_kernel,
                   records_received=self.records_received, lost_events=self.lost_events)
        if self.lost_events_reason is not None:
            out["lost_events_reason"] = self.lost_events_reason
        return out


Records = DeviceRecords | CollectorLaunches | KernelRecords


@dataclass(frozen=True)
class MetricResult:
    """A metric in the result: its summary, whether it attached, where its records came from."""

    summary: MetricSummary
    attached: bool
    records: Records
    not_attached_reason: str | None = None

    def to_json(self) -> dict[str, Json]:
        out = self.summary.to_json()
        out["attached"] = self.attached
        if self.not_attached_reason is not None:
            out["not_attached_reason"] = self.not_attached_reason
        out.update(self.records.to_json())
        return out


@dataclass(frozen=True)
class ProbeSetResult:
    """One probe set: its metrics, what it is, what was detected, what observing it cost."""

    metrics: dict[str, MetricResult]
    description: str
    detection: Json
    observer_cost: Json  # per-probe figures and the program's cost (trace/cost.py); None: none
    device_timestamps: Json = None  # the device half's state, for the set that has one

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {"metrics": {k: m.to_json() for k, m in self.metrics.items()},
                                "description": self.description, "detection": self.detection,
                                "observer_cost": self.observer_cost}
        if self.device_timestamps is not None:
            out["device_timestamps"] = self.device_timestamps
        return out

    def program_cost(self) -> dict[str, Json] | None:
        """What the traced program paid for this set (None: not estimated)."""
        cost = self.observer_cost if isinstance(self.observer_cost, dict) else {}
        paid = cost.get("program_cost")
        return paid if isinstance(paid, dict) else None


@dataclass(frozen=True)
class LaunchSource:
    """Where launches and their timestamps came from (collector, activity, ebpf)."""

    mode: str
    why: str | None
    launch_timestamp: str
    device_timestamp: str | None

    def to_json(self) -> dict[str, Json]:
        return {"mode": self.mode, "why": self.why, "launch_timestamp": self.launch_timestamp,
                "device_timestamp": self.device_timestamp}


@dataclass(frozen=True)
class TraceTarget:
    """What was traced: a pid, or a command the trace started (its pid and exit code)."""

    pid: int | None
    command: tuple[str, ...] | None
    command_pid: int | None
    command_exit_code: int | None  # negative: killed by that signal

    def to_json(self) -> dict[str, Json]:
        return {"pid": self.pid, "command": None if self.command is None else list(self.command),
                "command_pid": self.command_pid, "command_exit_code": self.command_exit_code}


@dataclass(frozen=True)
class TraceResult:
    """``trace queue -o``'s document (docs/tracing.md), a sweep trial's ``trace.json``."""

    mode: str  # events, aggregate
    launch_source: LaunchSource | None  # None: written before the launch source was said
    target: TraceTarget
    wall_s: float
    probe_sets: dict[str, ProbeSetResult]
    lost_events_reported_by_bpftrace: int
    malformed_lines: int
    malformed_examples: tuple[str, ...]
    drained_before_stop: bool | None  # None: never stopped
    uprobes: int
    tracepoints: int
    raw_events: str | None  # the raw records' file, when kept
    raw_event_count: int | None
    warnings: tuple[str, ...]
    calibration: Json  # the probes' measured cost per hit (trace/calibrate.py); None: not run
    probes: tuple[str, ...] | None = None  # the sets asked for (the CLI adds them)
    perfetto: Json = None  # the Perfetto export's path and counts (--perfetto)
    schema: int = TRACE_SCHEMA_VERSION
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    def to_json(self) -> dict[str, Json]:
        """The object the file holds, keys in the order it has always had them."""
        out: dict[str, Json] = {
            "schema": self.schema, "mode": self.mode,
            **({"launch_source": self.launch_source.to_json()} if self.launch_source else {}),
            "target": self.target.to_json(), "wall_s": self.wall_s,
            "probe_sets": {k: s.to_json() for k, s in self.probe_sets.items()},
            "lost_events_reported_by_bpftrace": self.lost_events_reported_by_bpftrace,
            "malformed_lines": self.malformed_lines,
            "malformed_examples": list(self.malformed_examples),
            "drained_before_stop": self.drained_before_stop, "uprobes": self.uprobes,
            "tracepoints": self.tracepoints, "raw_events": self.raw_events,
            "raw_event_count": self.raw_event_count, "warnings": list(self.warnings),
            "calibration": self.calibration, **self.extra,
        }
        if self.probes is not None:
            out["probes"] = list(self.probes)
        if self.perfetto is not None:
            out["perfetto"] = self.perfetto
        return out

    @classmethod
    def from_json(cls, data: object, where: str = WHAT) -> TraceResult:
        """The result a document holds; a field of the wrong type is a located UsageError
        (exit 2) naming the file and the field path."""
        return _read_result(FieldReader(where, WHAT), data)


def read_trace_result(path: str | Path) -> TraceResult:
    """A written trace result (``trace queue -o``, a trial's ``trace.json``), typed."""
    data = load_json_input(path, what=WHAT, limit=INPUT_LIMITS["trace result"])
    return TraceResult.from_json(data, str(path))


_KNOWN = frozenset({
    "schema", "mode", "launch_source", "target", "wall_s", "probe_sets",
    "lost_events_reported_by_bpftrace", "malformed_lines", "malformed_examples",
    "drained_before_stop", "uprobes", "tracepoints", "raw_events", "raw_event_count", "warnings",
    "calibration", "probes", "perfetto",
})


def _read_result(f: FieldReader, data: object) -> TraceResult:
    d = f.obj(data, "")
    schema = f.integer(d, "schema", "", TRACE_SCHEMA_VERSION)
    if schema > TRACE_SCHEMA_VERSION:
        raise UsageError(f"{f.where}: schema {schema} is newer than this aorta-tui reads "
                         f"({TRACE_SCHEMA_VERSION})", hint="read it with a newer aorta-tui")
    sets = f.obj_at(d, "probe_sets", "", required=True)
    return TraceResult(
        schema=schema, mode=f.text(d, "mode", "", required=True),
        launch_source=(_read_launch_source(f, f.obj_at(d, "launch_source", ""))
                       if "launch_source" in d else None),
        target=_read_target(f, f.obj_at(d, "target", "", required=True)),
        wall_s=f.number(d, "wall_s", "", required=True),
        probe_sets={name: _read_set(f, s, f"probe_sets.{name}") for name, s in sets.items()},
        lost_events_reported_by_bpftrace=f.integer(d, "lost_events_reported_by_bpftrace", ""),
        malformed_lines=f.integer(d, "malformed_lines", ""),
        malformed_examples=f.strings_at(d, "malformed_examples", ""),
        drained_before_stop=f.opt_boolean(d, "drained_before_stop", ""),
        uprobes=f.integer(d, "uprobes", ""), tracepoints=f.integer(d, "tracepoints", ""),
        raw_events=f.opt_text(d, "raw_events", ""),
        raw_event_count=f.opt_integer(d, "raw_event_count", ""),
        warnings=f.strings_at(d, "warnings", ""),
        calibration=d.get("calibration"),
        probes=f.strings_at(d, "probes", "") if "probes" in d else None,
        perfetto=d.get("perfetto"),
        extra={k: v for k, v in d.items() if k not in _KNOWN},
    )


def _read_launch_source(f: FieldReader, d: dict[str, Any]) -> LaunchSource:
    p = "launch_source"
    return LaunchSource(mode=f.text(d, "mode", p, required=True), why=f.opt_text(d, "why", p),
                        launch_timestamp=f.text(d, "launch_timestamp", p),
                        device_timestamp=f.opt_text(d, "device_timestamp", p))


def _read_target(f: FieldReader, d: dict[str, Any]) -> TraceTarget:
    p = "target"
    command = d.get("command")
    return TraceTarget(pid=f.opt_integer(d, "pid", p),
                       command=None if command is None else f.strings(command, f"{p}.command"),
                       command_pid=f.opt_integer(d, "command_pid", p),
                       command_exit_code=f.opt_integer(d, "command_exit_code", p))


def _read_set(f: FieldReader, value: object, path: str) -> ProbeSetResult:
    d = f.obj(value, path)
    metrics = f.obj_at(d, "metrics", path, required=True)
    return ProbeSetResult(
        metrics={name: _read_metric(f, m, f"{path}.metrics.{name}") for name, m in metrics.items()},
        description=f.text(d, "description", path), detection=d.get("detection"),
        observer_cost=d.get("observer_cost"), device_timestamps=d.get("device_timestamps"))


def _read_metric(f: FieldReader, value: object, path: str) -> MetricResult:
    d = f.obj(value, path)
    return MetricResult(summary=_read_summary(f, d, path), attached=f.boolean(d, "attached", path, True),
                        records=_read_records(f, d, path),
                        not_attached_reason=f.opt_text(d, "not_attached_reason", path))


def _read_records(f: FieldReader, d: dict[str, Any], path: str) -> Records:
    """Which source a metric's records came from, told by the keys only that source writes."""
    if "records_sent_by_collector" in d:
        return CollectorLaunches(
            source=f.text(d, "source", path), timestamp_source=d.get("timestamp_source"),
            records_sent_by_collector=f.opt_integer(d, "records_sent_by_collector", path),
            records_received=f.integer(d, "records_received", path),
            lost_events=f.opt_integer(d, "lost_events", path),
            lost_events_reason=f.opt_text(d, "lost_events_reason", path))
    if "source" in d:
        return DeviceRecords(
            source=f.text(d, "source", path), timestamp_source=d.get("timestamp_source"),
            lost_events=f.opt_integer(d, "lost_events", path),
            lost_events_reason=f.text(d, "lost_events_reason", path), clock=d.get("clock", {}),
            includes=d.get("includes"))
    return KernelRecords(
        records_sent_by_kernel=f.opt_integer(d, "records_sent_by_kernel", path),
        records_received=f.integer(d, "records_received", path),
        lost_events=f.opt_integer(d, "lost_events", path),
        lost_events_reason=f.opt_text(d, "lost_events_reason", path),
        timestamp_source=d.get("timestamp_source"))


def _read_summary(f: FieldReader, d: dict[str, Any], path: str) -> MetricSummary:
    breakdown = f.obj_at(d, "breakdown", path)
    per_pid = f.obj_at(d, "per_pid", path)
    return MetricSummary(
        measures=f.text(d, "measures", path), histogram_measures=f.text(d, "histogram_measures", path),
        kind=f.text(d, "kind", path), unit=f.text(d, "unit", path),
        count=f.integer(d, "count", path), events_per_s=f.number(d, "events_per_s", path),
        histogram=_read_histogram(f, f.obj_at(d, "histogram", path, required=True), f.join(path, "histogram")),
        total_bytes=f.opt_integer(d, "total_bytes", path),
        breakdown_by=f.text(d, "breakdown_by", path),
        breakdown={k: _read_key(f, v, f"{path}.breakdown.{k}") for k, v in breakdown.items()},
        breakdown_truncated=f.integer(d, "breakdown_truncated", path),
        breakdown_reason=f.opt_text(d, "breakdown_reason", path),
        per_pid={k: int(f.check(v, "integer", f"{path}.per_pid.{k}")) for k, v in per_pid.items()})


def _read_histogram(f: FieldReader, d: dict[str, Any], path: str) -> Histogram:
    pct = f.obj_at(d, "percentiles", path)
    return Histogram(
        count=f.integer(d, "count", path),
        buckets=tuple(_read_bucket(f, b, f"{path}.buckets[{i}]")
                      for i, b in enumerate(f.array_at(d, "buckets", path))),
        percentiles={k: f.opt_number(v, f"{path}.percentiles.{k}") for k, v in pct.items()},
        percentile_method=f.text(d, "percentile_method", path))


def _read_bucket(f: FieldReader, value: object, path: str) -> tuple[float, float, int]:
    b = f.check(value, "array", path)
    if len(b) != 3:
        raise UsageError(f"{f.where}: {path}: expected [low, high, count], found {len(b)} values",
                         hint=f"this {WHAT} is damaged or was not written by aorta-tui")
    return (f.check(b[0], "number", f"{path}[0]"), f.check(b[1], "number", f"{path}[1]"),
            f.check(b[2], "integer", f"{path}[2]"))


def _read_key(f: FieldReader, value: object, path: str) -> KeyFigures:
    d = f.obj(value, path)
    spread = (KeySpread(mean=f.number(d, "mean", path), max=f.number(d, "max", path),
                        p50=f.number(d, "p50", path))
              if any(k in d for k in ("mean", "max", "p50")) else None)
    return KeyFigures(count=f.integer(d, "count", path), spread=spread)
