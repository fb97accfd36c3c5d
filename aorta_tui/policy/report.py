"""``policy.json`` and ``policy.md`` from a sweep's run directory.

The report is computed from the files the evaluator left (``sweep.json`` and each trial's
``outcome.json``), never from memory, so ``aorta-tui policy report DIR`` re-renders exactly
what the sweep wrote. The report is a typed value, ``report_doc.PolicyReport``: policy.json is
its one serializer's output, policy.md is rendered from its attributes. Both files are written
atomically.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

from aorta_tui.core.errors import AortaError, RunDirError, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.policy import comparison
from aorta_tui.policy.manifest_doc import MANIFEST_KIND, OrderEntry, SweepManifest
from aorta_tui.policy.outcome_doc import Figures, TrialEnd, TrialOutcome
from aorta_tui.policy.presets import Policy
from aorta_tui.policy.report_doc import (
    Difference,
    Json,
    MetricInfo,
    MetricSummary,
    PolicyEntry,
    PolicyReport,
    Statistic,
    TrialRow,
)

STATISTIC = Statistic(
    center="median of the trials",
    interval=f"{int(comparison.CONFIDENCE * 100)}% percentile bootstrap of the median "
             f"({comparison.DEFAULT_RESAMPLES} resamples, seeded)",
    min_samples=comparison.MIN_SAMPLES,
    call_rule="a difference against the reference is called only when the two intervals "
              "do not overlap; otherwise 'unchanged (within noise)'",
)


def load_manifest(run_dir: Path) -> SweepManifest:
    """The run directory's sweep.json, through its one reader (manifest_doc.py).

    Why every failure is a RunDirError: the manifest is what makes DIR a policy sweep, so a
    missing, unreadable or damaged one is this directory's problem (exit 2, as the reader's
    own error), said with the hint that the trial directories are still there.
    """
    path = run_dir / "sweep.json"
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is not a directory",
                          hint="give the --output directory of a `policy sweep`")
    if not path.exists() and not path.is_symlink():
        raise RunDirError(f"{run_dir} has no sweep.json: not a policy sweep directory",
                          hint="give the --output directory of a `policy sweep`")
    try:  # through the run's file layer: bounded, a regular file, no link followed
        with RunDirFS(run_dir) as fs:
            data = fs.load_json("sweep.json", what="policy sweep manifest",
                                limit=INPUT_LIMITS["policy sweep manifest"])
    except UsageError as exc:
        raise RunDirError(f"{path} is unreadable: {exc.message}", hint=exc.hint) from None
    if not isinstance(data, dict) or data.get("kind") != MANIFEST_KIND:
        raise RunDirError(f"{path} is not a policy sweep manifest")
    try:
        return SweepManifest.from_dict(data, where=str(path))
    except UsageError as exc:
        raise RunDirError(f"{path} is damaged: {exc.message.removeprefix(f'{path}: ')}",
                          hint="re-run the sweep; the trial directories are still there") from None


@dataclass(frozen=True)
class _Trial:
    """A trial of the manifest's order and how it ended (its outcome, when one was recorded)."""

    entry: OrderEntry  # the manifest's: its place, policy, repeat and dir win over the file's
    end: TrialEnd
    outcome: TrialOutcome | None = None

    @property
    def status(self) -> str:
        return self.end.status

    @property
    def policy(self) -> str:
        return self.entry.policy


NOT_RUN = TrialEnd("not run", "no outcome recorded")


def _load_outcome(fs: RunDirFS, trial_dir: Path) -> TrialOutcome | TrialEnd | None:
    """The trial's outcome; the failed ending a damaged one is; None when none is recorded.

    Why a damaged outcome is a failed trial, not an error: one trial's file must not keep the
    report of all the others from being written. An outcome its reader refuses (a figure that
    is text, an ok trial without figures) is failed with the reader's located reason, so no
    unchecked figure reaches the comparison (before the type a wrongly typed figure was dropped
    and the trial stayed ok; the queue result's reader made the same change for result.json).
    """
    path = trial_dir / "outcome.json"
    try:
        data = fs.load_json(path, what="outcome", limit=INPUT_LIMITS["policy outcome"])
    except (AortaError, OSError):  # missing, torn, a link or not a file: no outcome recorded
        return None
    try:
        return TrialOutcome.from_dict(data, where=str(fs.root / path))
    except UsageError as exc:
        return TrialEnd("failed", f"outcome.json is damaged: {exc.message}")


def build_report(run_dir: str | Path, *, status: str | None = None) -> PolicyReport:
    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir)
    request = manifest.request
    seed = request.seed
    reference = manifest.reference

    trials = _load_trials(run_dir, manifest)
    ok = [t.end.figures for t in trials if t.status == "ok"]
    metric_names, units, better = _metric_catalogue(ok)

    platform: dict[str, Json] = next((p for t in ok if (p := t.platform)), {})
    backend = str(platform.get("backend") or "")
    emulated = any(t.emulated for t in ok) if ok else None

    entries: list[PolicyEntry] = []
    summaries: dict[str, dict[str, comparison.Summary]] = {}
    for definition, extra in ((d.policy, d.extra) for d in manifest.policies):
        mine = [t for t in trials if t.policy == definition.name]
        mine_ok = [t for t in mine if t.status == "ok"]
        per_metric, summaries[definition.name] = _policy_metrics(mine_ok, metric_names, seed,
                                                                 definition.name)
        entries.append(_policy_entry(manifest, definition, extra, mine, mine_ok, per_metric,
                                     backend, emulated))

    versus, differences = _differences(entries, summaries, reference, metric_names, better)

    if status is None:
        unfinished = any(t.status in ("not run", "cancelled") for t in trials)
        status = "interrupted" if unfinished else "completed"
    return PolicyReport(
        run_id=manifest.run_id, created=manifest.created,
        rendered=time.strftime("%Y-%m-%dT%H:%M:%S%z"), status=status,
        workload=request.workload, streams=request.streams,
        trials_per_policy=request.trials, iterations=request.iterations,
        device=request.device, seed=seed, reference=reference,
        reference_added=manifest.reference_added, platform=platform,
        emulated=emulated, statistic=STATISTIC,
        metrics=tuple(MetricInfo(m, units.get(m, ""), better.get(m, "")) for m in metric_names),
        policies=tuple(replace(e, vs_reference=versus.get(e.name, {})) for e in entries),
        differences=tuple(differences), trials=tuple(_trial_row(t) for t in trials),
        failed_trials=sum(1 for t in trials if t.status not in ("ok", "not run", "cancelled")))


def _load_trials(run_dir: Path, manifest: SweepManifest) -> list[_Trial]:
    """Every trial of the manifest's order with its outcome (or "not run" without one)."""
    trials: list[_Trial] = []
    fs = RunDirFS(run_dir)  # closed when this function returns (its last reference)
    for entry in manifest.order:
        outcome = _load_outcome(fs, Path("trials") / entry.dir)
        if outcome is None:
            trials.append(_Trial(entry, NOT_RUN))
        elif isinstance(outcome, TrialEnd):
            trials.append(_Trial(entry, outcome))
        else:
            trials.append(_Trial(entry, outcome.end, outcome))
    return trials


def _metric_catalogue(ok: list[Figures]) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """Metric names in first-seen order, with their units and better directions."""
    metric_names: list[str] = []
    units: dict[str, str] = {}
    better: dict[str, str] = {}
    for t in ok:
        for name in t.summary:
            if name not in metric_names:
                metric_names.append(name)
        # str(): a unit the harness left null has always read "None" here (policy.json's bytes)
        units.update({k: str(v) for k, v in t.units.items()})
        better.update(t.better)
    return metric_names, units, better


def _policy_metrics(mine_ok: list[_Trial], metric_names: list[str], seed: int,
                    name: str) -> tuple[dict[str, MetricSummary], dict[str, comparison.Summary]]:
    """One policy's per-metric summaries (with the values) over its ok trials."""
    per_metric: dict[str, MetricSummary] = {}
    summaries: dict[str, comparison.Summary] = {}
    for metric in metric_names:
        # as floats: an integer figure has always been compared (and written) as one
        values: list[float | None] = [_as_float(t.end.figures.summary.get(metric))
                                      for t in mine_ok]
        measured = [v for v in values if v is not None]
        summary = comparison.summarize(measured, seed=_metric_seed(seed, name, metric))
        if not measured:
            reasons = {t.end.figures.unavailable.get(metric) for t in mine_ok} - {None}
            reason = "; ".join(sorted(r for r in reasons if r is not None)) if reasons \
                else summary.reason
            summary = comparison.Summary(0, None, None, None, reason or "not measured")
        summaries[metric] = summary
        per_metric[metric] = MetricSummary(summary.n, summary.median, summary.ci_low,
                                           summary.ci_high, tuple(values), summary.reason)
    return per_metric, summaries


def _as_float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _policy_entry(manifest: SweepManifest, definition: Policy, extra: dict[str, Json],
                  mine: list[_Trial], mine_ok: list[_Trial],
                  per_metric: dict[str, MetricSummary], backend: str,
                  emulated: bool | None) -> PolicyEntry:
    """A policy's row of the report (its comparison with the reference is added after)."""
    notes = list(manifest.notes.get(definition.name, ()))
    notes += _vendor_notes(definition, backend, emulated)
    notes += _stream_priority_notes(mine_ok)
    skipped = manifest.skipped.get(definition.name) or None
    return PolicyEntry(
        policy=definition, status="skipped" if skipped else "ran",
        skipped_reason=skipped or "", notes=tuple(notes), trials_ok=len(mine_ok),
        trials_failed=sum(1 for t in mine if t.status not in ("ok", "not run", "cancelled")),
        metrics=per_metric, extra=extra)


def _differences(entries: list[PolicyEntry],
                 summaries: dict[str, dict[str, comparison.Summary]], reference: str,
                 metric_names: list[str], better: dict[str, str],
                 ) -> tuple[dict[str, dict[str, comparison.Comparison]], list[Difference]]:
    """Each policy's comparison with the reference per metric; the clear differences, listed."""
    versus: dict[str, dict[str, comparison.Comparison]] = {}
    differences: list[Difference] = []
    ref = summaries.get(reference, {})
    unmeasured = comparison.Summary(0, None, None, None, "reference not measured")
    for entry in entries:
        if entry.name == reference or entry.status == "skipped":
            continue
        mine = versus.setdefault(entry.name, {})
        for metric in metric_names:
            direction = better.get(metric)
            hib = True if direction == "higher" else False if direction == "lower" else None
            cmp = comparison.compare(ref.get(metric, unmeasured),
                                     summaries[entry.name][metric], higher_is_better=hib)
            mine[metric] = cmp
            if cmp.verdict in (comparison.HIGHER, comparison.LOWER):
                differences.append(Difference(entry.name, metric, cmp.verdict, cmp.change_pct,
                                              cmp.assessment))
    return versus, differences


def _metric_seed(seed: int, policy: str, metric: str) -> int:
    return (seed * 7919 + zlib.crc32(f"{policy}\0{metric}".encode())) % (2**32)


def _stream_priority_notes(trials: list[_Trial]) -> list[str]:
    """What the harness says ``--stream-priority lc`` did in these trials (one line per outcome)."""
    notes = set()
    for t in trials:
        sp = t.end.stamp.stream_priority if t.end.stamp is not None else None
        if not isinstance(sp, dict) or sp.get("requested") != "lc":
            continue
        if sp.get("applied"):
            streams = sp.get("latency_critical_streams")  # the harness writes a list
            lc = ",".join(str(s) for s in streams) if isinstance(streams, list) else ""
            notes.add(f"stream priority lc applied: streams {lc} at priority "
                      f"{sp.get('highest_priority')}")
        else:
            reason = str(sp.get("reason") or "not applied").removeprefix("not applied").lstrip(": ")
            notes.add(f"stream priority lc not applied{': ' + reason if reason else ''}; "
                      f"expect '{comparison.UNCHANGED}'")
    return sorted(notes)


def _vendor_notes(definition: Policy, backend: str, emulated: bool | None) -> list[str]:
    notes = []
    vendor = definition.vendor
    if emulated:
        if definition.has_process_effect():
            notes.append("CPU emulation: streams run one after another, so scheduling knobs "
                         "have nothing to act on here")
    elif vendor in ("cuda", "rocm") and backend and backend != vendor:
        notes.append(f"not applicable on this platform: the {vendor} runtime reads these "
                     f"knobs, this run used {backend}; expect '{comparison.UNCHANGED}'")
    return notes


def _trial_row(t: _Trial) -> TrialRow:
    # position, policy, trial and dir come from the checked manifest order; the process's
    # figures from the outcome (none without a readable one)
    e, o = t.entry, t.outcome
    return TrialRow(position=e.position, policy=e.policy, trial=e.trial, dir=e.dir,
                    status=t.status, reason=t.end.reason,
                    exit_code=o.exit_code if o else None, wall_s=o.wall_s if o else None,
                    env_set=dict(o.env_set) if o else {}, gpu_control=o.gpu_control if o else "")


# -- markdown ------------------------------------------------------------------------------


def _not_available(reason: str | None) -> str:
    # a metric with no summary entry was reported by none of the policy's trials
    return f"not available ({reason or 'no trial of this policy reported it'})"


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    magnitude = abs(value)
    if magnitude != 0 and (magnitude >= 1e5 or magnitude < 1e-3):
        return f"{value:.3g}"
    return f"{value:.4g}" if magnitude < 100 else f"{value:.1f}"


def versus_text(c: comparison.Comparison | None) -> str:
    """A policy's comparison with the reference on one metric, as policy.md and the TUI both
    show it: ``higher +5.0% (better)``, ``unchanged (within noise)``, ``not available (why)``;
    ``—`` where there is none (the reference itself, a skipped policy)."""
    if c is None:
        return "—"
    vs = c.verdict or "—"
    if c.verdict in (comparison.HIGHER, comparison.LOWER) and c.change_pct is not None:
        vs += f" {c.change_pct:+.1f}%" + (f" ({c.assessment})" if c.assessment else "")
    elif c.verdict == comparison.NOT_AVAILABLE and c.reason:
        vs += f" ({c.reason})"
    return vs


def render_markdown(report: PolicyReport) -> str:
    """policy.md: the report as a person reads it (policy.json is the record)."""
    lines = _md_header(report)
    lines += _md_policies(report)
    lines += ["", f"## Differences against `{report.reference}`", ""]
    if report.differences:
        lines += ["| policy | metric | verdict | change | assessment |",
                  "| --- | --- | --- | --- | --- |"]
        for d in report.differences:
            change = f"{d.change_pct:+.1f}%" if d.change_pct is not None else "—"
            lines.append(f"| {d.policy} | {d.metric} | {d.verdict} | {change} | "
                         f"{d.assessment or '—'} |")
    else:
        lines.append(f"None: every measured policy is {comparison.UNCHANGED} against "
                     f"`{report.reference}` (or had too few trials to say).")
    lines += ["", "## Metrics", ""]
    for m in report.metrics:
        lines += _md_metric(report, m)
    lines += ["## Trials (run order)", "", "| # | policy | trial | status | wall s | reason |",
              "| --- | --- | --- | --- | --- | --- |"]
    for t in report.trials:
        wall = f"{t.wall_s:.2f}" if isinstance(t.wall_s, (int, float)) else "—"
        reason = t.reason.replace("|", "/")
        lines.append(f"| {t.position + 1} | {t.policy} | {t.trial} | {t.status} | {wall} | "
                     f"{reason} |")
    return "\n".join(lines) + "\n"


def _md_header(report: PolicyReport) -> list[str]:
    plat = report.platform
    stat = report.statistic
    lines = [
        f"# Policy comparison: {report.workload}, {report.streams} streams",
        "",
        f"- status: {report.status} · run {report.run_id} · created {report.created}",
        f"- device: {plat.get('device_name') or report.device or 'default'}"
        f" ({plat.get('backend') or '?'}, runtime {plat.get('runtime') or 'n/a'},"
        f" torch {plat.get('torch') or '?'})"
        + (" · **CPU emulation**" if report.emulated else ""),
        f"- trials per policy: {report.trials_per_policy}, interleaved (seed {report.seed});"
        f" every trial a fresh `aorta-tui queue run` process with the policy's environment set "
        f"at creation",
        f"- statistic: {stat.center}, {stat.interval}; {stat.call_rule}",
    ]
    if report.reference_added:
        lines.append(f"- `{report.reference}` was added as the reference")
    if report.failed_trials:
        lines.append(f"- **{report.failed_trials} trial(s) failed**; see the trials table")
    return lines


def _md_policies(report: PolicyReport) -> list[str]:
    lines = ["", "## Policies", "", "| policy | sets | status | trials ok | notes |",
             "| --- | --- | --- | --- | --- |"]
    for p in report.policies:
        sets = ", ".join(f"`{k}={v}`" for k, v in p.policy.env.items())
        if p.policy.harness_args:
            sets += (", " if sets else "") + f"`{' '.join(p.policy.harness_args)}`"
        gc = p.policy.gpu_control.to_dict()
        if any(v is not None for v in gc.values()):
            sets += (", " if sets else "") + "gpu control " + ", ".join(
                f"{k}={v}" for k, v in gc.items() if v is not None)
        notes = "; ".join([*([p.skipped_reason] if p.skipped_reason else []), *p.notes])
        lines.append(f"| {p.name} | {sets or '(nothing)'} | {p.status} | "
                     f"{p.trials_ok} | {notes} |")
    return lines


def _md_metric(report: PolicyReport, m: MetricInfo) -> list[str]:
    """One metric's table: each policy that ran, its median, interval and call."""
    unit = f"{m.unit}, " if m.unit else ""
    direction = f"{m.better} is better" if m.better in ("higher", "lower") else \
        "no better direction"
    lines = [f"### {m.name} ({unit}{direction})", "",
             "| policy | n | median | 95% CI | vs reference |", "| --- | --- | --- | --- | --- |"]
    for p in report.policies:
        if p.status == "skipped":
            continue
        s = p.summary(m.name)
        ci = (f"[{_fmt(s.ci_low)}, {_fmt(s.ci_high)}]" if s.ci_low is not None
              else _not_available(s.reason))
        vs = "reference" if p.name == report.reference else versus_text(
            p.vs_reference.get(m.name))
        median = _fmt(s.median) if s.median is not None else _not_available(s.reason)
        lines.append(f"| {p.name} | {s.n} | {median} | {ci} | {vs} |")
    lines.append("")
    return lines


REPORT_FILES = ("policy.json", "policy.md")


def write_reports(run_dir: str | Path, report: PolicyReport) -> tuple[Path, Path]:
    with RunDirFS(run_dir) as fs:  # temp file, fchmod and rename relative to the run's descriptor
        return (fs.atomic_write_json("policy.json", report.to_json()),
                fs.atomic_write_text("policy.md", render_markdown(report)))


def rerender(run_dir: str | Path) -> tuple[PolicyReport, Path, Path]:
    """Recompute the comparison from the run directory and rewrite both reports."""
    from aorta_tui.store.run_create import check_outputs
    from aorta_tui.store.write_errors import write_failure

    check_outputs(Path(run_dir), files=REPORT_FILES)  # a directory there: exit 2, nothing read
    report = build_report(run_dir)
    try:
        json_path, md_path = write_reports(run_dir, report)
    except OSError as exc:  # another user's directory, a full disk: exit 3 naming the file
        problem = write_failure(exc, Path(run_dir), resumable=False)
        if problem is None:
            raise
        raise problem from None
    return report, json_path, md_path
