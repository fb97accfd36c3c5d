"""A Slurm trial's ``slurm-outcome.json`` as a typed value: one serializer, one reader.

The array task on the node (``executor/slurm_job.run_trial``) ends by writing
:meth:`SlurmOutcome.to_json` into the trial directory, the object the file has always held, key
order included: how the trial's process ended (``ProcessOutcome.to_dict``), where the task ran
(:class:`NodeFacts`), the signal Slurm sent it, the wrapper's own times, its wait at the gate and
this node's kernel log. The orchestrator (``executor/slurm.py``) reads it back through
:meth:`SlurmOutcome.read`: bounded, a regular file never reached through a link, every field's
type checked, damage a located UsageError naming the file and the field path.

What the orchestrator does with a refusal is its own decision, kept from before this type: an
outcome file that is no outcome (not JSON, not an object, ``process`` not an object) is not the
trial's result, and the trial is recorded from its job's state once Slurm ends it. The type
refuses more than the old ``isinstance`` checks did (a field of the wrong type, a required field
of the process missing): before, those got as far as ``ProcessOutcome(**...)`` or the facts and
ended the sweep with a traceback; now they are that same "not the trial's result".

Absent and null are one to every reader of the node's facts (``dict.get``), so a section written
by hand without some of them reads with None there, and writes every key back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aorta_tui.core.inputs import (
    INPUT_LIMITS,
    FieldReader,
    Json,
    decode_utf8,
    open_input,
    parse_json_text,
    read_fd_bounded,
)

if TYPE_CHECKING:
    from aorta_tui.classify.dmesg import KernelEvent
    from aorta_tui.trial.supervisor import ProcessOutcome

OUTCOME_SCHEMA_VERSION = 1
WHAT = "Slurm trial outcome"
LIMIT = INPUT_LIMITS[WHAT]
_HINT = f"this {WHAT} is damaged or was not written by aorta-tui"


@dataclass(frozen=True)
class NodeFacts:
    """Where the task ran (``slurm_job.node_facts``): host, job ids, the GPUs Slurm gave it."""

    host: str | None = None
    node: str | None = None  # SLURMD_NODENAME, else the host name
    job_id: str | None = None  # the task's own SLURM_JOB_ID
    array_job_id: str | None = None  # with array_task_id: whose task wrote the file
    array_task_id: str | None = None
    job_gpus: str | None = None
    cuda_visible_devices: str | None = None
    rocr_visible_devices: str | None = None
    partition: str | None = None
    nodelist: str | None = None
    nodes: tuple[str, ...] = ()  # every node of the job (scontrol show hostnames)
    account: str | None = None
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    def to_json(self) -> dict[str, Json]:
        return {"host": self.host, "node": self.node, "job_id": self.job_id,
                "array_job_id": self.array_job_id, "array_task_id": self.array_task_id,
                "job_gpus": self.job_gpus, "cuda_visible_devices": self.cuda_visible_devices,
                "rocr_visible_devices": self.rocr_visible_devices, "partition": self.partition,
                "nodelist": self.nodelist, "nodes": list(self.nodes), "account": self.account,
                **self.extra}

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    def written_by(self, job_id: str | None) -> bool:
        """Whether the task ``job_id`` (``<array job>_<task>``) wrote the file. One without the
        array's ids (not written by an array task) is taken, as it always was."""
        if job_id is None or not self.array_job_id or self.array_task_id is None:
            return True
        return f"{self.array_job_id}_{self.array_task_id}" == job_id


@dataclass(frozen=True)
class NodeKernelLog:
    """Tier 3 on the node: the kernel log's matching lines while the trial ran."""

    events: tuple[KernelEvent, ...] = ()
    unavailable: str | None = None  # why the node's kernel log could not be read

    def to_json(self) -> dict[str, Json]:
        return {"events": [e.to_dict() for e in self.events], "unavailable": self.unavailable}

    __hash__ = None  # type: ignore[assignment]  # its events hold dicts


@dataclass(frozen=True)
class SlurmOutcome:
    """``trials/<cell>/trial-NNN/slurm-outcome.json`` (docs/slurm.md)."""

    process: ProcessOutcome  # read as written: the orchestrator copies it before changing it
    node: NodeFacts | None = None  # None: no section (a file not written by an array task)
    signal: str | None = None  # what Slurm sent (scancel, time limit, preemption)
    wrapper_started_at: float | None = None  # epoch seconds, the task's start and end
    wrapper_ended_at: float | None = None
    gate_waited_s: float | None = None  # the task's wait at the gate, before the trial
    kernel_log: NodeKernelLog | None = None  # None: not written
    schema_version: int = OUTCOME_SCHEMA_VERSION
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    def to_json(self) -> dict[str, Json]:
        """The object the file holds (``RunDirFS.atomic_write_json`` writes it)."""
        out: dict[str, Json] = {"schema_version": self.schema_version,
                                "process": self.process.to_dict(),
                                "node": None if self.node is None else self.node.to_json(),
                                "signal": self.signal,
                                "wrapper_started_at": self.wrapper_started_at,
                                "wrapper_ended_at": self.wrapper_ended_at,
                                "gate_waited_s": self.gate_waited_s}
        if self.kernel_log is not None:
            out["kernel_log"] = self.kernel_log.to_json()
        return {**out, **self.extra}

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def from_dict(cls, data: object, *, where: str = "slurm-outcome.json") -> SlurmOutcome:
        """Read a parsed outcome; a damaged one is a located UsageError (exit 2)."""
        return _read_outcome(FieldReader(where, WHAT), data)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> SlurmOutcome:
        """Read the file: at most :data:`LIMIT` bytes of a regular file that is not a link (the
        job's own file: a link in its place leads out of the run), then every field checked.
        Missing: FileNotFoundError (not written yet, which is no damage)."""
        where = os.fspath(path)
        fh = open_input(path, what=WHAT, hint=_HINT, follow_symlinks=False, missing_ok=True)
        if fh is None:
            raise FileNotFoundError(where)
        with fh:
            raw = read_fd_bounded(fh, where=where, what=WHAT, limit=LIMIT, hint=_HINT)
        text = decode_utf8(raw, where=where, what=WHAT, hint=_HINT)
        return cls.from_dict(parse_json_text(text, where=where, what=WHAT, hint=_HINT), where=where)


# -- the reader ----------------------------------------------------------------------------

_TOP_KEYS = frozenset({"schema_version", "process", "node", "signal", "wrapper_started_at",
                       "wrapper_ended_at", "gate_waited_s", "kernel_log"})
_NODE_TEXT = ("host", "node", "job_id", "array_job_id", "array_task_id", "job_gpus",
              "cuda_visible_devices", "rocr_visible_devices", "partition", "nodelist", "account")


def _read_outcome(f: FieldReader, data: object) -> SlurmOutcome:
    d = f.obj(data, "(top level)")
    # required: the trial's process is the result; without it the file is no outcome (the
    # orchestrator's check before this type, isinstance(data["process"], dict))
    from aorta_tui.trial.process_outcome_doc import read_process_outcome

    # the process's own reader (the trial package's, beside its type), at ``process``
    process = read_process_outcome(f, f.obj_at(d, "process", "", required=True), "process")
    node = None
    if d.get("node") is not None:
        node = _read_node(f, f.obj_at(d, "node", ""), "node")
    return SlurmOutcome(
        process=process, node=node, signal=f.opt_text(d, "signal", ""),
        wrapper_started_at=f.number(d, "wrapper_started_at", ""),
        wrapper_ended_at=f.number(d, "wrapper_ended_at", ""),
        gate_waited_s=f.number(d, "gate_waited_s", ""),
        kernel_log=_read_kernel_log(f, d),
        schema_version=f.integer(d, "schema_version", "", OUTCOME_SCHEMA_VERSION),
        extra={k: v for k, v in d.items() if k not in _TOP_KEYS})


def _read_node(f: FieldReader, d: dict[str, Any], path: str) -> NodeFacts:
    texts = {key: f.opt_text(d, key, path) for key in _NODE_TEXT}
    nodes = () if d.get("nodes") is None else f.strings_at(d, "nodes", path)
    return NodeFacts(**texts, nodes=nodes,
                     extra={k: v for k, v in d.items() if k not in (*_NODE_TEXT, "nodes")})


def _read_kernel_log(f: FieldReader, d: dict[str, Any]) -> NodeKernelLog | None:
    if d.get("kernel_log") is None:  # absent: a file written by hand (the task always writes it)
        return None
    from aorta_tui.classify.dmesg import KernelEvent

    k = f.obj_at(d, "kernel_log", "")
    events = []
    for i, value in enumerate(f.array_at(k, "events", "kernel_log")):
        path = f"kernel_log.events[{i}]"
        e = f.obj(value, path)
        events.append(KernelEvent(
            line=f.text(e, "line", path, required=True),
            tier3_id=f.text(e, "tier3_id", path, required=True),
            time=f.number(e, "time", path), captures=f.obj_at(e, "captures", path),
            seq=f.opt_integer(e, "seq", path)))
    return NodeKernelLog(events=tuple(events), unavailable=f.opt_text(k, "unavailable",
                                                                      "kernel_log"))
