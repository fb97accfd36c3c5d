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
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TextIO

# Evaluated at run time: store/journal_reader.parse_journal_line reads the fields' type hints.
from aorta_tui.core.aggregate import CellStats
from aorta_tui.core.trial_contract import TrialResult

EVENT_SCHEMA_VERSION = 1
# A field with this metadata is carried in memory only, never written to a journal or --json
# line (TrialFinished.result: the whole result is the trial's result.json already).
LOCAL = {"wire": False}


def _on_wire(f: dataclasses.Field[Any]) -> bool:
    return f.metadata.get("wire", True)


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str] = "event"
    run_id: str
    ts: float = field(default_factory=time.time, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.kind}
        for f in dataclasses.fields(self):
            if _on_wire(f):
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
class TrialLaunch(Event):
    """A trial's process is about to be created (written before it exists, so a SIGKILLed
    orchestrator never leaves a process the journal does not name).

    ``identity`` holds digests of the secret tokens the trial's processes carry in their
    environment (``trial/orphans.py``): a resume ends only processes whose token hashes, with
    this run directory's path, to one of them. Never a pid: a pid in a line proves nothing.
    """

    kind: ClassVar[str] = "trial_launch"
    trial_id: str
    cell: str
    trial: int
    attempt: int = 1
    identity: list[str] = field(default_factory=list)


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
    """A trial ended. ``verdict`` is pass, fail or error; ``detectors`` name what fired.

    ``result`` is the trial's typed ``result.json`` when the event comes from the sweep that
    just wrote it (a sink needs no second read of the file); it is not part of the line, so an
    event read back from a journal has ``None`` there, and the line is what it always was.
    """

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
    result: TrialResult | None = field(default=None, compare=False, repr=False, metadata=LOCAL)

    def __post_init__(self) -> None:
        if not isinstance(self.result, TrialResult):  # a foreign line's "result" key, say
            object.__setattr__(self, "result", None)

    @classmethod
    def of(cls, run_id: str, result: TrialResult, *, trial_dir: str, exit_code: int | None,
           signal: int | None, wall_s: float | None) -> TrialFinished:
        """The event of a trial whose result was just written, every field taken from it."""
        return cls(run_id, trial_id=result.trial_id, cell=result.cell, trial=result.trial,
                   verdict=result.verdict, exit_code=exit_code, signal=signal, wall_s=wall_s,
                   detectors=result.detectors, reason=result.reason, trial_dir=trial_dir,
                   mean_step_s=result.mean_step_s, result=result)


@dataclass(frozen=True)
class CellAggregated(Event):
    """A cell's figures once its trials are done; on the wire ``stats`` is ``CellStats.to_dict``."""

    kind: ClassVar[str] = "cell_aggregated"
    cell: str
    stats: CellStats = field(default_factory=lambda: CellStats.from_dict({}))

    def __post_init__(self) -> None:
        if isinstance(self.stats, CellStats):
            return
        from aorta_tui.core.errors import UsageError

        try:  # a journal line (or a caller) gives the dict form
            object.__setattr__(self, "stats", CellStats.from_dict(self.stats, cell=self.cell))
        except UsageError as exc:  # TypeError: what a journal reader reports as a bad line
            raise TypeError(exc.message) from None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["stats"] = self.stats.to_dict()
        return out


@dataclass(frozen=True)
class Progress(Event):
    """Generic progress for work without trials (queue iterations, policy trials, probes)."""

    kind: ClassVar[str] = "progress"
    done: int
    total: int | None = None
    message: str = ""


@dataclass(frozen=True)
class RunWarning(Event):
    """Something the user should know that does not stop the run. Named ``warning`` in the
    stream (journals and ``--json`` lines), as it always was."""

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
        TrialLaunch,
        TrialStarted,
        TrialFinished,
        CellAggregated,
        Progress,
        RunWarning,
        Measurement,
        HistogramSnapshot,
        ResultWritten,
        RunFinished,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from its JSON form; unknown fields (from newer writers) are dropped."""
    kind = data.get("event")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}")
    names = {f.name for f in dataclasses.fields(cls) if _on_wire(f)}
    return cls(**{k: v for k, v in data.items() if k in names})


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...

    def close(self) -> None: ...


class EventBus:
    """Fans each event out to its sinks in order. A failing sink never stops the run."""

    def __init__(self, sinks: Iterable[EventSink] = ()) -> None:
        self._sinks: list[EventSink] = list(sinks)
        self._closed: list[EventSink] = []  # by identity: a sink need not be hashable
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
        """Close each sink once: the run loop closes the bus as the run ends and the sweep's
        driver closes it again after its signal handling (a second close is a no-op)."""
        for sink in self._sinks:
            if any(sink is done for done in self._closed):
                continue
            self._closed.append(sink)
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


def event_line(event: Event) -> str:
    """One event as a line of every ``--json`` stream: the same object as journal.jsonl holds."""
    return json.dumps(event.to_dict(), default=str)


class JsonSink:
    """One event per line on stdout: the same objects as journal.jsonl."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._out = stream or sys.stdout

    def emit(self, event: Event) -> None:
        self._out.write(event_line(event) + "\n")
        self._out.flush()

    def close(self) -> None:
        return None
