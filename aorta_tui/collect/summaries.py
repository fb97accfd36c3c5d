"""The summaries the trial worker's collectors write, as typed values:
``<trial>/layer_numerics/summary_rank<R>.json`` (collect/layer_numerics.py) and
``<trial>/torch_profiler/summary_rank<R>.json`` (collect/torch_profiler.py).

Each has one serializer, ``to_json()`` (the object the untyped writer wrote, key order
included: ``json_bytes`` of it is that writer's bytes) and one reader, ``from_dict`` (every
field's type checked, a damaged one named with the file and the field path: UsageError, exit
2), read bounded by :func:`load_summary` (``INPUT_LIMITS``) through the run's file layer. The
version is ``schema_version`` (1), as today; another one is refused, named. A key this version
does not know is kept (``extra``), after the known ones. ``torch_profiler``'s ``metrics`` stay
free-form JSON: their keys are upstream's metric names, which the matrix and the report carry
as they are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aorta_tui.collect.doc_fields import opt_text, required, strings
from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json
from aorta_tui.core.rundir_fs import RunDirFS

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class FirstBad:
    """The first record with a NaN, an Inf or a huge value (layer_numerics)."""

    step: int
    layer: str
    direction: str  # fwd | bwd | param
    role: str  # act | input | igrad | weight | bias | wgrad | bgrad
    kind: str  # nan | inf | huge
    extra: dict[str, Json] = field(default_factory=dict)  # a newer writer's keys

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    def to_json(self) -> dict[str, Json]:
        return {"step": self.step, "layer": self.layer, "direction": self.direction,
                "role": self.role, "kind": self.kind, **self.extra}


@dataclass(frozen=True)
class LayerNumericsSummary:
    """``layer_numerics/summary_rank<R>.json`` (collect/layer_numerics.py's docstring)."""

    rank: int
    pid: int
    steps_seen: int
    records_written: int
    first_bad: FirstBad | None
    huge_threshold: float
    sample_every: int
    pre_context: int
    pre_context_flushed: bool
    channels: tuple[str, ...]
    watch_types: tuple[str, ...]
    watch_names: tuple[str, ...]
    watched_count: int
    watched_names: tuple[str, ...]
    ignored_options: tuple[str, ...]
    error: str | None  # the collector's own problem (never the trial's failure)
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Json] = field(default_factory=dict)  # a newer writer's keys

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    def to_json(self) -> dict[str, Json]:
        return {
            "schema_version": self.schema_version, "rank": self.rank, "pid": self.pid,
            "steps_seen": self.steps_seen, "records_written": self.records_written,
            "first_bad": None if self.first_bad is None else self.first_bad.to_json(),
            "huge_threshold": self.huge_threshold,
            "sample_every": self.sample_every, "pre_context": self.pre_context,
            "pre_context_flushed": self.pre_context_flushed, "channels": list(self.channels),
            "watch_types": list(self.watch_types), "watch_names": list(self.watch_names),
            "watched_count": self.watched_count, "watched_names": list(self.watched_names),
            "ignored_options": list(self.ignored_options), "error": self.error, **self.extra,
        }

    @classmethod
    def from_dict(cls, data: object, *, where: str) -> LayerNumericsSummary:
        return _read_layer_numerics(FieldReader(where, LAYER_NUMERICS_WHAT), data)


@dataclass(frozen=True)
class TorchProfilerSummary:
    """``torch_profiler/summary_rank<R>.json`` (collect/torch_profiler.py's docstring)."""

    rank: int
    pid: int
    steps: int
    activities: tuple[str, ...]  # cpu, and cuda when CUDA activities were recorded
    options: dict[str, str]  # the recipe's collect.torch_profiler options, as strings
    trace: str | None  # the chrome trace's file name beside it; None: not written
    metrics: dict[str, Json]  # torch_profiler_* (free-form: upstream's metric names)
    error: str | None  # the collector's own problem (never the trial's failure)
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Json] = field(default_factory=dict)  # a newer writer's keys

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    def to_json(self) -> dict[str, Json]:
        return {"schema_version": self.schema_version, "rank": self.rank, "pid": self.pid,
                "steps": self.steps, "activities": list(self.activities),
                "options": dict(self.options), "trace": self.trace,
                "metrics": self.metrics, "error": self.error, **self.extra}

    @classmethod
    def from_dict(cls, data: object, *, where: str) -> TorchProfilerSummary:
        return _read_torch_profiler(FieldReader(where, TORCH_PROFILER_WHAT), data)


LAYER_NUMERICS_WHAT = "layer numerics summary"
TORCH_PROFILER_WHAT = "torch profiler summary"


S = TypeVar("S", LayerNumericsSummary, TorchProfilerSummary)


def load_summary(fs: RunDirFS, path: str | os.PathLike[str], kind: type[S]) -> S:
    """The summary at ``path`` in the run ``fs`` holds, typed: through the run's file layer (a
    link, a FIFO or a device there is refused, never followed or waited on) and bounded.
    Missing: FileNotFoundError; damaged or refused: a located AortaError (exit 2)."""
    what = LAYER_NUMERICS_WHAT if kind is LayerNumericsSummary else TORCH_PROFILER_WHAT
    data = fs.load_json(path, what=what, limit=INPUT_LIMITS[what])
    return kind.from_dict(data, where=fs.display(fs.rel(path)))


# -- the readers -----------------------------------------------------------------------------

def _version(f: FieldReader, d: dict[str, Any]) -> int:
    version = f.integer(d, "schema_version", "", required=True)
    if version != SCHEMA_VERSION:
        # another version's fields may mean other things: refused, named, never half-read
        raise UsageError(f"{f.where}: schema_version: {version} is not {SCHEMA_VERSION}",
                         hint="read it with the aorta-tui version that wrote it")
    return version


def _first_bad(f: FieldReader, value: object) -> FirstBad | None:
    if value is None:
        return None
    d = f.obj(value, "first_bad")
    return FirstBad(step=f.integer(d, "step", "first_bad", required=True),
                    layer=f.text(d, "layer", "first_bad", required=True),
                    direction=f.text(d, "direction", "first_bad", required=True),
                    role=f.text(d, "role", "first_bad", required=True),
                    kind=f.text(d, "kind", "first_bad", required=True),
                    extra={k: v for k, v in d.items() if k not in _FIRST_BAD_KEYS})


def _read_layer_numerics(f: FieldReader, data: object) -> LayerNumericsSummary:
    d = f.obj(data, "(top level)")
    version = _version(f, d)
    return LayerNumericsSummary(
        schema_version=version, rank=f.integer(d, "rank", "", required=True),
        pid=f.integer(d, "pid", "", required=True),
        steps_seen=f.integer(d, "steps_seen", "", required=True),
        records_written=f.integer(d, "records_written", "", required=True),
        first_bad=_first_bad(f, required(f, d, "first_bad", "")),
        huge_threshold=f.number(d, "huge_threshold", "", required=True),
        sample_every=f.integer(d, "sample_every", "", required=True),
        pre_context=f.integer(d, "pre_context", "", required=True),
        pre_context_flushed=f.check(required(f, d, "pre_context_flushed", ""), "boolean",
                                    "pre_context_flushed"),
        channels=strings(f, d, "channels", ""), watch_types=strings(f, d, "watch_types", ""),
        watch_names=strings(f, d, "watch_names", ""),
        watched_count=f.integer(d, "watched_count", "", required=True),
        watched_names=strings(f, d, "watched_names", ""),
        ignored_options=strings(f, d, "ignored_options", ""),
        error=opt_text(f, d, "error", ""),
        extra={k: v for k, v in d.items() if k not in _LAYER_NUMERICS_KEYS})


def _read_torch_profiler(f: FieldReader, data: object) -> TorchProfilerSummary:
    d = f.obj(data, "(top level)")
    version = _version(f, d)
    options = f.obj(required(f, d, "options", ""), "options")
    return TorchProfilerSummary(
        schema_version=version, rank=f.integer(d, "rank", "", required=True),
        pid=f.integer(d, "pid", "", required=True),
        steps=f.integer(d, "steps", "", required=True),
        activities=strings(f, d, "activities", ""),
        options={k: f.text(options, k, "options") for k in options},
        trace=opt_text(f, d, "trace", ""),
        metrics=f.obj(required(f, d, "metrics", ""), "metrics"),
        error=opt_text(f, d, "error", ""),
        extra={k: v for k, v in d.items() if k not in _TORCH_PROFILER_KEYS})


_FIRST_BAD_KEYS = frozenset(FirstBad(0, "", "", "", "").to_json())
_LAYER_NUMERICS_KEYS = frozenset(LayerNumericsSummary(
    0, 0, 0, 0, None, 0.0, 0, 0, False, (), (), (), 0, (), (), None).to_json())
_TORCH_PROFILER_KEYS = frozenset(TorchProfilerSummary(0, 0, 0, (), {}, None, {}, None).to_json())
