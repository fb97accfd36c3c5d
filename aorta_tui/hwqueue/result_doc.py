"""The queue result (``schema_version`` 1) as a typed value: :class:`QueueResult` and its parts.

One serializer (:meth:`QueueResult.to_json`: the object ``queue run -o`` writes, key order
included) and one reader (:meth:`QueueResult.from_json`, which checks every field that
``queue compare``, the CLI, ``export`` and the sweep read, and names the damaged one: file,
field path, fix; exit 2). :func:`load_result` reads a file: a run result or a sweep
(:class:`QueueSweepDoc`, whose points are run results: typed here too, beside them, because
the one file reader returns either kind). The result is computed in ``result.py``, the sweep in
``sweep.py``; ``compare.py``, ``repeat.py``, ``sweep.py``, ``analysis/frames.py`` and the CLI
read these attributes.

Typed here is what some reader decides on: the workload's name, the stream count, the
priority and graph modes, the summary figures with their units and directions, what is
unavailable and why, the per-iteration samples and a ``--repeat`` result's repetitions. The
other sections (platform, timing, metrics, eBPF, floors, timelines, ...) are copied through as
:data:`Json`: they are displayed or exported as written, never interpreted, and a type for
each would be a second description of ``build_result`` that nothing checks.

A key the tool always writes but an older or hand-made document lacks is remembered in
``absent`` (and not written back), so ``to_json(from_json(doc)) == doc`` for every document
the reader accepts, and the same bytes for every document this build writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import (
    INPUT_LIMITS,
    FieldReader,
    Json,
    clip_for_message,
    is_json_number,
    load_json_input,
    require_type,
)

SCHEMA_VERSION = 1
KIND = "aorta-tui/queue-result"
SWEEP_KIND = "aorta-tui/queue-sweep"
HINT = "pass a file written by `queue run -o` or `queue sweep -o`"

# summary figure -> its value (None: not measured; the reason is in ``unavailable``)
Figures = dict[str, float | None]

SAMPLE_KEYS = ("iteration_latency_ms", "iteration_period_ms", "iteration_concurrency",
               "iteration_launch_delay_mean_us", "iteration_switch_overhead_us",
               "iteration_host_us_per_kernel")

# The top-level keys in the order build_result (and repeat.combine, last) writes them.
_ORDER = ("schema_version", "kind", "run_id", "created", "emulated", "workload", "config",
          "platform", "timing", "summary", "summary_units", "summary_better", "summary_source",
          "metrics", "unavailable", "samples", "ebpf", "stream_priority", "graph", "floor",
          "event_metrics", "timeline", "event_timeline", "timeline_origin_ns",
          "timeline_fields", "repeats")
_REPEATS_ORDER = ("count", "isolation", "run_ids", "summaries", "detail_from", "meaning",
                  "missing_in")


def _in_order(d: dict[str, Json], order: tuple[str, ...]) -> dict[str, Json]:
    """``d`` with the keys of ``order`` first, in that order, then the others as they came."""
    head = {k: d[k] for k in order if k in d}
    return head | {k: v for k, v in d.items() if k not in head}


@dataclass(frozen=True)
class WorkloadFacts:
    """``workload``: its name (what compare and the tables read); the rest as written."""

    name: str
    extra: dict[str, Json] = field(default_factory=dict)  # category, size, dtype, params, ...

    @property
    def throughput_unit(self) -> str | None:
        """The unit of its throughput figure (GFLOP/s, tokens/s): the sweep table's heading."""
        unit = self.extra.get("throughput_unit")
        return unit if isinstance(unit, str) else None

    def to_json(self) -> dict[str, Json]:
        return {"name": self.name, **self.extra}


@dataclass(frozen=True)
class ConfigFacts:
    """``config``: the stream count and the priority and graph modes compare judges by.

    A result from before ``--stream-priority`` or ``--graph`` lacks those keys: it ran at the
    default priority with eager launches, which is what the defaults here say."""

    streams: int
    stream_priority: str = "default"
    graph: bool = False
    extra: dict[str, Json] = field(default_factory=dict)  # iterations, warmup, device, ...
    absent: frozenset[str] = frozenset()  # of stream_priority and graph

    @property
    def device(self) -> Json:
        return self.extra.get("device")

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {"streams": self.streams, **self.extra}
        if "stream_priority" not in self.absent:
            out["stream_priority"] = self.stream_priority
        if "graph" not in self.absent:
            out["graph"] = self.graph
        return out


@dataclass(frozen=True)
class Summary:
    """The headline figures (``summary``), each one's unit (``summary_units``) and which
    direction is better (``summary_better``: higher, lower or neither), in document order."""

    values: Figures
    units: dict[str, str | None]
    better: dict[str, str]

    def value(self, key: str) -> float | None:
        return self.values.get(key)

    def unit(self, key: str) -> str | None:
        return self.units.get(key)


@dataclass(frozen=True)
class Repeats:
    """``repeats`` of a ``queue run --repeat`` result: how many runs, and each one's summary."""

    count: int = 1  # a repeats object without a count stood for one run
    summaries: tuple[Figures, ...] | None = None  # None: not recorded
    extra: dict[str, Json] = field(default_factory=dict)  # isolation, run_ids, meaning, ...
    absent: frozenset[str] = frozenset()  # of count and summaries

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = dict(self.extra)
        if "count" not in self.absent:
            out["count"] = self.count
        if self.summaries is not None:
            out["summaries"] = [dict(s) for s in self.summaries]
        return _in_order(out, _REPEATS_ORDER)


@dataclass(frozen=True)
class QueueResult:
    """One queue run's result document (docs/hwqueue.md): ``queue run -o``, a sweep's point."""

    run_id: str | None
    emulated: bool
    workload: WorkloadFacts
    config: ConfigFacts
    summary: Summary
    unavailable: dict[str, str] = field(default_factory=dict)
    samples: dict[str, Json] = field(default_factory=dict)  # SAMPLE_KEYS checked, others as written
    repeats: Repeats | None = None
    # Every other top-level key (created, platform, timing, metrics, ...), as written.
    sections: dict[str, Json] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    absent: frozenset[str] = frozenset()  # of schema_version, run_id, unavailable, samples

    __hash__ = None  # type: ignore[assignment]  # mutable dict fields: never a dict key

    def sample(self, key: str) -> list[float]:
        """The per-iteration values of ``key`` ([] when the run recorded none)."""
        values = self.samples.get(key)
        if not isinstance(values, list):
            return []
        # as written (an int stays an int: a statistic of them prints as it always did)
        return [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]

    def section(self, key: str) -> dict[str, Any]:
        """A copied-through section that is an object ({} when absent or not an object).
        Its values are whatever the harness wrote (Any): the CLI shows them, nothing decides."""
        value = self.sections.get(key)
        return value if isinstance(value, dict) else {}

    def per_stream(self) -> list[dict[str, Any]]:
        """``metrics.per_stream``: one row per stream (rows that are not objects left out)."""
        rows = self.section("metrics").get("per_stream")
        return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []

    def to_json(self) -> dict[str, Json]:
        """The object the result file holds (``core.atomic.atomic_write_json`` writes it)."""
        typed: dict[str, Json] = {
            "schema_version": self.schema_version, "kind": KIND, "run_id": self.run_id,
            "emulated": self.emulated, "workload": self.workload.to_json(),
            "config": self.config.to_json(), "summary": dict(self.summary.values),
            "summary_units": dict(self.summary.units), "summary_better": dict(self.summary.better),
            "unavailable": dict(self.unavailable), "samples": dict(self.samples)}
        if self.repeats is not None:
            typed["repeats"] = self.repeats.to_json()
        for key in self.absent:
            typed.pop(key, None)
        return _in_order(typed | self.sections, _ORDER)

    @classmethod
    def from_json(cls, doc: object, where: str, at: str = "") -> QueueResult:
        """Read a parsed run result; a damaged one is a located UsageError (exit 2). ``at``
        prefixes field paths (``points[2].``) when the result sits inside a sweep."""
        check_result(doc, where, at)
        assert isinstance(doc, dict)  # check_result refused anything else
        return _read_result(doc)


# -- the reader ----------------------------------------------------------------------------

_TYPED = frozenset({"schema_version", "kind", "run_id", "emulated", "workload", "config",
                    "summary", "summary_units", "summary_better", "unavailable", "samples"})


def _read_result(d: dict[str, Any]) -> QueueResult:
    """The typed value of a document check_result accepted."""
    version = d.get("schema_version", SCHEMA_VERSION)
    typed_version = isinstance(version, int) and not isinstance(version, bool)
    workload, config = d["workload"], d["config"]
    raw_repeats = d.get("repeats")
    sections = {k: v for k, v in d.items()
                if k not in _TYPED and not (k == "repeats" and raw_repeats is not None)}
    if not typed_version and "schema_version" in d:  # unchecked in a sweep's point: as written
        sections["schema_version"] = version
    return QueueResult(
        run_id=d.get("run_id"), emulated=d["emulated"],
        workload=WorkloadFacts(workload["name"], {k: v for k, v in workload.items() if k != "name"}),
        config=ConfigFacts(
            streams=config["streams"], stream_priority=config.get("stream_priority", "default"),
            graph=config.get("graph", False),
            extra={k: v for k, v in config.items() if k not in ("streams", "stream_priority", "graph")},
            absent=frozenset(k for k in ("stream_priority", "graph") if k not in config)),
        summary=Summary(dict(d["summary"]), dict(d["summary_units"]), dict(d["summary_better"])),
        unavailable=dict(d.get("unavailable", {})), samples=dict(d.get("samples", {})),
        repeats=None if raw_repeats is None else _read_repeats(raw_repeats), sections=sections,
        schema_version=version if typed_version else SCHEMA_VERSION,
        absent=frozenset(k for k in ("schema_version", "run_id", "unavailable", "samples")
                         if k not in d or (k == "schema_version" and not typed_version)))


def _read_repeats(r: dict[str, Any]) -> Repeats:
    summaries = r.get("summaries")
    extra = {k: v for k, v in r.items() if k not in ("count", "summaries")}
    if "summaries" in r and summaries is None:  # a null list: written back as it came
        extra["summaries"] = None
    return Repeats(count=r.get("count", 1),
                   summaries=None if summaries is None else tuple(dict(s) for s in summaries),
                   extra=extra, absent=frozenset(k for k in ("count", "summaries") if k not in r))


def check_result(data: object, where: str, at: str = "") -> None:
    """The shape of a run result as ``compare`` and the CLI read it; ``at`` prefixes field
    paths (``points[2].``) when the result sits inside a sweep."""
    # Any out, as require_type's: the value is a file's JSON, checked to be of ``kind`` at
    # run time (a string picks the kind), which no static type follows
    def need(value: object, kind: str, field: str, nullable: bool = False) -> Any:
        return require_type(value, kind, where=where, field=at + field, what="queue result",
                            nullable=nullable, hint=HINT)

    doc: dict[str, Any] = need(data, "object", at.rstrip(".") or "(top level)")
    if doc.get("kind") != KIND:
        raise UsageError(f"{where}: {at}kind: expected {KIND!r}, found "
                         f"{clip_for_message(doc.get('kind'))}", hint=HINT)
    for key in ("workload", "config", "summary", "summary_units", "summary_better"):
        if key not in doc:
            raise UsageError(f"{where}: {at}{key}: missing", hint=HINT)
    need(doc["workload"], "object", "workload")
    need(doc["workload"].get("name"), "string", "workload.name")
    need(doc["config"], "object", "config")
    need(doc["config"].get("streams"), "integer", "config.streams")
    need(doc["config"].get("stream_priority", "default"), "string", "config.stream_priority")
    need(doc["config"].get("graph", False), "boolean", "config.graph")
    need(doc.get("emulated"), "boolean", "emulated")
    need(doc.get("run_id"), "string", "run_id", nullable=True)
    _check_summary(doc, where, at, need)
    for key, value in need(doc.get("unavailable", {}), "object", "unavailable").items():
        need(value, "string", f"unavailable.{key}")
    samples = need(doc.get("samples", {}), "object", "samples")
    for key in SAMPLE_KEYS:
        _check_numbers(need(samples.get(key), "array", f"samples.{key}", nullable=True),
                       where, f"{at}samples.{key}")
    repeats = need(doc.get("repeats"), "object", "repeats", nullable=True)
    if repeats is not None:
        need(repeats.get("count", 1), "integer", "repeats.count")
        summaries = need(repeats.get("summaries"), "array", "repeats.summaries", nullable=True)
        for i, summ in enumerate(summaries or []):
            need(summ, "object", f"repeats.summaries[{i}]")
            for key, value in summ.items():
                need(value, "number", f"repeats.summaries[{i}].{key}", nullable=True)


def _check_summary(doc: dict[str, Any], where: str, at: str, need: Callable[..., Any]) -> None:
    """``summary`` (numbers or null), ``summary_units`` (strings or null), ``summary_better``."""
    for key in ("summary", "summary_units", "summary_better"):
        need(doc[key], "object", key)
    for key, value in doc["summary"].items():
        need(value, "number", f"summary.{key}", nullable=True)
    for key, value in doc["summary_units"].items():
        need(value, "string", f"summary_units.{key}", nullable=True)
    for key, value in doc["summary_better"].items():
        if value not in ("higher", "lower", "neither"):
            raise UsageError(f"{where}: {at}summary_better.{key}: expected higher, lower or "
                             f"neither, found {clip_for_message(value)}", hint=HINT)


def _check_numbers(values: list[Any] | None, where: str, field: str) -> None:
    if values is None:
        return
    for i, value in enumerate(values):
        if not is_json_number(value):
            require_type(value, "number", where=where, field=f"{field}[{i}]",
                         what="queue result", hint=HINT)


# -- a sweep's document ------------------------------------------------------------------------

SWEEP_WHAT = "queue sweep"
# The top-level keys in the order hwqueue/sweep.py writes them; the analysis's keys likewise
# (knee_gain where a knee was judged, reason where no point had a throughput).
_SWEEP_ORDER = ("schema_version", "kind", "run_id", "workload", "emulated", "platform",
                "stream_counts", "isolation", "failed_points", "analysis", "points")
_ANALYSIS_ORDER = ("efficiency", "peak_streams", "peak_throughput", "knee_streams", "knee_gain",
                   "reason")
# Every version of the sweep wrote these; isolation and failed_points came with isolated
# points, so an older document lacks them (remembered in ``absent``, not written back).
_SWEEP_REQUIRED = ("workload", "emulated", "platform", "stream_counts", "analysis", "points")
_ANALYSIS_REQUIRED = ("efficiency", "peak_streams", "peak_throughput", "knee_streams")


@dataclass(frozen=True)
class FailedPoint:
    """A stream count whose run failed (``failed_points``): left out of the analysis, and why."""

    streams: int
    reason: str
    extra: dict[str, Json] = field(default_factory=dict)  # keys this build does not write

    def to_json(self) -> dict[str, Json]:
        return {"streams": self.streams, "reason": self.reason, **self.extra}


@dataclass(frozen=True)
class SweepAnalysis:
    """``analysis``: scaling efficiency per stream count (keyed by the count as text, as JSON
    keys are), the peak and the knee; with no throughput at any point they are empty or None
    and ``reason`` says why (``hwqueue/sweep.py``'s ``scaling`` computes it)."""

    efficiency: dict[str, float]
    peak_streams: int | None
    peak_throughput: float | None
    knee_streams: int | None
    knee_gain: float | None = None  # the marginal gain the knee was judged by; None: not written
    reason: str | None = None  # why there is no peak nor knee; None: not written
    extra: dict[str, Json] = field(default_factory=dict)  # keys this build does not write

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {
            "efficiency": dict(self.efficiency), "peak_streams": self.peak_streams,
            "peak_throughput": self.peak_throughput, "knee_streams": self.knee_streams}
        if self.knee_gain is not None:
            out["knee_gain"] = self.knee_gain
        if self.reason is not None:
            out["reason"] = self.reason
        return _in_order(out | self.extra, _ANALYSIS_ORDER)


@dataclass(frozen=True)
class QueueSweepDoc:
    """A ``queue sweep`` document (``-o``, a run directory's ``sweep.json``, ``--json``'s last
    event): its points are run results; ``hwqueue/sweep.py`` builds it, ``compare``, the
    sweep table and ``export`` read it. One serializer (:meth:`to_json`, the bytes the untyped
    writer wrote), one reader (:meth:`from_json`; :func:`load_result` reads a file)."""

    run_id: str | None
    workload: WorkloadFacts  # the first point's
    emulated: bool  # the first point's
    platform: Json  # the first point's platform section, as it wrote it (null: it had none)
    stream_counts: tuple[int, ...]  # as asked, the failed ones included
    isolation: str  # how the points ran: a fresh process each, or all in one
    failed_points: tuple[FailedPoint, ...]
    analysis: SweepAnalysis
    points: tuple[QueueResult, ...]  # the measured ones, in count order
    extra: dict[str, Json] = field(default_factory=dict)  # keys this build does not write
    schema_version: int = SCHEMA_VERSION
    absent: frozenset[str] = frozenset()  # of run_id, isolation, failed_points

    __hash__ = None  # type: ignore[assignment]  # mutable dict fields: never a dict key

    @property
    def name(self) -> str | None:
        """The sweep's id as ``compare`` names it: a hand-made document's ``sweep_id`` (read
        as the older name of it), else its run id."""
        sweep_id = self.extra.get("sweep_id", self.run_id)
        return sweep_id if isinstance(sweep_id, str) else None

    def to_json(self) -> dict[str, Json]:
        """The object the sweep file holds (``core.atomic.atomic_write_json`` writes it)."""
        typed: dict[str, Json] = {
            "schema_version": self.schema_version, "kind": SWEEP_KIND, "run_id": self.run_id,
            "workload": self.workload.to_json(), "emulated": self.emulated,
            "platform": self.platform, "stream_counts": list(self.stream_counts),
            "isolation": self.isolation,
            "failed_points": [f.to_json() for f in self.failed_points],
            "analysis": self.analysis.to_json(), "points": [p.to_json() for p in self.points]}
        for key in self.absent:
            typed.pop(key, None)
        return _in_order(typed | self.extra, _SWEEP_ORDER)

    @classmethod
    def from_json(cls, doc: object, where: str) -> QueueSweepDoc:
        """Read a parsed sweep; a damaged one is a located UsageError (exit 2) naming the file
        and the field path (``points[2].config.streams``, ``analysis.knee_streams``)."""
        return _read_sweep(FieldReader(where, SWEEP_WHAT), doc)


# The name the sweep's type had while only its points were typed (compare, frames, tests).
QueueSweep = QueueSweepDoc


def _missing(f: FieldReader, d: dict[str, Any], keys: tuple[str, ...], path: str) -> None:
    for key in keys:
        if key not in d:
            raise UsageError(f"{f.where}: {f.join(path, key)}: missing", hint=HINT)


def _read_sweep(f: FieldReader, data: object) -> QueueSweepDoc:
    d = f.obj(data, "(top level)")
    if d.get("kind") != SWEEP_KIND:
        raise UsageError(f"{f.where}: kind: expected {SWEEP_KIND!r}, found "
                         f"{clip_for_message(d.get('kind'))}", hint=HINT)
    _missing(f, d, _SWEEP_REQUIRED, "")
    f.check(d.get("sweep_id"), "string", "sweep_id", nullable=True)  # compare names it
    workload = f.obj(d["workload"], "workload")
    failed = tuple(_read_failed(f, p, f"failed_points[{i}]")
                   for i, p in enumerate(f.array_at(d, "failed_points", "")))
    points = tuple(QueueResult.from_json(p, f.where, f"points[{i}].")
                   for i, p in enumerate(f.check(d["points"], "array", "points")))
    return QueueSweepDoc(
        run_id=f.opt_text(d, "run_id", ""),
        workload=WorkloadFacts(f.text(workload, "name", "workload", required=True),
                               {k: v for k, v in workload.items() if k != "name"}),
        emulated=f.check(d["emulated"], "boolean", "emulated"), platform=d["platform"],
        stream_counts=tuple(f.check(c, "integer", f"stream_counts[{i}]")
                            for i, c in enumerate(f.check(d["stream_counts"], "array",
                                                          "stream_counts"))),
        isolation=f.text(d, "isolation", ""), failed_points=failed,
        analysis=_read_analysis(f, f.obj(d["analysis"], "analysis")), points=points,
        extra={k: v for k, v in d.items() if k not in _SWEEP_ORDER},
        schema_version=f.integer(d, "schema_version", "", SCHEMA_VERSION),
        absent=frozenset(k for k in ("schema_version", "run_id", "isolation", "failed_points")
                         if k not in d))


def _read_failed(f: FieldReader, value: object, path: str) -> FailedPoint:
    d = f.obj(value, path)
    return FailedPoint(streams=f.integer(d, "streams", path, required=True),
                       reason=f.text(d, "reason", path, required=True),
                       extra={k: v for k, v in d.items() if k not in ("streams", "reason")})


def _read_analysis(f: FieldReader, d: dict[str, Any]) -> SweepAnalysis:
    p = "analysis"
    _missing(f, d, _ANALYSIS_REQUIRED, p)
    efficiency = {k: f.check(v, "number", f"{p}.efficiency.{k}")
                  for k, v in f.obj_at(d, "efficiency", p).items()}
    return SweepAnalysis(
        efficiency=efficiency, peak_streams=f.opt_integer(d, "peak_streams", p),
        peak_throughput=f.opt_number(d["peak_throughput"], f"{p}.peak_throughput"),
        knee_streams=f.opt_integer(d, "knee_streams", p),
        # present only where the sweep wrote them, and then never null
        knee_gain=f.check(d["knee_gain"], "number", f"{p}.knee_gain") if "knee_gain" in d else None,
        reason=f.text(d, "reason", p) if "reason" in d else None,
        extra={k: v for k, v in d.items() if k not in _ANALYSIS_ORDER})


def load_result(path: str | os.PathLike[str]) -> QueueResult | QueueSweepDoc:
    """Read a queue result (or sweep) file, refusing anything that is not one, with the reason.

    Beyond the kind and version, every field ``queue compare`` reads is type-checked here, so
    a damaged file is a located UsageError naming the field, never a KeyError later.
    """
    return read_document(_load_queue_file(path), os.fspath(path))


def _load_queue_file(path: str | os.PathLike[str]) -> object:
    """The parsed JSON of a queue result or sweep file: bounded by ``INPUT_LIMITS``."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise UsageError(f"{p} is a directory, not a queue result file", hint=HINT)
    data: object = load_json_input(p, what="queue result", limit=INPUT_LIMITS["queue result"],
                                   hint=HINT)
    return data


def read_document(data: object, where: str) -> QueueResult | QueueSweepDoc:
    """A queue result (or sweep) file's parsed content, checked as :func:`load_result` checks
    it (kind, version, every field): for a caller that reads the file's bytes its own way (the
    policy evaluator reads a trial's ``result.json`` without following a link)."""
    if _checked_kind(data, where) == SWEEP_KIND:
        return QueueSweepDoc.from_json(data, where)
    return QueueResult.from_json(data, where)


def read_run_document(data: object, where: str) -> QueueResult:
    """As :func:`read_document`, where one run's result must be (a run's own process wrote
    it): a sweep is refused by its kind, before its fields are read (whole or damaged, it is
    not one run's result, and that is what the message says)."""
    if _checked_kind(data, where) == SWEEP_KIND:
        raise UsageError(f"{where} holds a queue sweep, not one run's result", hint=HINT)
    return QueueResult.from_json(data, where)


def _checked_kind(data: object, where: str) -> str:
    """The kind of a queue document of the version this build reads, or a located refusal."""
    if not isinstance(data, dict) or data.get("kind") not in (KIND, SWEEP_KIND):
        raise UsageError("not an aorta-tui queue result", location=where, hint=HINT)
    if data.get("schema_version") != SCHEMA_VERSION or isinstance(data.get("schema_version"), bool):
        raise UsageError(f"schema_version {clip_for_message(data.get('schema_version'))} is not "
                         f"supported (this build reads {SCHEMA_VERSION})", location=where,
                         hint="re-run the measurement with this aorta-tui version")
    kind: str = data["kind"]
    return kind


def as_result(doc: QueueResult | dict[str, Any], where: str) -> QueueResult:
    """``doc`` as the typed value: a document still in its JSON form (a library caller's, a
    test's) is read by :meth:`QueueResult.from_json`, damaged fields refused as from a file."""
    return doc if isinstance(doc, QueueResult) else QueueResult.from_json(doc, where)


def load_run_result(path: str | os.PathLike[str]) -> QueueResult:
    """A file that must hold one run's result (what a run's own process wrote), not a sweep."""
    return read_run_document(_load_queue_file(path), os.fspath(path))
