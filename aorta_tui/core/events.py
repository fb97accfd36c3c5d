"""The one event stream.

Every long-running thing (a sweep, a queue run, a trace, a policy comparison) emits these
typed events. The run journal, the rich progress display, plain lines, ``--json`` and the TUI
are all sinks of the same stream; no front end computes results of its own.

Each event serialises to one JSON object with an ``"event"`` key naming its type, so a
``journal.jsonl`` line or a ``--json`` line can be turned back into the same dataclass with
:func:`event_from_dict`. Adding a field with a default keeps old journals readable.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

EVENT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str] = "event"
    run_id: str
    ts: float = field(default_factory=time.time, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.kind}
        for f in dataclasses.fields(self):
            out[f.name] = getattr(self, f.name)
        return out


@dataclass(frozen=True)
class RunStarted(Event):
    """A run began (or resumed). ``source`` is sweep, queue, queue_sweep, trace or policy."""

    kind: ClassVar[str] = "run_started"
    source: str
    run_dir: str
    total: int
    cells: list[str] = field(default_factory=list)
    recipe_hash: str = ""
    resumed: bool = False
    already_done: int = 0


@dataclass(frozen=True)
class TrialStarted(Event):
    kind: ClassVar[str] = "trial_started"
    trial_id: str
    cell: str
    trial: int
    attempt: int = 1
    pid: int | None = None


@dataclass(frozen=True)
class TrialFinished(Event):
    """A trial ended. ``verdict`` is pass, fail or error; ``detectors`` name what fired."""

    kind: ClassVar[str] = "trial_finished"
    trial_id: str
    cell: str
    trial: int
    verdict: str
    exit_code: int | None = None
    signal: int | None = None
    wall_s: float | None = None  # None only in a line written without it (never measured as 0)
    detectors: list[str] = field(default_factory=list)
    reason: str = ""
    trial_dir: str = ""
    mean_step_s: float | None = None


@dataclass(frozen=True)
class CellAggregated(Event):
    kind: ClassVar[str] = "cell_aggregated"
    cell: str
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress(Event):
    """Generic progress for work without trials (queue iterations, policy trials, probes)."""

    kind: ClassVar[str] = "progress"
    done: int
    total: int | None = None
    message: str = ""


@dataclass(frozen=True)
class Warning(Event):  # noqa: A001 - the event's name in the stream
    kind: ClassVar[str] = "warning"
    message: str
    code: str = ""


@dataclass(frozen=True)
class Measurement(Event):
    """A named set of figures, each figure documented by the engine that produced it.

    ``source`` names the engine (queue, policy, envsnap); ``values`` maps metric names to
    numbers or ``None`` where the platform cannot measure them (``reasons`` says why).
    """

    kind: ClassVar[str] = "measurement"
    source: str
    name: str
    values: dict[str, Any] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HistogramSnapshot(Event):
    """One interval of a streaming latency histogram (the trace engine's output).

    ``measures`` is the human sentence of what the latency is (probe source, library,
    kernel); ``buckets`` are ``[low, high, count]`` triples in ``unit``.
    """

    kind: ClassVar[str] = "histogram_snapshot"
    probe_set: str
    measures: str
    unit: str
    count: int
    buckets: list[list[float]] = field(default_factory=list)
    percentiles: dict[str, float | None] = field(default_factory=dict)
    events_per_s: float = 0.0
    lost_events: int | None = 0  # None: not known yet (the kernel's count has not arrived)
    malformed_lines: int = 0
    breakdown: dict[str, dict[str, Any]] = field(default_factory=dict)
    observer_cost: dict[str, Any] = field(default_factory=dict)
    # Metrics that subtract timestamps of two clocks (launch_to_start: eBPF host clock ->
    # CUPTI device clock) say how the clocks were aligned and how uncertain that is:
    # {"method": ..., "offset_ns": ..., "uncertainty_ns": ..., "samples": ...}; {} otherwise.
    clock: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResultWritten(Event):
    """A result file is complete on disk (a matrix, a queue result, a policy report)."""

    kind: ClassVar[str] = "result_written"
    path: str
    what: str


@dataclass(frozen=True)
class RunFinished(Event):
    """``status`` is completed, interrupted or failed; ``exit_code`` is the typed exit code."""

    kind: ClassVar[str] = "run_finished"
    status: str
    exit_code: int
    summary: dict[str, Any] = field(default_factory=dict)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        TrialStarted,
        TrialFinished,
        CellAggregated,
        Progress,
        Warning,
        Measurement,
        HistogramSnapshot,
        ResultWritten,
        RunFinished,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from its JSON form; unknown fields (from newer writers) are dropped."""
    kind = data.get("event")
    cls = EVENT_TYPES.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...

    def close(self) -> None: ...


class EventBus:
    """Fans each event out to its sinks in order. A failing sink never stops the run."""

    def __init__(self, sinks: Iterable[EventSink] = ()) -> None:
        self._sinks: list[EventSink] = list(sinks)
        self.errors: list[str] = []

    def add(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def prepend(self, sink: EventSink) -> None:
        """Put ``sink`` first: a run's journal must hold an event before any display shows it."""
        self._sinks.insert(0, sink)

    def emit(self, event: Event) -> None:
        for sink in self._sinks:
            try:
                sink.emit(event)
            except Exception as exc:  # a broken display must not lose the run
                self.errors.append(f"{type(sink).__name__}: {exc}")

    def close(self) -> None:
        for sink in self._sinks:
            try:
                sink.close()
            except Exception as exc:
                self.errors.append(f"{type(sink).__name__}: {exc}")


class CallbackSink:
    """Adapts a plain callable (a TUI message poster, a test's list.append) into a sink."""

    def __init__(self, fn: Callable[[Event], None]) -> None:
        self._fn = fn

    def emit(self, event: Event) -> None:
        self._fn(event)

    def close(self) -> None:
        return None
