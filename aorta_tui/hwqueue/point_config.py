"""The config file a fresh-process queue run reads, as a typed value: :class:`PointConfig`.

``queue run --repeat`` and an isolated ``queue sweep`` run each repetition or point as
``python -m aorta_tui.hwqueue.child CONFIG.json RESULT.json`` (``hwqueue/child.py``). The
parent writes the run's :class:`~aorta_tui.hwqueue.harness.QueueRunConfig` there
(``hwqueue/repeat.py``: a temporary ``config.json``, or a run directory's
``trials/s<NNNN>/point-config.json``); a queue sweep's ``request.json`` holds one as its
``config``, read by the same reader. One serializer (:meth:`PointConfig.to_json`: the object
``dataclasses.asdict(cfg)`` made, key order included) and one reader
(:meth:`PointConfig.read`: at most ``INPUT_LIMITS[WHAT]`` bytes, every field's type checked,
damage a located UsageError naming the file and the field, exit 2).

Unlike the other documents, a key this build does not know is refused, not kept: the file is
an order to run, written by the parent of this same version, and a run option the child
silently dropped would measure something other than what was asked.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass, field

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json, clip_for_message, load_json_input
from aorta_tui.hwqueue.harness import QueueRunConfig

WHAT = "queue run config"
_HINT = "the file is written by the parent queue run of this aorta-tui version"


@dataclass(frozen=True)
class PointConfig:
    """One fresh-process queue run's options: the fields of :class:`QueueRunConfig`, in its
    order (``tests/hwqueue/test_hwqueue_point_config.py`` keeps the two in step)."""

    workload: str
    streams: int
    iterations: int = 50
    warmup: int = 5
    device: str = "cuda"
    devices: tuple[str, ...] | None = None
    sync_mode: str = "per_iteration"
    dtype: str = "float32"
    size: str = "default"
    params: dict[str, Json] = field(default_factory=dict)  # the workload checks them itself
    run_id: str = ""
    ebpf_trace: bool = False
    keep_timeline: bool = False
    timing: str = "auto"
    detail_iterations: int = 20
    profiler_trace: str | None = None
    stream_priority: str = "default"
    graph: bool = False

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    @classmethod
    def of(cls, cfg: QueueRunConfig) -> PointConfig:
        """The document of ``cfg`` (a copy: the parent's config is not shared with it)."""
        values = {f.name: copy.deepcopy(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
        devices = values["devices"]
        values["devices"] = tuple(devices) if devices is not None else None
        return cls(**values)

    def config(self) -> QueueRunConfig:
        """The run's config as the harness takes it (mutable: the run fills its id in)."""
        values = {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)}
        values["devices"] = list(self.devices) if self.devices is not None else None
        return QueueRunConfig(**values)

    def to_json(self) -> dict[str, Json]:
        """The object the file holds (``repeat.py`` writes it)."""
        return {"workload": self.workload, "streams": self.streams,
                "iterations": self.iterations, "warmup": self.warmup, "device": self.device,
                "devices": list(self.devices) if self.devices is not None else None,
                "sync_mode": self.sync_mode, "dtype": self.dtype, "size": self.size,
                "params": copy.deepcopy(self.params), "run_id": self.run_id,
                "ebpf_trace": self.ebpf_trace, "keep_timeline": self.keep_timeline,
                "timing": self.timing, "detail_iterations": self.detail_iterations,
                "profiler_trace": self.profiler_trace, "stream_priority": self.stream_priority,
                "graph": self.graph}

    @classmethod
    def from_json(cls, data: object, where: str, *, at: str = "", what: str = WHAT,
                  hint: str = _HINT) -> PointConfig:
        """Read a parsed config; a damaged one is a located UsageError (exit 2). A missing
        optional field reads as the dataclass's default, as ``QueueRunConfig(**data)`` did.
        ``at``: the config's own path where it sits in a larger document (a queue sweep's
        ``request.json`` holds it as ``config``), ``what`` that document's name."""
        f = FieldReader(where, what)
        d = f.obj(data, at or "(top level)")
        known = {x.name for x in dataclasses.fields(cls)}
        unknown = [k for k in d if k not in known]
        if unknown:  # refused, not kept: see the module's docstring
            key = f.join(at, clip_for_message(unknown[0]))
            raise UsageError(f"{where}: {key}: not a queue run option", hint=hint)
        devices = d.get("devices")
        return cls(
            workload=f.text(d, "workload", at, required=True),
            streams=f.integer(d, "streams", at, required=True),
            iterations=f.integer(d, "iterations", at, 50), warmup=f.integer(d, "warmup", at, 5),
            device=f.text(d, "device", at, "cuda"),
            devices=f.strings(devices, f.join(at, "devices")) if devices is not None else None,
            sync_mode=f.text(d, "sync_mode", at, "per_iteration"),
            dtype=f.text(d, "dtype", at, "float32"), size=f.text(d, "size", at, "default"),
            params=f.obj_at(d, "params", at), run_id=f.text(d, "run_id", at),
            ebpf_trace=f.boolean(d, "ebpf_trace", at),
            keep_timeline=f.boolean(d, "keep_timeline", at),
            timing=f.text(d, "timing", at, "auto"),
            detail_iterations=f.integer(d, "detail_iterations", at, 20),
            profiler_trace=f.opt_text(d, "profiler_trace", at),
            stream_priority=f.text(d, "stream_priority", at, "default"),
            graph=f.boolean(d, "graph", at))

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> PointConfig:
        """A config file: at most ``INPUT_LIMITS[WHAT]`` bytes (looked up at each read) of a
        regular file, located JSON/UTF-8 errors, then every field checked."""
        data = load_json_input(path, what=WHAT, limit=INPUT_LIMITS[WHAT], hint=_HINT)
        return cls.from_json(data, os.fspath(path))
