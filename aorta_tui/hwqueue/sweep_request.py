"""A queue sweep's ``request.json`` as a typed value: :class:`QueueSweepRequest`.

An isolated sweep kept in a run directory (``queue sweep --run-dir``) writes what it was asked
there first: the run's id, the ``QueueRunConfig`` every point starts from, the stream counts,
the knee gain and the ``-o`` file. ``queue resume`` reads it back to run the points the
directory lacks. One serializer (:meth:`QueueSweepRequest.to_json`: the object the untyped
writer wrote, key order included) and one reader (:func:`read_request`: bounded by
``INPUT_LIMITS``, through the run's file layer, every field it decides on checked; a damaged
one is a located RunDirError naming the file and the field, exit 2).

The config is held as written (JSON): its fields are read, each checked, by the queue run
config's one reader (``hwqueue/point_config.py``, which a queue child's config file shares)
where the resume builds it. ``created`` is copied through: nothing decides on it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import RunDirError
from aorta_tui.core.inputs import INPUT_LIMITS, Json, is_json_number, require_object
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.hwqueue.result_doc import SCHEMA_VERSION

if TYPE_CHECKING:
    from aorta_tui.hwqueue.harness import QueueRunConfig

REQUEST_FILE = "request.json"
RUN_KIND = "aorta-tui/queue-sweep-run"
WHAT = "queue sweep request"
HINT = "pass the run directory a `queue sweep` made (it holds request.json and journal.jsonl)"
# the keys in the order the sweep writes them
_ORDER = ("schema_version", "kind", "run_id", "created", "config", "stream_counts", "knee_gain",
          "output")


@dataclass(frozen=True)
class QueueSweepRequest:
    """What a queue sweep in a run directory was asked (``request.json``)."""

    run_id: str  # the sweep's; its points are <run_id>-s<N>
    created: Json  # local time with its offset, as written
    config: dict[str, Json]  # the QueueRunConfig every point starts from (dataclasses.asdict)
    stream_counts: tuple[int, ...]  # positive, in the order the points run
    knee_gain: float  # finite
    output: str | None  # the -o file (absolute), written again when the sweep ends
    extra: dict[str, Json] = field(default_factory=dict)  # keys this build does not write
    schema_version: int = SCHEMA_VERSION

    __hash__ = None  # type: ignore[assignment]  # mutable dict fields: never a dict key

    @classmethod
    def new(cls, base: QueueRunConfig, counts: Sequence[int], knee_gain: float,
            output: str | os.PathLike[str] | None) -> QueueSweepRequest:
        """The request of a sweep starting now (``base.run_id`` is the sweep's id)."""
        return cls(run_id=base.run_id, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   config=dataclasses.asdict(base), stream_counts=tuple(counts),
                   knee_gain=knee_gain,
                   output=None if output is None else os.path.abspath(output))

    def to_json(self) -> dict[str, Json]:
        """The object ``request.json`` holds (``RunDirFS.atomic_write_json`` writes it)."""
        return {"schema_version": self.schema_version, "kind": RUN_KIND, "run_id": self.run_id,
                "created": self.created, "config": dict(self.config),
                "stream_counts": list(self.stream_counts), "knee_gain": self.knee_gain,
                "output": self.output, **self.extra}

    @classmethod
    def from_json(cls, raw: object, where: str) -> QueueSweepRequest:
        """Read a parsed ``request.json``; a damaged one is a located RunDirError (exit 2)."""
        data = require_object(raw, where=where, what=WHAT)
        _check(data, where)
        return cls(run_id=data["run_id"], created=data.get("created"), config=data["config"],
                   stream_counts=tuple(data["stream_counts"]), knee_gain=data["knee_gain"],
                   output=data.get("output"),
                   extra={k: v for k, v in data.items() if k not in _ORDER},
                   schema_version=data["schema_version"])


def _check(data: dict[str, Any], where: str) -> None:
    """Every field the resume decides on, in the order the message names the first bad one."""
    counts, gain = data.get("stream_counts"), data.get("knee_gain")
    problems = [
        ("kind", data.get("kind") == RUN_KIND),
        ("schema_version", data.get("schema_version") == SCHEMA_VERSION
         and not isinstance(data.get("schema_version"), bool)),
        ("run_id", isinstance(data.get("run_id"), str) and bool(data.get("run_id"))),
        ("config", isinstance(data.get("config"), dict)),
        ("stream_counts", isinstance(counts, list) and bool(counts) and all(
            isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts)),
        # finite: Python's json reads NaN and Infinity, and a NaN gain finds no knee, silently
        ("knee_gain", is_json_number(gain)),
        ("output", data.get("output") is None or isinstance(data.get("output"), str)),
    ]
    for name, ok in problems:
        if not ok:
            raise RunDirError(f"{where}: {name}: missing or not what `queue sweep` writes",
                              hint=HINT)


def read_request(run_dir: Path) -> QueueSweepRequest:
    """``request.json`` of a queue sweep's run directory, checked, or a located error."""
    try:  # through the run's file layer: bounded, a regular file, no link followed
        with RunDirFS(run_dir) as fs:
            raw = fs.load_json(REQUEST_FILE, what=REQUEST_FILE,
                               limit=INPUT_LIMITS["queue sweep request"])
    except (FileNotFoundError, NotADirectoryError):
        raise RunDirError(f"{run_dir} is not a queue sweep's run directory (no {REQUEST_FILE})",
                          hint=HINT) from None
    return QueueSweepRequest.from_json(raw, str(run_dir / REQUEST_FILE))
