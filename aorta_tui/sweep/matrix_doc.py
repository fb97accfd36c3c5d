"""``matrix.json`` as a typed value (issue 36 item 3): one serializer, one reader.

The sweep writes a :class:`Matrix` (``sweep/matrix_report.py``) through :meth:`Matrix.to_json`;
every reader (``matrix.md``'s renderer, the agent, ``export``) takes :meth:`Matrix.from_json`'s
value, not keys. A cell's figures are the aggregate's own type (:class:`CellStats`), read back
by its reader; the sections no reader takes apart (devices, snapshots, collectors, a cell's
timeline) stay JSON values, typed as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aorta_tui.core.aggregate import CellStats
from aorta_tui.core.errors import AortaError, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json, load_json_input

MATRIX_SCHEMA_VERSION = 1
MATRIX_FILE = "matrix.json"
WHAT = "matrix.json"



@dataclass(frozen=True)
class MatrixCell:
    """One cell: its aggregate figures, and what it ran (mitigations, environment, env)."""

    stats: CellStats
    mitigations: tuple[str, ...]
    environment: str
    env: dict[str, str]  # masked: never a token (core/secrets.py)
    timeline: Json  # the median of each phase over the cell's trials (trial/timeline.py)

    @property
    def name(self) -> str:
        return self.stats.cell

    def to_json(self) -> dict[str, Json]:
        return {**self.stats.to_dict(), "mitigations": list(self.mitigations),
                "environment": self.environment, "env": dict(self.env),
                "timeline": self.timeline}


@dataclass(frozen=True)
class Devices:
    """On which device the trials ran: as each trial reported it (device -> trials), and the
    GPUs of the run's host snapshot (None: no readable snapshot)."""

    trials: dict[str, int]
    host_gpus: tuple[str, ...] | None

    def to_json(self) -> dict[str, Json]:
        return {"trials": dict(self.trials),
                "host_gpus": None if self.host_gpus is None else list(self.host_gpus)}


@dataclass(frozen=True)
class MatrixTrial:
    """A finished trial as the matrix lists it."""

    trial_id: str
    cell: str
    trial: int
    verdict: str
    detectors: tuple[str, ...]
    wall_s: float | None

    def to_json(self) -> dict[str, Json]:
        return {"trial_id": self.trial_id, "cell": self.cell, "trial": self.trial,
                "verdict": self.verdict, "detectors": list(self.detectors),
                "wall_s": self.wall_s}


@dataclass(frozen=True)
class Matrix:
    """``matrix.json``: a sweep's cells compared, and its trials (docs/run-directory.md)."""

    aorta_tui_version: str
    generated_at: float | None  # None: a matrix written without it (never a 1970 date)
    run_dir: str
    run_id: str
    ticket: str | None
    mode: str  # triage or probe
    workload: str | None  # None in probe mode
    command: tuple[str, ...]
    status: str  # completed, interrupted
    trials_planned: int
    trials_finished: int
    order: str
    seed: int | None
    baseline_cell: str | None
    confound_threshold: float | None
    confound_band: tuple[float, float] | None
    devices: Devices | None  # None: a matrix written without it
    cells: tuple[MatrixCell, ...]
    trials: tuple[MatrixTrial, ...]
    snapshots: Json
    warnings: tuple[str, ...]
    hint: str
    collectors: Json = None  # upstream's collectors' summary, when any ran
    schema_version: int = MATRIX_SCHEMA_VERSION
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    def cell(self, name: str | None) -> MatrixCell | None:
        return next((c for c in self.cells if c.name == name), None)

    def to_json(self) -> dict[str, Json]:
        """The object matrix.json holds, keys in the order the file has always had them."""
        out: dict[str, Json] = {
            "schema_version": self.schema_version, "aorta_tui_version": self.aorta_tui_version,
            "generated_at": self.generated_at, "run_dir": self.run_dir, "run_id": self.run_id,
            "ticket": self.ticket, "mode": self.mode, "workload": self.workload,
            "command": list(self.command), "status": self.status,
            "trials_planned": self.trials_planned, "trials_finished": self.trials_finished,
            "order": self.order, "seed": self.seed, "baseline_cell": self.baseline_cell,
            "confound_threshold": self.confound_threshold,
            "confound_band": list(self.confound_band) if self.confound_band else None,
            "devices": self.devices.to_json() if self.devices else None, "cells": [c.to_json() for c in self.cells],
            "trials": [t.to_json() for t in self.trials], "snapshots": self.snapshots,
            "warnings": list(self.warnings), "hint": self.hint, **self.extra,
        }
        if self.collectors:
            out["collectors"] = self.collectors
        return out

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def from_json(cls, data: object, where: str = WHAT) -> Matrix:
        """The matrix a file holds; a field of the wrong type is a located UsageError (exit 2)
        naming the file and the field path. A key that is absent reads as its empty value (a
        matrix written before a field existed still reads)."""
        return _read_matrix(FieldReader(where, WHAT), data)


def read_matrix(run_dir: str | Path) -> Matrix:
    """``run_dir/matrix.json``, size-limited and typed; a located error when it is not one."""
    path = Path(run_dir) / MATRIX_FILE
    data = load_json_input(path, what=WHAT, limit=INPUT_LIMITS["matrix"])
    return Matrix.from_json(data, str(path))


def read_matrix_or_none(run_dir: str | Path) -> Matrix | None:
    """The run's matrix, or None when it has none yet or it is not one (a reader that can
    do without it, such as ``export``, which then computes the cells from the trials)."""
    try:
        return read_matrix(run_dir)
    except AortaError:
        return None


_KNOWN = frozenset({
    "schema_version", "aorta_tui_version", "generated_at", "run_dir", "run_id", "ticket", "mode",
    "workload", "command", "status", "trials_planned", "trials_finished", "order", "seed",
    "baseline_cell", "confound_threshold", "confound_band", "devices", "cells", "trials",
    "snapshots", "warnings", "hint", "collectors",
})


def _read_matrix(f: FieldReader, data: object) -> Matrix:
    d = f.obj(data, "")
    band = f.array_at(d, "confound_band", "") if d.get("confound_band") is not None else None
    if band is not None and len(band) != 2:
        raise UsageError(f"{f.where}: confound_band: expected two numbers (lower, upper), found "
                         f"{len(band)}", hint=f"this {WHAT} is damaged or was not written by aorta-tui")
    return Matrix(
        schema_version=f.integer(d, "schema_version", "", MATRIX_SCHEMA_VERSION),
        aorta_tui_version=f.text(d, "aorta_tui_version", ""),
        generated_at=f.number(d, "generated_at", ""),
        run_dir=f.text(d, "run_dir", ""), run_id=f.text(d, "run_id", ""),
        ticket=f.opt_text(d, "ticket", ""), mode=f.text(d, "mode", ""),
        workload=f.opt_text(d, "workload", ""),
        command=f.strings(d.get("command") or [], "command"),
        status=f.text(d, "status", ""),
        trials_planned=f.integer(d, "trials_planned", ""),
        trials_finished=f.integer(d, "trials_finished", ""),
        order=f.text(d, "order", ""), seed=f.opt_integer(d, "seed", ""),
        baseline_cell=f.opt_text(d, "baseline_cell", ""),
        confound_threshold=f.number(d, "confound_threshold", ""),
        confound_band=None if band is None else (
            _number(f, band[0], "confound_band[0]"), _number(f, band[1], "confound_band[1]")),
        devices=_read_devices(f, d.get("devices")),
        cells=tuple(_read_cell(f, c, f"cells[{i}]")
                    for i, c in enumerate(f.array_at(d, "cells", ""))),
        trials=tuple(_read_trial(f, t, f"trials[{i}]")
                     for i, t in enumerate(f.array_at(d, "trials", ""))),
        snapshots=d.get("snapshots", {}),
        warnings=f.strings(d.get("warnings") or [], "warnings"),
        hint=f.text(d, "hint", ""),
        collectors=d.get("collectors"),
        extra={k: v for k, v in d.items() if k not in _KNOWN},
    )


def _number(f: FieldReader, value: object, path: str) -> float:
    return float(f.check(value, "number", path))  # a band's end is never null


def _read_cell(f: FieldReader, value: object, path: str) -> MatrixCell:
    d = f.obj(value, path)
    env = f.obj_at(d, "env", path)
    return MatrixCell(
        stats=CellStats.from_dict(d, where=f"{f.where}: {path}"),
        mitigations=f.strings(d.get("mitigations") or [], f.join(path, "mitigations")),
        environment=f.text(d, "environment", path),
        env={str(k): str(f.check(v, "string", f.join(path, f"env.{k}"))) for k, v in env.items()},
        timeline=d.get("timeline", {}),
    )


def _read_devices(f: FieldReader, value: object) -> Devices | None:
    if value is None:
        return None
    d = f.obj(value, "devices")
    trials = f.obj_at(d, "trials", "devices")
    gpus = d.get("host_gpus")
    return Devices({str(k): int(f.check(n, "integer", f"devices.trials.{k}"))
                    for k, n in trials.items()},
                   None if gpus is None else f.strings(gpus, "devices.host_gpus"))


def _read_trial(f: FieldReader, value: object, path: str) -> MatrixTrial:
    d = f.obj(value, path)
    return MatrixTrial(
        trial_id=f.text(d, "trial_id", path, required=True),
        cell=f.text(d, "cell", path), trial=f.integer(d, "trial", path),
        verdict=f.text(d, "verdict", path),
        detectors=f.strings(d.get("detectors") or [], f.join(path, "detectors")),
        wall_s=f.number(d, "wall_s", path),
    )

