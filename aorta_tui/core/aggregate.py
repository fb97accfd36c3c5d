"""Per-cell statistics and the speed-confound check.

Step times come from the best source a trial offers, named in ``step_time_source``:
``workload`` (per-step times the workload measured: device events on a GPU), ``step_time_regex``
(parsed from the trial's stdout by the recipe's regex), or ``trial_wall`` (the trial's wall
time divided by its steps: a fallback that includes process start-up, said so in the report).

Spread: every cell carries the p25/p50/p75 and the IQR of its pooled step times with their
count, and a noise marker (``few samples``, ``bimodal`` or ``dispersed``; defined in
``core/stats.py`` and ``docs/run-directory.md``), because a mean of 30 µs steps among 16 ms
stalls describes neither.

Each trial is its ``result.json``, typed: :class:`~aorta_tui.core.trial_contract.TrialResult`
(one shape of a trial for the sweep, the aggregate, the report and the front ends).

Confound, in both directions: with ``t = confound.threshold`` (a ratio; below 1 it is read as
its inverse), a cell is flagged ``speed (+N%)`` when its mean step time over the baseline's
exceeds ``t``, and ``speed (-N%)`` when it is below ``1/t`` (``x3.2`` / ``x1/260`` beyond a
factor of 2), AND the difference is larger than
the noise measured from the trials' spread: Welch's t test at 95% (the difference of the
per-trial means beyond t x SE, t for the Welch-Satterthwaite degrees of freedom: 12.7 x SE with
two trials a side, about 2 x SE with many), so two loaded trials cannot flag x6 by chance.
With fewer than two trials on either side the spread cannot be measured: no flag, and the
reason says so (``spread_unknown``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core import stats
from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import require_object, require_type
from aorta_tui.core.trial_contract import TrialResult


@dataclass
class CellStats:
    cell: str
    trials: int
    passed: int
    failed: int
    errored: int
    failure_rate: float | None
    error_rate: float | None
    step_time: dict[str, float | None]  # seconds
    step_count: int | None  # None: a line written before the count was recorded (never 0)
    step_time_source: str
    top_detectors: list[tuple[str, int]]
    noise: dict[str, Any] = field(default_factory=dict)
    confound: dict[str, Any] = field(default_factory=dict)
    cross_trial_failures: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cell": self.cell,
            "trials": self.trials,
            "passed": self.passed,
            "failed": self.failed,
            "errored": self.errored,
            "failure_rate": self.failure_rate,
            "error_rate": self.error_rate,
            "step_time_s": self.step_time,
            "step_count": self.step_count,
            "noise": self.noise,
            "step_time_source": self.step_time_source,
            "top_detectors": [{"id": d, "count": n} for d, n in self.top_detectors],
            "confound": self.confound,
            "cross_trial_failures": self.cross_trial_failures,
        }

    @classmethod
    def from_dict(cls, data: object, *, cell: str = "", where: str = "cell_aggregated") -> CellStats:
        """The inverse of :meth:`to_dict` (a journal's ``cell_aggregated`` stats). A key that is
        absent takes its empty value (a line written with fewer figures still reads); one of the
        wrong type is a located UsageError."""
        d = require_object(data, where=where, what="cell statistics")

        def get(name: str, expected: str, default: object, nullable: bool = False) -> Any:
            if name not in d:
                return default
            return require_type(d[name], expected, where=where, field=name, what="cell statistics",
                                nullable=nullable)

        top = []
        for i, item in enumerate(get("top_detectors", "array", [])):
            entry = require_object(item, where=where, field=f"top_detectors[{i}]", what="cell statistics")
            try:
                top.append((str(entry["id"]), int(entry["count"])))
            except (KeyError, TypeError, ValueError):
                raise UsageError(f"{where}: top_detectors[{i}]: expected {{id, count}}, found {entry!r:.60}",
                                 hint="this journal line is damaged or was not written by aorta-tui") from None
        return cls(
            cell=get("cell", "string", cell),
            trials=get("trials", "integer", 0), passed=get("passed", "integer", 0),
            failed=get("failed", "integer", 0), errored=get("errored", "integer", 0),
            failure_rate=get("failure_rate", "number", None, nullable=True),
            error_rate=get("error_rate", "number", None, nullable=True),
            step_time=dict(get("step_time_s", "object", {})),
            step_count=get("step_count", "integer", None, nullable=True),
            step_time_source=get("step_time_source", "string", "none"),
            top_detectors=top,
            noise=dict(get("noise", "object", {})),
            confound=dict(get("confound", "object", {})),
            cross_trial_failures=list(get("cross_trial_failures", "array", [])),
        )


def _trial_mean(rec: TrialResult) -> float | None:
    if rec.step_times_s:
        return sum(rec.step_times_s) / len(rec.step_times_s)
    return None


def cell_stats(cell: str, records: list[TrialResult]) -> CellStats:
    n = len(records)
    verdicts = Counter(r.verdict for r in records)
    timed = [r for r in records if r.verdict != "error"]  # a timeout's wall time is not a speed
    steps = sorted(t for r in timed for t in (r.step_times_s or []))
    sources = {r.step_time_source for r in timed if r.step_times_s}
    step_time: dict[str, float | None] = {"mean": None, "p25": None, "p50": None, "p75": None,
                                          "iqr": None, "p90": None, "p99": None}
    if steps:
        quart = stats.spread(steps)
        step_time.update(
            mean=sum(steps) / len(steps), p25=quart["p25"], p50=quart["p50"], p75=quart["p75"],
            iqr=quart["iqr"], p90=stats.percentile(steps, 90, presorted=True),
            p99=stats.percentile(steps, 99, presorted=True),
        )
    detectors = Counter(d for r in records for d in r.detectors)
    return CellStats(
        cell=cell,
        trials=n,
        passed=verdicts.get("pass", 0),
        failed=verdicts.get("fail", 0),
        errored=verdicts.get("error", 0),
        failure_rate=verdicts.get("fail", 0) / n if n else None,
        error_rate=verdicts.get("error", 0) / n if n else None,
        step_time=step_time,
        step_count=len(steps),
        step_time_source="+".join(sorted(sources)) if sources else "none",
        top_detectors=detectors.most_common(5),
        noise=stats.noise_marker(steps),
    )


def band(threshold: float) -> tuple[float, float]:
    """(lower, upper) ratio bounds of the confound check: ``1/t`` and ``t`` (``t >= 1``)."""
    t = threshold if threshold >= 1 else 1.0 / threshold
    return 1.0 / t, t


def confound_check(
    cell: list[TrialResult], baseline: list[TrialResult], threshold: float
) -> dict[str, Any]:
    """Compare mean step times of a cell and the baseline, both ways; see the module docstring."""
    c = [m for r in cell if r.verdict != "error" and (m := _trial_mean(r)) is not None]
    b = [m for r in baseline if r.verdict != "error" and (m := _trial_mean(r)) is not None]
    lower, upper = band(threshold)
    if not c or not b:
        return {"flag": None, "reason": "no step times on one side", "threshold": threshold}
    mc, mb = sum(c) / len(c), sum(b) / len(b)
    if mb <= 0:
        return {"flag": None, "reason": "baseline mean step time is zero", "threshold": threshold}
    ratio = mc / mb
    out: dict[str, Any] = {"ratio": ratio, "cell_mean_s": mc, "baseline_mean_s": mb,
                           "threshold": threshold, "band": [lower, upper]}
    if lower <= ratio <= upper:
        out.update(flag=None, direction=None,
                   reason=f"ratio {ratio:.3f} within [{lower:.3f}, {upper:.3f}] (threshold x{upper:g} either way)")
        return out
    out["direction"] = "slower" if ratio > upper else "faster"
    pct = change_text(ratio)
    if len(c) < 2 or len(b) < 2:  # a speed flag needs its spread, or no flag
        out.update(flag=None, significant=None, spread_unknown=True,
                   reason=f"{pct} not flagged: its noise is unknown with {min(len(c), len(b))} "
                          "trial(s) with step times on a side (needs >= 2 trials per cell)")
        return out
    vc, vb = _var(c) / len(c), _var(b) / len(b)
    se = math.sqrt(vc + vb)
    # Welch-Satterthwaite degrees of freedom (no spread at all on both sides: any difference)
    denom = vc * vc / (len(c) - 1) + vb * vb / (len(b) - 1)
    df = (vc + vb) ** 2 / denom if denom > 0 else math.inf
    t = stats.t_critical_95(df)
    diff = mc - mb
    out.update(noise_s=t * se, se_s=se, df=None if math.isinf(df) else df, t_critical=t)
    if abs(diff) > t * se:
        out.update(flag=f"speed ({pct})", significant=True)
    else:
        out.update(flag=None, significant=False,
                   reason=f"{pct} is within noise (|difference| {abs(diff):.3g}s <= t {t:.3g} "
                          f"x SE {se:.3g}s, Welch, 95%)")
    return out


def change_text(ratio: float) -> str:
    """A cell/baseline ratio as people read it: ``+25%``/``-13%``, or ``x3.2``/``x1/260`` beyond
    a factor of 2 (where "-100%" would hide how much faster)."""
    if 0.5 <= ratio <= 2.0:
        return f"{(ratio - 1) * 100:+.0f}%"
    return f"x{ratio:.3g}" if ratio > 1 else f"x1/{1 / ratio:.3g}"


def _var(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def aggregate(
    records: list[TrialResult],
    cell_order: list[str],
    *,
    baseline_cell: str | None,
    threshold: float,
) -> list[CellStats]:
    by_cell: dict[str, list[TrialResult]] = {name: [] for name in cell_order}
    for r in records:
        by_cell.setdefault(r.cell, []).append(r)
    for rs in by_cell.values():
        rs.sort(key=lambda r: r.trial)
    stats = [cell_stats(name, by_cell[name]) for name in by_cell]
    base = by_cell.get(baseline_cell or "", [])
    for s in stats:
        if baseline_cell is None:
            s.confound = {"flag": None, "reason": "no baseline cell"}
        elif s.cell == baseline_cell:
            s.confound = {"flag": None, "reason": "this is the baseline"}
        else:
            s.confound = confound_check(by_cell[s.cell], base, threshold)
    return stats
