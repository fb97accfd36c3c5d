"""``policy.json`` as a typed value: :class:`PolicyReport` and its parts.

One serializer (:meth:`PolicyReport.to_json`, the object ``policy.json`` holds, key order
included) and one reader (:meth:`PolicyReport.from_dict` / :meth:`PolicyReport.from_json`, which
checks every field's type and names the damaged one: file, field path, fix; exit 2). The report
is computed in ``report.py``; the CLI, the TUI, the markdown page and ``analysis`` read these
attributes, never the document's string keys.

Fields the report copies through without interpreting them (the platform the harness recorded,
the request's workload/streams/device, a trial's exit code and environment) stay :data:`Json`:
they are whatever JSON the sweep wrote.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json, load_json_input
from aorta_tui.policy.comparison import Comparison
from aorta_tui.policy.presets import GpuControlSettings, Policy

REPORT_KIND = "aorta-tui/policy-report"
REPORT_SCHEMA_VERSION = 1
WHAT = "policy report"

# Any JSON value (what json.loads returns), for the fields copied through untouched.


@dataclass(frozen=True)
class Statistic:
    """How every summary and call of the report was computed (the same for every report)."""

    center: str
    interval: str
    min_samples: int
    call_rule: str

    def to_json(self) -> dict[str, Json]:
        return {"center": self.center, "interval": self.interval,
                "min_samples": self.min_samples, "call_rule": self.call_rule}


@dataclass(frozen=True)
class MetricInfo:
    """A metric some trial reported: its unit and which direction is better ('' unknown)."""

    name: str
    unit: str = ""
    better: str = ""  # "higher", "lower" or ""

    def to_json(self) -> dict[str, Json]:
        return {"name": self.name, "unit": self.unit, "better": self.better}


@dataclass(frozen=True)
class MetricSummary:
    """One metric under one policy: the median and interval of its ok trials, and the values
    (None where a trial did not measure it), so the call can be checked by hand."""

    n: int
    median: float | None
    ci_low: float | None
    ci_high: float | None
    values: tuple[float | None, ...] = ()
    reason: str = ""  # why the median or the interval is missing; written only when set

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {"n": self.n, "median": self.median, "ci_low": self.ci_low,
                                "ci_high": self.ci_high}
        if self.reason:  # comparison.Summary.to_dict's order: reason before the values
            out["reason"] = self.reason
        out["values"] = list(self.values)
        return out


# What a metric no trial of a policy reported reads as (policy.md: "not available").
NO_SUMMARY = MetricSummary(0, None, None, None)


@dataclass(frozen=True)
class PolicyEntry:
    """A policy's row: its definition (as ``sweep.json`` recorded it), whether it ran, its
    notes and trial counts, each metric's summary and its comparison with the reference."""

    policy: Policy
    status: str = "ran"  # "ran" or "skipped"
    skipped_reason: str = ""
    notes: tuple[str, ...] = ()
    trials_ok: int = 0
    trials_failed: int = 0
    metrics: dict[str, MetricSummary] = field(default_factory=dict)
    vs_reference: dict[str, Comparison] = field(default_factory=dict)  # not for the reference
    # Keys of the manifest's definition that Policy does not type, in file order.
    extra: dict[str, Json] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.policy.name

    def summary(self, metric: str) -> MetricSummary:
        return self.metrics.get(metric, NO_SUMMARY)

    def to_json(self) -> dict[str, Json]:
        return {**self.policy.to_dict(), **self.extra, "status": self.status,
                "skipped_reason": self.skipped_reason, "notes": list(self.notes),
                "trials_ok": self.trials_ok, "trials_failed": self.trials_failed,
                "metrics": {k: v.to_json() for k, v in self.metrics.items()},
                "vs_reference": {k: v.to_dict() for k, v in self.vs_reference.items()}}


@dataclass(frozen=True)
class Difference:
    """A difference the engine called: the two 95% intervals do not overlap."""

    policy: str
    metric: str
    verdict: str  # comparison.HIGHER or comparison.LOWER
    change_pct: float | None
    assessment: str  # "better", "worse" or "" (no better direction)

    def to_json(self) -> dict[str, Json]:
        return {"policy": self.policy, "metric": self.metric, "verdict": self.verdict,
                "change_pct": self.change_pct, "assessment": self.assessment}


@dataclass(frozen=True)
class TrialRow:
    """One trial of the run order and how it ended ("not run" when no outcome was recorded)."""

    position: int
    policy: str
    trial: int
    dir: str
    status: str
    reason: str = ""
    exit_code: Json = None  # copied from outcome.json
    wall_s: Json = None
    env_set: Json = field(default_factory=dict)
    gpu_control: Json = ""

    def to_json(self) -> dict[str, Json]:
        return {"position": self.position, "policy": self.policy, "trial": self.trial,
                "dir": self.dir, "status": self.status, "reason": self.reason,
                "exit_code": self.exit_code, "wall_s": self.wall_s, "env_set": self.env_set,
                "gpu_control": self.gpu_control}


@dataclass(frozen=True)
class PolicyReport:
    """``policy.json``: a sweep's policies compared with the reference (docs/policy.md)."""

    run_id: Json
    created: Json
    rendered: str  # when this report was computed
    status: str  # "completed", "interrupted", ...
    workload: Json  # the request's fields, as sweep.json recorded them
    streams: Json
    trials_per_policy: Json
    iterations: Json
    device: Json
    seed: int
    reference: str
    reference_added: bool
    platform: dict[str, Json]
    emulated: bool | None  # None: no trial finished, so unknown
    statistic: Statistic
    metrics: tuple[MetricInfo, ...]
    policies: tuple[PolicyEntry, ...]
    differences: tuple[Difference, ...]
    trials: tuple[TrialRow, ...]
    failed_trials: int
    schema_version: int = REPORT_SCHEMA_VERSION

    def metric(self, name: str) -> MetricInfo:
        return next((m for m in self.metrics if m.name == name), MetricInfo(name))

    def to_json(self) -> dict[str, Json]:
        """The object policy.json holds (``core.atomic.json_bytes`` writes it)."""
        return {
            "schema_version": self.schema_version, "kind": REPORT_KIND, "run_id": self.run_id,
            "created": self.created, "rendered": self.rendered, "status": self.status,
            "workload": self.workload, "streams": self.streams,
            "trials_per_policy": self.trials_per_policy, "iterations": self.iterations,
            "device": self.device, "seed": self.seed, "reference": self.reference,
            "reference_added": self.reference_added, "platform": self.platform,
            "emulated": self.emulated, "statistic": self.statistic.to_json(),
            "metrics": [m.to_json() for m in self.metrics],
            "policies": [p.to_json() for p in self.policies],
            "differences": [d.to_json() for d in self.differences],
            "trials": [t.to_json() for t in self.trials],
            "failed_trials": self.failed_trials,
        }

    __hash__ = None  # type: ignore[assignment]  # mutable dict fields: never a dict key

    @classmethod
    def from_dict(cls, data: object, *, where: str = "policy.json") -> PolicyReport:
        """Read a parsed policy.json; a damaged one is a located UsageError (exit 2)."""
        return _read_report(FieldReader(where, WHAT), data)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> PolicyReport:
        """Read a policy.json file: bounded, a regular file, every field's type checked."""
        data = load_json_input(path, what=WHAT, limit=INPUT_LIMITS["policy report"],
                               hint="policy.json is written by aorta-tui; `aorta-tui policy "
                                    "report DIR` writes it again from the run directory")
        return cls.from_dict(data, where=os.fspath(path))


# -- the reader ----------------------------------------------------------------------------


_join = FieldReader.join


def _read_report(f: FieldReader, data: object) -> PolicyReport:
    d = f.obj(data, "(top level)")
    if d.get("kind") != REPORT_KIND:
        raise UsageError(f"{f.where} is not a policy report (kind {str(d.get('kind'))[:60]!r})",
                         hint="open the policy.json of a `policy sweep` run directory")
    # the parts a reader indexes into first, so their damage is the error a reader sees
    platform: dict[str, Json] = f.check(d.get("platform"), "object", "platform",
                                        nullable=True) or {}
    metrics = tuple(_read_metric_info(f, m, f"metrics[{i}]")
                    for i, m in enumerate(f.array_at(d, "metrics", "")))
    policies = tuple(_read_entry(f, p, f"policies[{i}]")
                     for i, p in enumerate(f.array_at(d, "policies", "")))
    return PolicyReport(
        schema_version=f.integer(d, "schema_version", "", REPORT_SCHEMA_VERSION),
        run_id=d.get("run_id"), created=d.get("created"), rendered=f.text(d, "rendered", ""),
        status=f.text(d, "status", ""), workload=d.get("workload"), streams=d.get("streams"),
        trials_per_policy=d.get("trials_per_policy"), iterations=d.get("iterations"),
        device=d.get("device"), seed=f.integer(d, "seed", ""),
        reference=f.text(d, "reference", "", "baseline"),
        reference_added=f.boolean(d, "reference_added", ""), platform=platform,
        emulated=f.opt_boolean(d, "emulated", ""),
        statistic=_read_statistic(f, f.obj_at(d, "statistic", "")), metrics=metrics,
        policies=policies,
        differences=tuple(_read_difference(f, x, f"differences[{i}]")
                          for i, x in enumerate(f.array_at(d, "differences", ""))),
        trials=tuple(_read_trial(f, x, f"trials[{i}]")
                     for i, x in enumerate(f.array_at(d, "trials", ""))),
        failed_trials=f.integer(d, "failed_trials", ""))


def _read_statistic(f: FieldReader, d: dict[str, Any]) -> Statistic:
    return Statistic(center=f.text(d, "center", "statistic"),
                     interval=f.text(d, "interval", "statistic"),
                     min_samples=f.integer(d, "min_samples", "statistic"),
                     call_rule=f.text(d, "call_rule", "statistic"))


def _read_metric_info(f: FieldReader, value: object, path: str) -> MetricInfo:
    d = f.obj(value, path)
    return MetricInfo(name=f.text(d, "name", path, required=True),
                      unit=f.text(d, "unit", path), better=f.text(d, "better", path))


def _read_entry(f: FieldReader, value: object, path: str) -> PolicyEntry:
    d = f.obj(value, path)
    name = f.text(d, "name", path, required=True)
    metrics = {str(k): _read_summary(f, v, f"{path}.metrics.{k}")
               for k, v in f.obj_at(d, "metrics", path).items()}
    versus = {str(k): _read_comparison(f, v, f"{path}.vs_reference.{k}")
              for k, v in f.obj_at(d, "vs_reference", path).items()}
    return PolicyEntry(
        policy=read_policy_definition(f, d, name, path), status=f.text(d, "status", path, "ran"),
        skipped_reason=f.text(d, "skipped_reason", path),
        notes=f.strings_at(d, "notes", path),
        trials_ok=f.integer(d, "trials_ok", path),
        trials_failed=f.integer(d, "trials_failed", path),
        metrics=metrics, vs_reference=versus,
        extra={k: v for k, v in d.items() if k not in _ENTRY_KEYS})


_ENTRY_KEYS = frozenset({"name", "description", "kind", "vendor", "env", "harness_args",
                         "gpu_control", "source", "status", "skipped_reason", "notes",
                         "trials_ok", "trials_failed", "metrics", "vs_reference"})


def read_policy_definition(f: FieldReader, d: dict[str, Any], name: str, path: str) -> Policy:
    """A policy's definition at ``path`` (policy.json's entry, sweep.json's record): every
    field's type checked, a missing one its default."""
    env = {str(k): str(f.check(v, "string", f"{path}.env.{k}"))
           for k, v in f.obj_at(d, "env", path).items()}
    gpu = f.obj_at(d, "gpu_control", path)
    gpath = _join(path, "gpu_control")
    return Policy(name=name, description=f.text(d, "description", path),
                  kind=f.text(d, "kind", path, "custom"), vendor=f.text(d, "vendor", path, "any"),
                  env=env, harness_args=f.strings_at(d, "harness_args", path),
                  gpu_control=GpuControlSettings(
                      clock_level=f.opt_integer(gpu, "clock_level", gpath),
                      power_limit_w=f.opt_integer(gpu, "power_limit_w", gpath)),
                  source=f.text(d, "source", path, "builtin"))


def _read_summary(f: FieldReader, value: object, path: str) -> MetricSummary:
    d = f.obj(value, path)
    return MetricSummary(
        n=f.integer(d, "n", path), median=f.number(d, "median", path),
        ci_low=f.number(d, "ci_low", path), ci_high=f.number(d, "ci_high", path),
        values=tuple(f.opt_number(v, f"{path}.values[{i}]")
                     for i, v in enumerate(f.array_at(d, "values", path))),
        reason=f.text(d, "reason", path))


def _read_comparison(f: FieldReader, value: object, path: str) -> Comparison:
    d = f.obj(value, path)
    return Comparison(verdict=f.text(d, "verdict", path), change_pct=f.number(d, "change_pct", path),
                      assessment=f.text(d, "assessment", path), reason=f.text(d, "reason", path))


def _read_difference(f: FieldReader, value: object, path: str) -> Difference:
    d = f.obj(value, path)
    return Difference(policy=f.text(d, "policy", path, required=True),
                      metric=f.text(d, "metric", path, required=True),
                      verdict=f.text(d, "verdict", path),
                      change_pct=f.number(d, "change_pct", path),
                      assessment=f.text(d, "assessment", path))


def _read_trial(f: FieldReader, value: object, path: str) -> TrialRow:
    d = f.obj(value, path)
    return TrialRow(position=f.integer(d, "position", path, required=True),
                    policy=f.text(d, "policy", path, required=True),
                    trial=f.integer(d, "trial", path, required=True),
                    dir=f.text(d, "dir", path, required=True),
                    status=f.text(d, "status", path), reason=f.text(d, "reason", path),
                    exit_code=d.get("exit_code"), wall_s=d.get("wall_s"),
                    env_set=d.get("env_set", {}), gpu_control=d.get("gpu_control", ""))
