"""A run's ``plan.json`` as a typed value: one serializer, one reader.

The recipe sweep writes its plan (``sweep/plan.py``: ``Plan.to_dict``, through
:meth:`PlanDoc.to_dict`) once, into the run directory before it gets its name; the readers
(the resume's counted trials in ``sweep/orchestrator.py``, the Slurm node summary in
``executor/placement.py``, the TUI's matrix, the analysis frames) take :class:`PlanDoc`'s
values, not keys. The type lives here, under all of them: the executor is a layer below the
sweep that writes it.

:meth:`PlanDoc.from_dict` checks every field and names the file and the field path
(UsageError, exit 2); :func:`read_plan` is the size-limited read of a run's file through the
run's file layer, :func:`read_plan_or_none` the same for readers to whom a damaged plan is no
plan (they then trust the journal's trial ids, or show nothing).

Every reader needs the trials, so ``trials`` is required and each needs its ``trial_id``; the
rest reads as its empty value when absent (a plan made by hand, such as a test's, holds only
the trial ids), as ``matrix.json``'s reader does. plan.json is never rewritten from what was
read, so a key this version does not know is ignored, as every reader always ignored it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aorta_tui.core.errors import AortaError, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json
from aorta_tui.core.rundir_fs import RunDirFS

PLAN_FILE = "plan.json"
WHAT = "plan.json"


@dataclass(frozen=True)
class PlannedCell:
    """A cell as plan.json records it: what it runs, its environment's variables masked."""

    name: str
    mitigations: tuple[str, ...]
    environment: str
    docker: str | None  # the environment's image; None: runs on the host
    env: dict[str, str]  # what the cell adds to the inherited environment; never a token
    switches: tuple[str, ...]
    trials: int
    steps: int | None

    def to_dict(self) -> dict[str, Json]:
        return {"name": self.name, "mitigations": list(self.mitigations),
                "environment": self.environment, "docker": self.docker, "env": dict(self.env),
                "switches": list(self.switches), "trials": self.trials, "steps": self.steps}

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key


@dataclass(frozen=True)
class PlannedTrial:
    """A trial in run order. None: a plan that did not record it (aorta-tui's always does)."""

    trial_id: str  # "<cell>/trial-<NNN>", also its directory under trials/
    cell: str | None
    trial: int | None  # index within the cell, from 0
    order: int | None  # position in the run

    def to_dict(self) -> dict[str, Json]:
        return {"trial_id": self.trial_id, "cell": self.cell, "trial": self.trial,
                "order": self.order}


@dataclass(frozen=True)
class PlanDoc:
    """``plan.json``: the cells and the trials in run order (docs/run-directory.md)."""

    order: str  # interleaved, sequential, random
    seed: int | None
    baseline_cell: str | None
    cells: tuple[PlannedCell, ...]
    trials: tuple[PlannedTrial, ...]

    @property
    def trial_ids(self) -> set[str]:
        """The trials that count (with the journal's lines and whole results)."""
        return {t.trial_id for t in self.trials}

    def to_dict(self) -> dict[str, Json]:
        """The object plan.json holds, keys in the order the file has always had them."""
        return {"order": self.order, "seed": self.seed, "baseline_cell": self.baseline_cell,
                "cells": [c.to_dict() for c in self.cells],
                "trials": [t.to_dict() for t in self.trials]}

    __hash__ = None  # type: ignore[assignment]  # its cells hold dicts: never a dict key

    @classmethod
    def from_dict(cls, data: object, *, where: str = PLAN_FILE) -> PlanDoc:
        """Read a parsed plan.json; a damaged one is a located UsageError (exit 2)."""
        return _read_plan(FieldReader(where, WHAT), data)


def read_plan(run_dir: Path) -> PlanDoc:
    """``run_dir/plan.json``, size-limited, no link followed beneath the run's root, typed;
    missing or damaged: a located UsageError (exit 2)."""
    path = Path(run_dir) / PLAN_FILE
    try:
        with RunDirFS(run_dir) as fs:
            data = fs.load_json(PLAN_FILE, what=WHAT, limit=INPUT_LIMITS["plan"])
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file",
                         hint="plan.json is written when a recipe sweep's run is made") from None
    return PlanDoc.from_dict(data, where=str(path))


def read_plan_or_none(run_dir: Path) -> PlanDoc | None:
    """The run's plan, or None when it has none or it is not one (missing, refused, over the
    limit, not JSON, a field of the wrong type): for readers to whom a damaged plan is none."""
    try:
        return read_plan(run_dir)
    except (AortaError, OSError):
        return None


def plan_or_none(data: object, *, where: str = PLAN_FILE) -> PlanDoc | None:
    """A plan already decoded (``read_json_or_none``'s answer, None included) through the one
    reader, or None when it is not one."""
    if data is None:
        return None
    try:
        return PlanDoc.from_dict(data, where=where)
    except UsageError:
        return None


# -- the reader ----------------------------------------------------------------------------


def _read_plan(f: FieldReader, data: object) -> PlanDoc:
    d = f.obj(data, "(top level)")
    if "trials" not in d:  # what every reader reads: without it the plan says nothing
        raise UsageError(f"{f.where}: trials: missing",
                         hint=f"this {f.what} is damaged or was not written by aorta-tui")
    return PlanDoc(
        order=f.text(d, "order", ""), seed=f.opt_integer(d, "seed", ""),
        baseline_cell=f.opt_text(d, "baseline_cell", ""),
        cells=tuple(_read_cell(f, c, f"cells[{i}]")
                    for i, c in enumerate(f.array_at(d, "cells", ""))),
        trials=tuple(_read_trial(f, t, f"trials[{i}]")
                     for i, t in enumerate(f.array_at(d, "trials", ""))))


def _read_cell(f: FieldReader, value: object, path: str) -> PlannedCell:
    d = f.obj(value, path)
    return PlannedCell(
        name=f.text(d, "name", path, required=True),
        mitigations=f.strings_at(d, "mitigations", path),
        environment=f.text(d, "environment", path), docker=f.opt_text(d, "docker", path),
        env=_strings_map(f, d, "env", path), switches=f.strings_at(d, "switches", path),
        trials=f.integer(d, "trials", path), steps=f.opt_integer(d, "steps", path))


def _read_trial(f: FieldReader, value: object, path: str) -> PlannedTrial:
    d = f.obj(value, path)
    return PlannedTrial(
        trial_id=f.text(d, "trial_id", path, required=True), cell=f.opt_text(d, "cell", path),
        trial=f.opt_integer(d, "trial", path), order=f.opt_integer(d, "order", path))


def _strings_map(f: FieldReader, d: dict[str, Any], key: str, path: str) -> dict[str, str]:
    at = f.join(path, key)
    return {str(k): str(f.check(v, "string", f"{at}.{k}")) for k, v in f.obj_at(d, key, path).items()}
