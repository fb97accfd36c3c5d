"""A policy trial's ``outcome.json`` as a typed value (issue 36 item 3): one serializer, one
reader.

The evaluator builds a :class:`TrialOutcome` for every trial it ran (how the process ended,
the environment it had, the figures its queue result gave) and writes
:meth:`TrialOutcome.to_json`, the object ``outcome.json`` has always held, key order included.
The resume (``evaluator._final_outcome``), the report (``report.py``) and the analysis frames
read it back through :meth:`TrialOutcome.from_dict`: every field's type checked, a damaged one
named with the file and the field path (UsageError, exit 2). What a reader does with a refusal
is its own decision (a failed trial in the report, a trial to run again on resume); none of them
reads the document's string keys.

Fields copied from elsewhere without being interpreted (the harness's ``platform`` and
``stream_priority`` sections) stay :data:`Json`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json, load_json_input

WHAT = "policy outcome"
# A trial whose outcome says one of these is done: a resume keeps it (a cancelled trial and one
# that refused to run are not final: the first runs again, the second ended the sweep).
FINAL_STATUSES = ("ok", "failed", "timed_out")


@dataclass(frozen=True)
class Figures:
    """What an ok trial's queue result measured; every map empty (and ``emulated`` None) for a
    trial that did not finish with a result."""

    summary: dict[str, float | None] = field(default_factory=dict)  # None: not measured
    units: dict[str, str | None] = field(default_factory=dict)  # None: the harness gave none
    better: dict[str, str] = field(default_factory=dict)  # "higher", "lower", "neither"
    unavailable: dict[str, str] = field(default_factory=dict)  # why a figure is None
    platform: dict[str, Json] = field(default_factory=dict)  # the harness's, copied
    emulated: bool | None = None  # None: no result to say

    def to_json(self) -> dict[str, Json]:
        return {"summary": dict(self.summary), "summary_units": dict(self.units),
                "summary_better": dict(self.better), "unavailable": dict(self.unavailable),
                "platform": dict(self.platform), "emulated": self.emulated}


NO_FIGURES = Figures()


@dataclass(frozen=True)
class ResultStamp:
    """What an ok trial copied from its queue result besides the figures (written only then)."""

    schema_version: int  # the queue result's
    stream_priority: Json  # what --stream-priority did (asked, applied or why not); null: none

    def to_json(self) -> dict[str, Json]:
        return {"schema_version": self.schema_version, "stream_priority": self.stream_priority}


@dataclass(frozen=True)
class TrialEnd:
    """How a trial ended: its status and reason, and for an ok one what its result gave."""

    status: str  # ok, failed, timed_out, usage_error, environment_error, cancelled
    reason: str = ""
    figures: Figures = NO_FIGURES
    stamp: ResultStamp | None = None


@dataclass(frozen=True)
class TrialOutcome:
    """``trials/NNN-POLICY-tK/outcome.json`` (docs/policy.md)."""

    policy: str
    trial: int  # 1-based repeat of the policy
    position: int  # 0-based place in the run order
    argv: tuple[str, ...]
    env_set: dict[str, str]  # the policy's variables
    env_removed: tuple[str, ...]  # inherited variables another policy sets, removed
    exit_code: int | None
    signal: int | None
    timed_out: bool
    exec_error: str | None
    wall_s: float
    peak_rss_kb: int | None
    peak_rss_reason: str | None
    gpu_control: str  # what was applied and restored around the trial; "" none
    end: TrialEnd
    # what the tool set beyond the user's environment and the policy's; None: not recorded
    tool_env: dict[str, str | None] | None = None

    @property
    def status(self) -> str:
        return self.end.status

    @property
    def reason(self) -> str:
        return self.end.reason

    @property
    def figures(self) -> Figures:
        return self.end.figures

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def to_json(self) -> dict[str, Json]:
        """The object outcome.json holds (``core.atomic.json_bytes`` writes it)."""
        out: dict[str, Json] = {
            "policy": self.policy, "trial": self.trial, "position": self.position,
            "argv": list(self.argv), "env_set": dict(self.env_set),
            "env_removed": list(self.env_removed), "exit_code": self.exit_code,
            "signal": self.signal, "timed_out": self.timed_out, "exec_error": self.exec_error,
            "wall_s": self.wall_s, "peak_rss_kb": self.peak_rss_kb,
            "peak_rss_reason": self.peak_rss_reason, "gpu_control": self.gpu_control,
        }
        # the figures before the status: the order the file has always had (the record was
        # made with empty figures first, the ending filled in after)
        out.update(self.end.figures.to_json())
        out.update(status=self.end.status, reason=self.end.reason)
        if self.end.stamp is not None:
            out.update(self.end.stamp.to_json())
        if self.tool_env is not None:
            out["tool_env"] = dict(self.tool_env)
        return out

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    @classmethod
    def from_dict(cls, data: object, *, where: str = "outcome.json") -> TrialOutcome:
        """Read a parsed outcome.json; a damaged one is a located UsageError (exit 2)."""
        return _read_outcome(FieldReader(where, WHAT), data)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> TrialOutcome:
        """Read an outcome.json file: bounded, a regular file, every field's type checked."""
        data = load_json_input(path, what=WHAT, limit=INPUT_LIMITS[WHAT],
                               hint="outcome.json is written by `aorta-tui policy sweep`; "
                                    "`aorta-tui policy resume DIR` runs a damaged trial again")
        return cls.from_dict(data, where=os.fspath(path))


# -- the reader ----------------------------------------------------------------------------


def _read_outcome(f: FieldReader, data: object) -> TrialOutcome:
    d = f.obj(data, "(top level)")
    tool_env = None
    if "tool_env" in d:  # an outcome from before it was recorded has none
        tool_env = {str(k): f.check(v, "string", f"tool_env.{k}", nullable=True)
                    for k, v in f.obj_at(d, "tool_env", "").items()}
    return TrialOutcome(
        policy=f.text(d, "policy", "", required=True),
        trial=f.integer(d, "trial", "", required=True),
        position=f.integer(d, "position", "", required=True),
        argv=f.strings_at(d, "argv", ""), env_set=_strings_map(f, d, "env_set"),
        env_removed=f.strings_at(d, "env_removed", ""),
        exit_code=f.opt_integer(d, "exit_code", ""), signal=f.opt_integer(d, "signal", ""),
        timed_out=f.boolean(d, "timed_out", ""), exec_error=f.opt_text(d, "exec_error", ""),
        wall_s=_wall_s(f, d), peak_rss_kb=f.opt_integer(d, "peak_rss_kb", ""),
        peak_rss_reason=f.opt_text(d, "peak_rss_reason", ""),
        gpu_control=f.text(d, "gpu_control", ""), end=_read_end(f, d), tool_env=tool_env)


def _wall_s(f: FieldReader, d: dict[str, Any]) -> float:
    # required: every outcome the evaluator wrote has it (rounded seconds); kept as written,
    # an int stays an int, so the file reads back to its own bytes
    value: float = f.check(d.get("wall_s"), "number", "wall_s")
    return value


def _read_end(f: FieldReader, d: dict[str, Any]) -> TrialEnd:
    figures = Figures(
        summary={str(k): f.opt_number(v, f"summary.{k}")
                 for k, v in f.obj_at(d, "summary", "").items()},
        units={str(k): f.check(v, "string", f"summary_units.{k}", nullable=True)
               for k, v in f.obj_at(d, "summary_units", "").items()},
        better=_strings_map(f, d, "summary_better"),
        unavailable=_strings_map(f, d, "unavailable"),
        platform=f.obj_at(d, "platform", ""), emulated=f.opt_boolean(d, "emulated", ""))
    stamp = None
    if "schema_version" in d:  # written with stream_priority, for an ok trial only
        stamp = ResultStamp(schema_version=f.integer(d, "schema_version", ""),
                            stream_priority=d.get("stream_priority"))
    status = f.text(d, "status", "", required=True)
    if status == "ok" and "summary" not in d:
        # Why refused: an ok trial is its figures; without them it is not a measurement (the
        # report counted such a file a failed trial before this type, and still does)
        raise UsageError(f"{f.where}: summary: missing (the trial says ok)",
                         hint=f"this {f.what} is damaged or was not written by aorta-tui")
    return TrialEnd(status=status, reason=f.text(d, "reason", ""),
                    figures=figures, stamp=stamp)


def _strings_map(f: FieldReader, d: dict[str, Any], key: str) -> dict[str, str]:
    return {str(k): str(f.check(v, "string", f"{key}.{k}"))
            for k, v in f.obj_at(d, key, "").items()}
