"""A queue sweep point that failed, as the typed record its ``trials/s<NNNN>/result.json`` holds.

An isolated sweep (``hwqueue/sweep.py``) writes each point's result file: the point's queue
result when it ran, else this record: the stream count, why it failed (the error as the user
saw it) and the exit status it failed with. One serializer (:meth:`FailedPointRecord.to_json`,
the object the untyped writer wrote, key order included) and one reader
(:meth:`FailedPointRecord.from_json`): every field's type checked, damage a located UsageError
naming the file and the field. The resume takes a damaged record for no result (the point runs
again), as it did before the type; the sweep document's ``failed_points`` is built from the read
value, never from the dict by key.

A module of its own, below ``result_doc`` (whose :class:`FailedPoint` it makes): result_doc
imports nothing of the sweep's, and the architecture forbids import circles, lazy ones too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from aorta_tui.core.errors import AortaError, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.hwqueue.result_doc import SCHEMA_VERSION, FailedPoint

FAILED_POINT_KIND = "aorta-tui/queue-sweep-failed-point"
WHAT = "queue sweep failed point"
_KEYS = ("schema_version", "kind", "streams", "reason", "exit_code")


@dataclass(frozen=True)
class FailedPointRecord:
    """``trials/s<NNNN>/result.json`` of a point whose run failed (docs/hwqueue.md)."""

    streams: int
    reason: str  # the error rendered, its fix line included
    exit_code: int | None  # None: a record written by hand without one (read as INTERNAL)
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    @classmethod
    def of(cls, streams: int, error: AortaError) -> FailedPointRecord:
        """The record of the point at ``streams`` that ``error`` ended."""
        return cls(streams=streams, reason=error.render(), exit_code=int(error.exit_code))

    def to_json(self) -> dict[str, Json]:
        """The object the file holds (the run store writes it)."""
        return {"schema_version": self.schema_version, "kind": FAILED_POINT_KIND,
                "streams": self.streams, "reason": self.reason, "exit_code": self.exit_code,
                **self.extra}

    def failed_point(self) -> FailedPoint:
        """The sweep document's entry for this point (``failed_points``)."""
        return FailedPoint(self.streams, self.reason)

    @staticmethod
    def is_one(data: dict[str, Json]) -> bool:
        """Whether a point's parsed result file says it is a failed point's record (and not a
        queue result): its ``kind``, the one key the two kinds tell apart by."""
        return data.get("kind") == FAILED_POINT_KIND

    @classmethod
    def from_json(cls, data: object, where: str) -> FailedPointRecord:
        """Read a parsed record; a damaged one is a located UsageError (exit 2)."""
        f = FieldReader(where, WHAT)
        d = f.obj(data, "(top level)")
        kind = f.text(d, "kind", "", required=True)
        if kind != FAILED_POINT_KIND:
            raise UsageError(f"{where}: kind: expected {FAILED_POINT_KIND!r}, found {kind!r}",
                             hint=f"this {WHAT} is damaged or was not written by aorta-tui")
        return cls(streams=f.integer(d, "streams", "", required=True),
                   reason=f.text(d, "reason", "", required=True),
                   exit_code=f.opt_integer(d, "exit_code", ""),
                   schema_version=f.integer(d, "schema_version", "", required=True),
                   extra={k: v for k, v in d.items() if k not in _KEYS})

    @classmethod
    def read(cls, fs: RunDirFS, path: str | os.PathLike[str]) -> FailedPointRecord:
        """A record file of the run read through its file layer: at most ``INPUT_LIMITS[WHAT]`` bytes (looked up
        at each read)
        of a regular file, no link followed, then every field checked. Missing:
        FileNotFoundError."""
        data = fs.load_json(path, what=WHAT, limit=INPUT_LIMITS[WHAT])
        return cls.from_json(data, fs.display(fs.rel(path)))
