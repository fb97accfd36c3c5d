"""result.json's ``process`` section as a typed value: how a trial's process ended
(:class:`ProcessRecord`) and, for a trial an executor other than a local process ran, where it ran
(:class:`ExecutorFacts`: a Slurm job's id, node, GPUs, state and queue wait).

Here in ``core`` because the trial contract (``core/trial_contract.TrialResult.process``) holds
it and ``core`` is the lowest layer: ``trial/supervisor.ProcessOutcome`` (the live value, above)
makes one with ``to_record()`` and serializes through it, so the section has one serializer,
:meth:`ProcessRecord.to_dict`, and one reader, :func:`read_process_record`. The executor's facts
are built by ``executor/slurm.py`` and read by ``executor/placement.py``, the classifier's
placement and the TUI, each by attribute.

A key the source did not hold (a file an older aorta-tui wrote, before ``marks`` or
``gate_waited_s`` existed) is named in ``absent`` and left out again when written, so such a
file reads back to its own bytes; a value this version made holds every key (``absent`` empty).
Keys this version does not type are kept in ``extra`` and written after the known ones. Where the
writer never writes null (``wall_s``, ``distributed``), None is the key's absence.

The reader has the trial contract's two modes. ``strict`` (the default): a field of the wrong
type is a located UsageError (file, field path, fix). Not strict (the run directory's reading,
``TrialResult.from_dict(strict=False)``: a trial's odd output never stops the sweep): such a
field reads as absent and its raw value is kept in ``extra``, so nothing of the file is lost.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.hang_report import HangReport, read_hang_report
from aorta_tui.core.inputs import FieldReader, Json

WHAT = "trial result"


@dataclass(frozen=True)
class ExecutorFacts:
    """Where a trial ran when an executor other than a local process ran it: ``process.executor``
    of result.json (docs/slurm.md). Written by ``executor/slurm.py``, in this order; the times
    are epoch seconds."""

    kind: str = ""  # "slurm" (the one such executor so far); "": the source held none
    job_id: str | None = None  # "<array job>_<task>"; None: never submitted
    batch: str | None = None  # the job array's name
    task: int | None = None  # the trial's task in the array
    slurm_job_id: str | None = None  # the task's own SLURM_JOB_ID
    state: str | None = None  # the job's final state (COMPLETED, NODE_FAIL, LOST, ...)
    node: str | None = None  # the job's first node
    nodes: tuple[str, ...] = ()  # every node of the job
    gpus: dict[str, str | None] = field(default_factory=dict)  # variable -> GPU ids Slurm gave
    submitted_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    slurm_times: dict[str, float | None] | None = None  # squeue/sacct's submit, start, end
    reason: str | None = None  # why the job ended so (Slurm's reason, or why it vanished)
    signal: str | None = None  # what Slurm sent the task (scancel, time limit, preemption)
    adopted: bool = False  # a resume adopted the job of an earlier session
    gate_waited_s: float | None = None  # the task's wait at the shared-filesystem gate
    # {nodes, ranks_per_node, world_size} of a distributed trial; None: not one, and then not
    # written (the writer never writes null here)
    distributed: dict[str, int] | None = None
    queue_wait_s: float | None = None
    run_s: float | None = None
    absent: frozenset[str] = frozenset()  # keys the source did not hold: not written back
    extra: dict[str, Json] = field(default_factory=dict)  # keys this version does not type

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    def to_dict(self) -> dict[str, Json]:
        """``process.executor`` as result.json holds it, key order included."""
        return _written(self, _FACT_KEYS)


@dataclass(frozen=True)
class ProcessRecord:
    """A finished trial process: result.json's ``process`` (``ProcessOutcome.to_dict``), in its
    order. The meaning of each field is ``trial/supervisor.ProcessOutcome``'s; a field is None
    (or its empty value) where the source did not hold it."""

    pid: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    core_dumped: bool = False
    timed_out: bool = False
    cancelled: bool = False
    hang: HangReport | None = None  # tier 2's report (core/hang_report.py)
    exec_error: str | None = None
    wall_s: float | None = None  # None: not recorded
    started_at: float | None = None
    ended_at: float | None = None
    peak_rss_kb: int | None = None
    gpu_peak_mem_bytes: int | None = None
    gpu_mem_reason: str | None = None
    stdout_bytes: int | None = None
    stderr_bytes: int | None = None
    truncated: bool = False
    gpu_mem_source: str | None = None
    peak_rss_reason: str | None = None
    gpu_counters_delta: dict[str, dict[str, int]] | None = None
    gpu_counters_reason: str | None = None
    killed_strays: bool = False
    kill_escalated: bool = False
    log_error: str | None = None
    hang_note: str | None = None
    containment: str | None = None
    containment_reason: str | None = None
    timeout_s: float | None = None
    stopped_at_s: float | None = None
    killed_count: int = 0
    survivors: tuple[int, ...] | None = None
    survivors_reason: str | None = None
    marks: dict[str, int] = field(default_factory=dict)
    beside: dict[str, Json] = field(default_factory=dict)
    executor: ExecutorFacts | None = None
    signal_name: str | None = None
    absent: frozenset[str] = frozenset()  # keys the source did not hold: not written back
    extra: dict[str, Json] = field(default_factory=dict)  # keys this version does not type

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def empty(cls) -> ProcessRecord:
        """A section that holds nothing (``{}``): a result without a process section reads so."""
        return cls(absent=frozenset(name for name, *_ in _PROCESS_KEYS))

    def to_dict(self) -> dict[str, Json]:
        """``process`` as result.json holds it, key order included (the one serializer)."""
        return _written(self, _PROCESS_KEYS)


def read_process_record(data: object, *, where: str, path: str = "process",
                        strict: bool = True) -> ProcessRecord:
    """The ``process`` section ``data`` of the result file ``where``, checked.

    Not ``strict``, a section that is no object reads as empty (as the run directory always
    read it: its trial still counts) and a field of the wrong type as absent, its value kept
    in ``extra``; never an exception. Strict, both are a located UsageError."""
    f = FieldReader(where, WHAT)
    if not isinstance(data, dict):
        if strict:
            f.obj(data, path)
        return ProcessRecord.empty()
    values, absent, extra = _read_keys(f, data, path, _PROCESS_KEYS, strict=strict)
    return ProcessRecord(**values, absent=absent - _PROCESS_NONE_UNWRITTEN, extra=extra)


def read_executor_facts(f: FieldReader, data: dict[str, Any], path: str, *,
                        strict: bool = True) -> ExecutorFacts:
    """``process.executor`` (the object ``data`` at ``path`` of the document ``f`` reads)."""
    values, absent, extra = _read_keys(f, data, path, _FACT_KEYS, strict=strict)
    return ExecutorFacts(**values, absent=absent - _FACTS_NONE_UNWRITTEN, extra=extra)


# -- the writer and the reader --------------------------------------------------------------

# A key's reader past its JSON type: (reader, path of the value, strict) -> the typed value.
_Convert = Callable[[FieldReader, Any, str, bool], Any]
_Keys = tuple[tuple[str, str, bool, _Convert | None], ...]


def _written(value: ProcessRecord | ExecutorFacts, keys: _Keys) -> dict[str, Json]:
    """``value``'s keys in file order, then its extra ones. Left out: those the source did not
    hold, and None in a key the writer never writes null to (``wall_s``, ``distributed``): there
    None is the absence, so a value has one document and a document one value."""
    out: dict[str, Json] = {}
    for name, _kind, nullable, _ in keys:
        item = getattr(value, name)
        if name in value.absent or (item is None and not nullable):
            continue
        if isinstance(item, (ExecutorFacts, HangReport)):
            out[name] = item.to_dict()
        else:
            out[name] = list(item) if isinstance(item, tuple) else copy.deepcopy(item)
    out.update(copy.deepcopy(value.extra))
    return out


def _read_keys(f: FieldReader, d: dict[str, Any], path: str, keys: _Keys, *, strict: bool,
               ) -> tuple[dict[str, Any], frozenset[str], dict[str, Json]]:
    """Each known key of ``d`` checked: (typed values, keys not held, keys kept untyped)."""
    values: dict[str, Any] = {}
    absent: set[str] = set()
    kept: dict[str, Json] = {}
    for name, kind, nullable, convert in keys:
        if name not in d:
            # An older writer's file (or a hand-written one): absent in both modes, as the
            # contract always took any process object; the key is not written back.
            absent.add(name)
            continue
        at = FieldReader.join(path, name)
        try:
            value = f.check(d[name], kind, at, nullable=nullable)
            values[name] = value if value is None or convert is None else convert(f, value, at,
                                                                                  strict)
        except UsageError:
            if strict:
                raise
            absent.add(name)  # lenient: read as not recorded, the value kept as it was
            kept[name] = d[name]
    known = {name for name, *_ in keys}
    extra = {k: v for k, v in d.items() if k not in known}
    return values, frozenset(absent), {**extra, **kept}


def _ints(f: FieldReader, value: dict[str, Any], path: str, strict: bool) -> dict[str, int]:
    return {k: f.check(v, "integer", f"{path}.{k}") for k, v in value.items()}


def _int_maps(f: FieldReader, value: dict[str, Any], path: str, strict: bool
              ) -> dict[str, dict[str, int]]:
    return {k: _ints(f, f.obj(v, f"{path}.{k}"), f"{path}.{k}", strict) for k, v in value.items()}


def _int_tuple(f: FieldReader, value: list[Any], path: str, strict: bool) -> tuple[int, ...]:
    return tuple(f.check(v, "integer", f"{path}[{i}]") for i, v in enumerate(value))


def _str_tuple(f: FieldReader, value: list[Any], path: str, strict: bool) -> tuple[str, ...]:
    return f.strings(value, path)


def _opt_strs(f: FieldReader, value: dict[str, Any], path: str, strict: bool
              ) -> dict[str, str | None]:
    return {k: f.check(v, "string", f"{path}.{k}", nullable=True) for k, v in value.items()}


def _opt_numbers(f: FieldReader, value: dict[str, Any], path: str, strict: bool
                 ) -> dict[str, float | None]:
    return {k: f.opt_number(v, f"{path}.{k}") for k, v in value.items()}


def _json(f: FieldReader, value: Json, path: str, strict: bool) -> Json:
    return copy.deepcopy(value)  # any JSON (what ran beside): kept as written


def _hang(f: FieldReader, value: dict[str, Any], path: str, strict: bool) -> HangReport:
    return read_hang_report(f, value, path)


def _facts(f: FieldReader, value: dict[str, Any], path: str, strict: bool) -> ExecutorFacts:
    return read_executor_facts(f, value, path, strict=strict)


# (key, JSON kind, nullable, reader past the kind): ExecutorFacts's keys, in file order
_FACT_KEYS: _Keys = (
    ("kind", "string", False, None), ("job_id", "string", True, None),
    ("batch", "string", True, None), ("task", "integer", True, None),
    ("slurm_job_id", "string", True, None), ("state", "string", True, None),
    ("node", "string", True, None), ("nodes", "array", False, _str_tuple),
    ("gpus", "object", False, _opt_strs), ("submitted_at", "number", True, None),
    ("started_at", "number", True, None), ("ended_at", "number", True, None),
    ("slurm_times", "object", True, _opt_numbers), ("reason", "string", True, None),
    ("signal", "string", True, None), ("adopted", "boolean", False, None),
    ("gate_waited_s", "number", True, None), ("distributed", "object", False, _ints),
    ("queue_wait_s", "number", True, None), ("run_s", "number", True, None),
)

# ProcessRecord's keys, in file order (ProcessOutcome's fields, then signal_name). Non-null
# where the supervisor never writes null (wall_s, the byte counts, the flags).
_PROCESS_KEYS: _Keys = (
    ("pid", "integer", True, None), ("exit_code", "integer", True, None),
    ("signal", "integer", True, None), ("core_dumped", "boolean", False, None),
    ("timed_out", "boolean", False, None), ("cancelled", "boolean", False, None),
    ("hang", "object", True, _hang), ("exec_error", "string", True, None),
    ("wall_s", "number", False, None), ("started_at", "number", False, None),
    ("ended_at", "number", False, None), ("peak_rss_kb", "integer", True, None),
    ("gpu_peak_mem_bytes", "integer", True, None), ("gpu_mem_reason", "string", True, None),
    ("stdout_bytes", "integer", False, None), ("stderr_bytes", "integer", False, None),
    ("truncated", "boolean", False, None), ("gpu_mem_source", "string", True, None),
    ("peak_rss_reason", "string", True, None),
    ("gpu_counters_delta", "object", True, _int_maps),
    ("gpu_counters_reason", "string", True, None), ("killed_strays", "boolean", False, None),
    ("kill_escalated", "boolean", False, None), ("log_error", "string", True, None),
    ("hang_note", "string", True, None), ("containment", "string", True, None),
    ("containment_reason", "string", True, None), ("timeout_s", "number", True, None),
    ("stopped_at_s", "number", True, None), ("killed_count", "integer", False, None),
    ("survivors", "array", True, _int_tuple), ("survivors_reason", "string", True, None),
    ("marks", "object", False, _ints), ("beside", "object", False, _json),
    ("executor", "object", True, _facts), ("signal_name", "string", True, None),
)



def _none_unwritten(cls: type, keys: _Keys) -> frozenset[str]:
    """The keys whose None is their absence (never written null, and None the field's default):
    a missing one is not named in ``absent``, so reading gives the value that writes the
    document."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    return frozenset(name for name, _kind, nullable, _ in keys
                     if not nullable and defaults[name] is None)


_PROCESS_NONE_UNWRITTEN = _none_unwritten(ProcessRecord, _PROCESS_KEYS)
_FACTS_NONE_UNWRITTEN = _none_unwritten(ExecutorFacts, _FACT_KEYS)
