"""A Slurm run's ``slurm/jobs.json`` as a typed value: one serializer, one reader.

The Slurm executor (``executor/slurm.py``) names each batch (one job array) in it before the
batch's sbatch call and writes its job id right after; each trial's record says its batch and
task, later its node and job state (for the TUI's grid), and, after a Ctrl-C, that the
orchestrator cancelled its job. It writes :meth:`SlurmJobs.to_json`, the object the file has
always held, key order included. The resume (``SlurmExecutor.adopt``, ``refuse_unsettled``)
and the TUI's grid (``tui/matrix_state.read_placement_file``) read it through
:meth:`SlurmJobs.from_dict`, not by key.

What a reader does with a damaged file is its own decision, kept from before this type: the run
directory is its owner's to write, so jobs.json may hold anything. One that is no jobs map at
all (not JSON, not an object, ``batches`` or ``trials`` not an object) is a located UsageError
here; the executor then starts from an empty map and the grid shows no placement, as they always
did. A damaged entry (one batch or trial record of the wrong shape) is, with
``leave_out_damaged``, left out and its located message kept in ``left_out``: both readers
skipped such an entry before (``isinstance(rec, dict)`` checks), keeping the others; a wrong
``schema_version``, which neither read, is noted there too and read as this version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import FieldReader, Json

JOBS_SCHEMA_VERSION = 1
JOBS_PATH = "slurm/jobs.json"  # under the run directory
WHAT = "Slurm job map"
_T = TypeVar("_T")


@dataclass(frozen=True)
class BatchRecord:
    """One batch: a job array of up to ARRAY_MAX trials, named ``aorta-<run>-s<session>-b<k>``.

    The executor writes every field; a map written by hand (or by an older version: ``gate``
    came later) may lack some, and a field it lacks is None and stays unwritten."""

    job_id: str | None  # None: sbatch has not answered yet (a resume finds it by its name)
    session: int | None = None
    submitted_at: float | None = None  # epoch seconds
    tasks: int | None = None
    gate: str | None = None  # the tasks' gate marker's name in slurm/ (gate-s<session>-<token>)
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {"job_id": self.job_id}
        for key, value in (("session", self.session), ("submitted_at", self.submitted_at),
                           ("tasks", self.tasks), ("gate", self.gate)):
            if value is not None:
                out[key] = value
        return {**out, **self.extra}

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key


@dataclass(frozen=True)
class JobPlace:
    """Where a trial's job runs and its last state seen (squeue's, or the final one)."""

    state: str | None
    node: str | None


@dataclass(frozen=True)
class TrialRecord:
    """One trial: its array task, and what the executor learned of its job."""

    batch: str  # the job name of its batch (a key of ``SlurmJobs.batches``)
    task: int | None = None  # its array index; None: not written (a map written by hand)
    place: JobPlace | None = None  # None: not placed yet (neither key written)
    cancelled_by_orchestrator: bool = False  # a Ctrl-C cancelled it: a resume runs it again
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {"batch": self.batch}
        if self.task is not None:
            out["task"] = self.task
        if self.place is not None:  # written together, after the task, as the executor does
            out.update(state=self.place.state, node=self.place.node)
        # last, and only ever written true: the executor marks a trial cancelled after every
        # run() of its session returned (end(), or begin() refused), never placing it after
        # that (a resume replaces the record of a cancelled trial rather than placing it)
        if self.cancelled_by_orchestrator:
            out["cancelled_by_orchestrator"] = True
        return {**out, **self.extra}

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key


@dataclass(frozen=True)
class SlurmJobs:
    """``slurm/jobs.json``: a Slurm run's batches and each trial's place in one (docs/slurm.md)."""

    batches: dict[str, BatchRecord] = field(default_factory=dict)
    trials: dict[str, TrialRecord] = field(default_factory=dict)  # by trial id
    schema_version: int = JOBS_SCHEMA_VERSION
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added
    # the located message of each damaged entry the reader left out (never written)
    left_out: tuple[str, ...] = field(default=(), compare=False)

    def job_id(self, trial_id: str) -> str | None:
        return task_job_id(self.batches, self.trials, trial_id)

    def to_json(self) -> dict[str, Json]:
        """The object jobs.json holds (``RunDirFS.atomic_write_json`` writes it)."""
        return {"schema_version": self.schema_version,
                "batches": {k: b.to_json() for k, b in self.batches.items()},
                "trials": {k: t.to_json() for k, t in self.trials.items()}, **self.extra}

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def from_dict(cls, data: object, *, where: str = JOBS_PATH,
                  leave_out_damaged: bool = False) -> SlurmJobs:
        """Read a parsed jobs.json; damage is a located UsageError (exit 2), except a damaged
        entry with ``leave_out_damaged`` (the module's docstring says why)."""
        return _read_jobs(FieldReader(where, WHAT), data, leave_out_damaged)


def task_job_id(batches: dict[str, BatchRecord], trials: dict[str, TrialRecord],
                trial_id: str) -> str | None:
    """``<array job>_<task>`` of a trial whose batch's job id is known, else None."""
    rec = trials.get(trial_id)
    batch = batches.get(rec.batch) if rec is not None else None
    if rec is None or batch is None or not batch.job_id or rec.task is None:
        return None
    return f"{batch.job_id}_{rec.task}"


# -- the reader ----------------------------------------------------------------------------

_TOP_KEYS = frozenset({"schema_version", "batches", "trials"})
_BATCH_KEYS = frozenset({"job_id", "session", "submitted_at", "tasks", "gate"})
_TRIAL_KEYS = frozenset({"batch", "task", "state", "node", "cancelled_by_orchestrator"})


def _read_jobs(f: FieldReader, data: object, leave_out: bool) -> SlurmJobs:
    d = f.obj(data, "(top level)")
    left_out: list[str] = []
    batches = _entries(f, f.obj_at(d, "batches", "", required=True), "batches", _read_batch,
                       leave_out, left_out)
    trials = _entries(f, f.obj_at(d, "trials", "", required=True), "trials", _read_trial,
                      leave_out, left_out)
    try:
        version = f.integer(d, "schema_version", "", JOBS_SCHEMA_VERSION)
    except UsageError as exc:
        if not leave_out:
            raise
        # no reader ever looked at it: a wrong one left the map read, as before the type
        left_out.append(exc.message)
        version = JOBS_SCHEMA_VERSION
    return SlurmJobs(batches=batches, trials=trials, schema_version=version,
                     extra={k: v for k, v in d.items() if k not in _TOP_KEYS},
                     left_out=tuple(left_out))


def _entries(f: FieldReader, raw: dict[str, Any], path: str,
             read_one: Callable[[FieldReader, object, str], _T], leave_out: bool,
             left_out: list[str]) -> dict[str, _T]:
    out: dict[str, _T] = {}
    for key, value in raw.items():
        try:
            if not isinstance(key, str):  # only a dict built in Python has one (JSON: never)
                raise UsageError(f"{f.where}: {path}: a key that is not a string: {key!r:.40}",
                                 hint=f"this {f.what} is damaged or was not written by aorta-tui")
            out[key] = read_one(f, value, f"{path}.{key}")
        except UsageError as exc:
            if not leave_out:
                raise
            left_out.append(exc.message)
    return out


def _read_batch(f: FieldReader, value: object, path: str) -> BatchRecord:
    d = f.obj(value, path)
    submitted = f.number(d, "submitted_at", path)
    return BatchRecord(
        job_id=f.opt_text(d, "job_id", path),
        # absent stays absent; written, each is of its type (never null: the executor
        # writes null only for job_id)
        session=f.integer(d, "session", path) if "session" in d else None,
        submitted_at=_not_null(f, submitted, d, "submitted_at", path),
        tasks=f.integer(d, "tasks", path) if "tasks" in d else None,
        gate=f.text(d, "gate", path) if "gate" in d else None,
        extra={k: v for k, v in d.items() if k not in _BATCH_KEYS})


def _not_null(f: FieldReader, value: float | None, d: dict[str, Any], key: str,
              path: str) -> float | None:
    if value is None and key in d:
        raise UsageError(f"{f.where}: {f.join(path, key)}: expected a finite number, found null",
                         hint=f"this {f.what} is damaged or was not written by aorta-tui")
    return value


def _read_trial(f: FieldReader, value: object, path: str) -> TrialRecord:
    d = f.obj(value, path)
    place = None
    if "state" in d or "node" in d:  # the executor writes both at once
        place = JobPlace(state=f.opt_text(d, "state", path), node=f.opt_text(d, "node", path))
    cancelled = f.boolean(d, "cancelled_by_orchestrator", path)
    return TrialRecord(
        batch=f.text(d, "batch", path, required=True),
        task=f.integer(d, "task", path) if "task" in d else None,
        place=place, cancelled_by_orchestrator=cancelled,
        extra={k: v for k, v in d.items() if k not in _TRIAL_KEYS})
