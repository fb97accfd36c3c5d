"""The trial contract: what the orchestrator tells a trial worker, and what a trial left.

Two files cross a process boundary for every trial, so each has one typed shape here (as
``hwqueue/child.py`` does with ``QueueRunConfig``):

* ``trial_spec.json`` -> :class:`WorkerSpec`: written by the sweep (``sweep/orchestrator.py``) before
  the trial starts, read by ``trial/worker.py`` (and the in-process and warm paths).
  Named ``WorkerSpec``, not ``TrialSpec``: ``sweep/plan.py``'s ``TrialSpec`` is the planned
  trial (id, cell, number, order) the sweep passes around beside it.
* ``result.json`` -> :class:`TrialResult`: written by the sweep once the trial is classified,
  read by the aggregate, the report, resume and the front ends. Its JSON is the one
  ``docs/run-directory.md`` describes; keys beyond the typed fields (``collectors``,
  ``collected``, ``retention`` ...) travel unchanged in ``extra``, so a file read and written
  again is the same file. Its ``process`` section is typed too
  (:class:`~aorta_tui.core.process_record.ProcessRecord`, read in the same mode).

``from_dict`` is strict by default: a field of the wrong type is a :class:`UsageError` naming the
file and the field (exit 2, never a traceback). ``strict=False`` is the run directory's reading
(``sweep/orchestrator.load_trial_records``): a wrong-typed measurement reads as absent, as it always has,
so an odd old file still counts its verdict.

The workload's own result file (``workload_result.json``, one per rank) is named here too:
the worker writes it and the parent reads it by :func:`workload_result_filename`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import MiB, load_json_input, require_object, require_type

if TYPE_CHECKING:
    from aorta_tui.core.process_record import ProcessRecord
    from aorta_tui.core.rundir_fs import RunDirFS

TRIAL_SPEC_FILE = "trial_spec.json"
RESULT_FILE = "result.json"
WORKLOAD_RESULT_FILE = "workload_result.json"
RESULT_SCHEMA_VERSION = 1
# Far above what aorta-tui writes (a spec is < 4 KiB, a result with a long timeline < 1 MiB).
SPEC_LIMIT = 16 * MiB
RESULT_LIMIT = 256 * MiB


def workload_result_filename(rank: int) -> str:
    """Rank 0 writes ``workload_result.json``, rank N ``workload_result.rank<N>.json``."""
    return WORKLOAD_RESULT_FILE if rank == 0 else f"workload_result.rank{rank}.json"


def workload_rank_files(trial_dir: Path) -> list[Path]:
    """The result files of the ranks other than 0, in rank-name order."""
    return sorted(trial_dir.glob("workload_result.rank*.json"))


def _check(data: dict[str, Any], name: str, expected: str, *, where: str, what: str,
           default: object, nullable: bool = False, strict: bool = True) -> Any:
    """``data[name]`` if present and of the JSON type ``expected``; ``default`` when absent (or
    of the wrong type when not ``strict``); else a located UsageError."""
    if name not in data:
        return default
    value = data[name]
    if strict:
        return require_type(value, expected, where=where, field=name, what=what, nullable=nullable)
    try:
        return require_type(value, expected, where=where, field=name, what=what, nullable=nullable)
    except UsageError:
        return default


def _string_list(value: list[Any], *, where: str, name: str, what: str) -> list[str]:
    for i, item in enumerate(value):
        require_type(item, "string", where=where, field=f"{name}[{i}]", what=what)
    return list(value)


# -- trial_spec.json ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerSpec:
    """What the trial worker runs: ``trial_spec.json``, key for key."""

    workload: str
    trial_dir: str
    steps: int = 1
    config: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    # What the orchestrator resolved (``module:qualname``): the worker imports it without
    # scanning every installed distribution's entry points again (trial_worker.load_class).
    workload_ref: str | None = None
    switches: tuple[str, ...] = ()
    # The worker's own collectors (layer_numerics, torch_profiler): name -> options.
    collect: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "workload": self.workload, "workload_ref": self.workload_ref, "steps": self.steps,
            "config": dict(self.config), "seed": self.seed, "trial_dir": self.trial_dir,
            "switches": list(self.switches),
        }
        if self.collect:  # absent when empty: the file is what it was before collectors
            out["collect"] = {k: dict(v) for k, v in self.collect.items()}
        return out

    @classmethod
    def from_dict(cls, data: object, *, where: str = TRIAL_SPEC_FILE) -> WorkerSpec:
        what = "trial spec"
        d = require_object(data, where=where, what=what)
        unknown = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise UsageError(f"{where}: {unknown[0]}: not a field of a trial spec",
                             hint="trial_spec.json is written by aorta-tui for its trial worker")
        for name in ("workload", "trial_dir"):
            if name not in d:
                raise UsageError(f"{where}: {name}: missing", hint=f"a trial spec names its {name}")

        def get(name: str, expected: str, default: object, nullable: bool = False) -> Any:
            return _check(d, name, expected, where=where, what=what, default=default, nullable=nullable)

        collect = get("collect", "object", None, nullable=True) or {}
        for name, options in collect.items():
            require_type(options, "object", where=where, field=f"collect.{name}", what=what)
        return cls(
            workload=get("workload", "string", ""),
            trial_dir=get("trial_dir", "string", ""),
            steps=get("steps", "integer", None, nullable=True) or 1,
            config=get("config", "object", None, nullable=True) or {},
            seed=get("seed", "integer", 0),
            workload_ref=get("workload_ref", "string", None, nullable=True),
            switches=tuple(_string_list(get("switches", "array", []), where=where, name="switches",
                                        what=what)),
            collect=collect,
        )

    def write(self, fs: RunDirFS, path: Path) -> Path:
        """The spec file, through the run directory's file layer (no link followed)."""
        return fs.atomic_write_json(path, self.to_dict())

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> WorkerSpec:
        """Read a spec file: a damaged one is a located UsageError (file, field, fix)."""
        data = load_json_input(path, what="trial spec", limit=SPEC_LIMIT,
                               hint="trial_spec.json is written by aorta-tui; run the trial again")
        return cls.from_dict(data, where=os.fspath(path))


def _empty_process() -> ProcessRecord:
    """A result without a process section. Imported here, not at the top: the trial worker
    imports this module for its spec and never holds a result (the record and the hang report
    it types, ~9 ms of dataclasses, stay off every exec'd trial's start-up)."""
    from aorta_tui.core.process_record import ProcessRecord

    return ProcessRecord.empty()


# -- result.json -------------------------------------------------------------------------------

# (name, JSON type, nullable, default factory): the typed keys of result.json, in file order.
_RESULT_FIELDS: tuple[tuple[str, str, bool, Any], ...] = (
    ("order", "integer", True, lambda: None),
    ("session", "integer", True, lambda: None),
    ("reason", "string", False, str),
    ("detections", "array", False, list),
    ("process", "object", False, _empty_process),  # read by read_process_record (below)
    ("argv", "array", False, list),
    ("env_overlay", "object", False, dict),
    ("mitigations", "array", False, list),
    ("environment", "string", False, str),
    ("step_times_s", "array", True, lambda: None),
    ("step_time_source", "string", False, lambda: "none"),
    ("workload_result", "object", True, lambda: None),
    ("trace", "object", True, lambda: None),
    ("timeline", "object", True, lambda: None),
    ("tool_env", "object", False, dict),  # newest last: older files keep their key order
)
_IDENTITY = ("schema_version", "trial_id", "cell", "trial", "verdict")


@dataclass(frozen=True)
class TrialResult:
    """One finished trial: ``trials/<cell>/trial-<NNN>/result.json``.

    Also what the aggregate and the report take of a trial (``aggregate.TrialRecord`` is this
    class): ``detectors`` and ``wall_s`` are read from ``detections`` and ``process``.
    """

    trial_id: str
    cell: str
    trial: int
    verdict: str  # pass, fail or error
    schema_version: int = RESULT_SCHEMA_VERSION
    order: int | None = None
    session: int | None = None
    reason: str = ""
    detections: list[dict[str, Any]] = field(default_factory=list)
    # how its process ended (the supervisor's ProcessOutcome.to_record()) and where it ran
    process: ProcessRecord = field(default_factory=_empty_process)
    argv: list[str] = field(default_factory=list)
    env_overlay: dict[str, str] = field(default_factory=dict)  # masked: never a token
    # What the tool itself set in the trial's environment beyond the recipe's variables: a
    # value, or None where it removed one (the bytecode cache, AORTA_*, PYTHONUNBUFFERED, ...).
    tool_env: dict[str, str | None] = field(default_factory=dict)
    mitigations: list[str] = field(default_factory=list)
    environment: str = ""
    step_times_s: list[float] | None = None
    step_time_source: str = "none"  # workload, step_time_regex, trial_wall or none
    workload_result: dict[str, Any] | None = None
    trace: dict[str, Any] | None = None
    timeline: dict[str, Any] | None = None
    # Keys this class does not type (collectors, collected, retention, ...), in file order.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def detectors(self) -> list[str]:
        """The ids of the detections that made the trial fail or error."""
        return [str(d.get("id")) for d in self.detections if d.get("severity") in ("fail", "error")]

    @property
    def wall_s(self) -> float | None:
        """The trial's wall time; ``None`` when the result did not record it."""
        wall = self.process.wall_s  # a number as read (the reader checked it), or None
        return None if wall is None else float(wall)

    @property
    def mean_step_s(self) -> float | None:
        steps = self.step_times_s
        return sum(steps) / len(steps) if steps else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": self.schema_version, "trial_id": self.trial_id,
                               "cell": self.cell, "trial": self.trial}
        for name, *_ in _RESULT_FIELDS[:2]:
            out[name] = getattr(self, name)
        out["verdict"] = self.verdict
        for name, *_ in _RESULT_FIELDS[2:]:
            out[name] = getattr(self, name)
        out["process"] = self.process.to_dict()  # its JSON form, in its place
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: object, *, where: str = RESULT_FILE, strict: bool = True) -> TrialResult:
        what = "trial result"
        d = require_object(data, where=where, what=what)
        ident: dict[str, Any] = {}
        for name, expected in zip(_IDENTITY, ("integer", "string", "string", "integer", "string"),
                                  strict=True):
            if name not in d and name != "schema_version":
                raise UsageError(f"{where}: {name}: missing",
                                 hint="a result.json names its trial, cell and verdict")
            ident[name] = require_type(d.get(name, RESULT_SCHEMA_VERSION), expected, where=where,
                                       field=name, what=what)
        typed: dict[str, Any] = {}
        for name, expected, nullable, default in _RESULT_FIELDS:
            typed[name] = _check(d, name, expected, where=where, what=what, default=default(),
                                 nullable=nullable, strict=strict)
        if "process" in d and isinstance(typed["process"], dict):
            # Strict: a field of the wrong type is refused, located (a damaged file, which the
            # contract took unchecked before). Lenient: it reads as not recorded, its value kept.
            from aorta_tui.core.process_record import read_process_record

            typed["process"] = read_process_record(d["process"], where=where, strict=strict)
        typed.update(_checked_items(typed, where=where, strict=strict))
        extra = {k: v for k, v in d.items() if k not in typed and k not in ident}
        return cls(**ident, **typed, extra=extra)

    @classmethod
    def from_record(cls, record: dict[str, Any], *, where: str = RESULT_FILE) -> TrialResult:
        """The sweep's freshly built record, as its file will read back: through JSON with the
        file writer's own conversions (paths, sets, ``to_dict`` objects), and read the way the
        run directory reads it (``strict=False``: a trial's odd output never stops the sweep)."""
        from aorta_tui.core.atomic import _json_default  # what atomic_write_json turns them into

        return cls.from_dict(json.loads(json.dumps(record, default=_json_default)), where=where,
                             strict=False)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str], *, strict: bool = True) -> TrialResult:
        """Read a result file: a damaged one is a located UsageError (file, field, fix)."""
        data = load_json_input(path, what="trial result", limit=RESULT_LIMIT,
                               hint="result.json is written by aorta-tui; a resume runs the trial again")
        return cls.from_dict(data, where=os.fspath(path), strict=strict)


def _checked_items(typed: dict[str, Any], *, where: str, strict: bool) -> dict[str, Any]:
    """The list fields item by item: detections are objects, step times numbers, argv strings.
    Not ``strict``: a detection that is not an object is dropped and step times with a
    non-number read as absent (as the run directory always read them)."""
    out: dict[str, Any] = {}
    dets = typed["detections"]
    if strict:
        for i, x in enumerate(dets):
            require_type(x, "object", where=where, field=f"detections[{i}]", what="trial result")
    out["detections"] = [x for x in dets if isinstance(x, dict)]
    steps = typed["step_times_s"]
    if steps is not None:
        bad = [i for i, x in enumerate(steps)
               if isinstance(x, bool) or not isinstance(x, (int, float))]
        if bad and strict:
            require_type(steps[bad[0]], "number", where=where, field=f"step_times_s[{bad[0]}]",
                         what="trial result")
        out["step_times_s"] = None if bad else list(steps)
    if strict:
        _string_list(typed["argv"], where=where, name="argv", what="trial result")
    return out
