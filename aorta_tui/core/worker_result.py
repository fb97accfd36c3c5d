"""A trial worker's result file (``workload_result.json``; ``workload_result.rank<N>.json`` for
the other ranks of a distributed trial) as a typed value.

The worker (``trial/worker.py``, and ``trial/inprocess.py`` for an in-process trial) writes the
workload's result (``registry.workload.WorkloadResult.to_dict()``) with what the worker adds
(``worker_wall_s``, the child's ``timeline``); the orchestrator reads it back as the trial ends.
One serializer, :meth:`WorkerResult.to_json` (the object the worker has always written, key
order included), and one reader, :func:`read_worker_result`: bounded, each field's type
checked, a damaged file a located UsageError naming the file and the field. What the
orchestrator does with a refusal is its own decision (``sweep/orchestrator.py``: no result, as
an unreadable file always was).

The worker imports this module as it starts (its start-up time is every trial's): it needs only
what the worker already imports (``core.atomic``, ``core.inputs``, ``core.errors``); the run's
file layer the reader goes through is the orchestrator's, named here for the type checker only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import (
    INPUT_LIMITS,
    FieldReader,
    Json,
    decode_utf8,
    parse_json_text,
    read_fd_bounded,
)

if TYPE_CHECKING:
    import os

    from aorta_tui.core.rundir_fs import RunDirFS

WHAT = "workload result"
# json.loads' own recursion (about 1000 levels) was the only bound the orchestrator's reader had:
# a workload's metrics nested deeper than core.inputs' default (64) are still read, not refused.
_MAX_DEPTH = 900
_HINT = f"this {WHAT} is damaged or was not written by aorta-tui"  # FieldReader's words too


@dataclass(frozen=True)
class WorkerFailure:
    """One failure the workload reported (``registry.workload.Failure``)."""

    code: str
    message: str
    # as the workload gave them: json_bytes writes what JSON lacks (a Path, a set) its way;
    # read back from the file they are JSON
    details: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details, **self.extra}


@dataclass(frozen=True)
class WorkerResult:
    """The file's fields, in the order the worker writes them; ``worker_wall_s`` and
    ``timeline`` None when the file does not hold them (an in-process trial writes no
    ``worker_wall_s``), and then not written back."""

    step_times_s: tuple[float, ...] = ()
    metrics: dict[str, Any] = field(default_factory=dict)  # as the workload gave them
    failures: tuple[WorkerFailure, ...] = ()
    device: str = "cpu"
    emulated: bool = False
    applied_switches: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    passed: bool = True
    worker_wall_s: float | None = None  # the worker's own time around the trial
    timeline: dict[str, Any] | None = None  # trial.timeline.ChildMarks.finish()
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def of(cls, workload: Mapping[str, Any], *, worker_wall_s: float | None = None,
           timeline: dict[str, Any] | None = None) -> WorkerResult:
        """The document of a workload's result, given as ``WorkloadResult.to_dict()`` (this
        layer cannot name the registry's type; ``to_dict`` is also what turns a dataclass the
        workload left in its metrics into an object)."""
        return cls(
            step_times_s=tuple(workload["step_times_s"]), metrics=workload["metrics"],
            failures=tuple(WorkerFailure(f["code"], f["message"], f["details"])
                           for f in workload["failures"]),
            device=workload["device"], emulated=workload["emulated"],
            applied_switches=tuple(workload["applied_switches"]), notes=tuple(workload["notes"]),
            passed=workload["passed"], worker_wall_s=worker_wall_s, timeline=timeline)

    def to_json(self) -> dict[str, Any]:
        """The object the file holds (``core.atomic.json_bytes`` writes it), in the order the
        worker has always written it; an absent ``worker_wall_s`` or ``timeline`` left out."""
        out: dict[str, Any] = {
            "step_times_s": list(self.step_times_s), "metrics": self.metrics,
            "failures": [f.to_json() for f in self.failures], "device": self.device,
            "emulated": self.emulated, "applied_switches": list(self.applied_switches),
            "notes": list(self.notes), "passed": self.passed,
        }
        if self.worker_wall_s is not None:
            out["worker_wall_s"] = self.worker_wall_s
        if self.timeline is not None:
            out["timeline"] = self.timeline
        return {**out, **self.extra}

    def file_bytes(self, *, where: str) -> bytes:
        """The file's bytes (``to_json`` through ``core.atomic.json_bytes``), checked to read
        back. A workload that broke ``WorkloadResult``'s types (a failure whose code is no
        string, a device that is null) would leave a file the reader refuses, and a failing
        trial would read as one without a result, its verdict its process's: it gets instead
        the result of one ``invalid_result`` failure that names the field (``where``: the file)."""
        data = json_bytes(self.to_json())
        why = _refusal(data, where)
        if why is None:
            return data
        return json_bytes(WorkerResult(
            failures=(WorkerFailure("invalid_result", f"the workload returned a result "
                                    f"aorta-tui cannot record: {why}"),),
            passed=False, worker_wall_s=self.worker_wall_s, timeline=self.timeline).to_json())

    @classmethod
    def from_dict(cls, data: object, *, where: str) -> WorkerResult:
        """Read a parsed result file; a damaged one is a located UsageError (exit 2)."""
        return _read(FieldReader(where, WHAT), data)


def read_worker_result(fs: RunDirFS, path: str | os.PathLike[str]) -> WorkerResult:
    """The result file at ``path`` (in the run ``fs`` serves: no link followed, no FIFO waited
    on, at most ``INPUT_LIMITS["worker result"]`` read), typed. Missing: FileNotFoundError; not
    a regular file: ``RunDirRefused``; damaged: a located UsageError."""
    where = fs.display(fs.rel(path))
    fh = fs.open_read(path)  # the file layer's checked open; missing: FileNotFoundError
    assert fh is not None  # missing_ok is off
    with fh:
        raw = read_fd_bounded(fh, where=where, what=WHAT, limit=INPUT_LIMITS["worker result"])
    text = decode_utf8(raw, where=where, what=WHAT, hint=_HINT)
    data = parse_json_text(text, where=where, what=WHAT, max_depth=_MAX_DEPTH, hint=_HINT)
    return WorkerResult.from_dict(data, where=where)


def _refusal(data: bytes, where: str) -> str | None:
    """Why :func:`read_worker_result` would refuse a file of these bytes (its words), or None:
    the same limit, parse and field checks (a result over the size limit, a field of the
    wrong type)."""
    limit = INPUT_LIMITS["worker result"]
    if len(data) > limit:
        return f"{where}: {len(data)} bytes, over the {limit} a {WHAT} may take"
    try:  # json_bytes writes UTF-8
        WorkerResult.from_dict(parse_json_text(data.decode("utf-8"), where=where, what=WHAT,
                                               max_depth=_MAX_DEPTH), where=where)
    except UsageError as exc:
        return exc.message
    return None


# -- the reader ----------------------------------------------------------------------------

_KNOWN = frozenset(WorkerResult(worker_wall_s=0.0, timeline={}).to_json())
_KNOWN_FAILURE = frozenset(WorkerFailure("", "").to_json())


def _read(f: FieldReader, data: object) -> WorkerResult:
    d = f.obj(data, "(top level)")
    # Every field but the two the worker adds is required: the worker writes each one, always.
    steps: list[object] = f.check(_required(f, d, "step_times_s"), "array", "step_times_s")
    return WorkerResult(
        step_times_s=tuple(_step_time(f, v, i) for i, v in enumerate(steps)),
        metrics=f.obj(_required(f, d, "metrics"), "metrics"),
        failures=_failures(f, _required(f, d, "failures")),
        device=f.text(d, "device", "", required=True),
        emulated=f.check(_required(f, d, "emulated"), "boolean", "emulated"),
        applied_switches=f.strings(_required(f, d, "applied_switches"), "applied_switches"),
        notes=f.strings(_required(f, d, "notes"), "notes"),
        passed=f.check(_required(f, d, "passed"), "boolean", "passed"),
        # the worker never writes null for either: a null is damage, not an absent field
        worker_wall_s=f.check(d["worker_wall_s"], "number", "worker_wall_s") if "worker_wall_s" in d else None,
        timeline=f.obj(d["timeline"], "timeline") if "timeline" in d else None,
        extra={k: v for k, v in d.items() if k not in _KNOWN})


def _step_time(f: FieldReader, value: object, i: int) -> float:
    """A number as the workload timed it: a non-finite one (NaN) is still one the worker
    writes (json_bytes writes NaN), and the sweep took it as it was."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    number: float = f.check(value, "number", f"step_times_s[{i}]")  # raises, located
    return number


def _required(f: FieldReader, d: dict[str, Any], key: str) -> object:
    if key not in d:
        raise UsageError(f"{f.where}: {key}: missing", hint=_HINT)
    return d[key]


def _failures(f: FieldReader, value: object) -> tuple[WorkerFailure, ...]:
    items: list[object] = f.check(value, "array", "failures")
    out = []
    for i, item in enumerate(items):
        path = f"failures[{i}]"
        e = f.obj(item, path)
        out.append(WorkerFailure(
            code=f.text(e, "code", path, required=True),
            message=f.text(e, "message", path, required=True),
            details=f.obj_at(e, "details", path, required=True),
            extra={k: v for k, v in e.items() if k not in _KNOWN_FAILURE}))
    return tuple(out)
