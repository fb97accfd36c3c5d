"""``matrix.json`` and ``matrix.md``: the sweep's result, written atomically."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui import __version__
from aorta_tui.core import stats
from aorta_tui.core.aggregate import CellStats, band, change_text
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.core.secrets import mask_env
from aorta_tui.core.trial_contract import TrialResult
from aorta_tui.sweep.matrix_doc import Devices, Matrix, MatrixCell, MatrixTrial
from aorta_tui.sweep.plan import Plan

if TYPE_CHECKING:
    from aorta_tui.recipe.model import Recipe


def write_reports(
    run_dir: Path,
    recipe: Recipe,
    plan: Plan,
    cells: list[CellStats],
    records: list[TrialResult],
    *,
    status: str,
    hint: str = "",
    schema_hash: Callable[[dict[str, Any]], str | None],
) -> dict[str, Path]:
    snapshots, warnings = snapshot_index(run_dir, plan, records, schema_hash)
    from aorta_tui.collect.collectors import run_summary  # upstream's collect: (result.json)

    threshold = recipe.confound.threshold

    matrix = Matrix(
        aorta_tui_version=__version__, generated_at=time.time(), run_dir=str(run_dir),
        run_id=run_dir.name, ticket=recipe.ticket, mode=recipe.mode,
        workload=recipe.workload if recipe.mode == "triage" else None,
        command=tuple(recipe.command or []), status=status, trials_planned=len(plan.trials),
        trials_finished=len(records), order=plan.order, seed=plan.seed,
        baseline_cell=plan.baseline_cell, confound_threshold=threshold,
        confound_band=band(float(threshold)) if threshold else None,
        devices=device_summary(run_dir, records),
        cells=tuple(_matrix_cell(run_dir, plan, s, records) for s in cells),
        trials=tuple(MatrixTrial(r.trial_id, r.cell, r.trial, r.verdict, tuple(r.detectors), r.wall_s)
                     for r in sorted(records, key=lambda r: (r.cell, r.trial))),
        snapshots=snapshots, warnings=tuple(warnings), hint=hint,
        collectors=run_summary(run_dir, [r.trial_id for r in records]) or None,
    )
    with RunDirFS(run_dir) as fs:  # the run's file layer: no link followed out of it
        return {
            "matrix.json": fs.atomic_write_json("matrix.json", matrix.to_json()),
            "matrix.md": fs.atomic_write_text("matrix.md", render_markdown(matrix)),
        }


def _matrix_cell(run_dir: Path, plan: Plan, stats: CellStats, records: list[TrialResult]
                 ) -> MatrixCell:
    cell = plan.cell(stats.cell)
    return MatrixCell(stats, tuple(cell.mitigations), cell.environment,
                      mask_env(cell.env),  # never a token (core/secrets.py)
                      cell_timeline(run_dir, [r for r in records if r.cell == stats.cell]))


def cell_timeline(run_dir: Path, records: list[TrialResult]) -> dict[str, Any]:
    """The median of each timeline phase over a cell's finished trials (trial/timeline.py):
    the records carry their timelines, so no result file is read again."""
    from aorta_tui.trial.timeline import cell_medians

    return cell_medians(r.timeline for r in records)


def snapshot_index(run_dir: Path, plan: Plan, records: list[TrialResult],
                   schema_hash: Callable[[dict[str, Any]], str | None]) -> tuple[dict[str, Any], list[str]]:
    """Each environment's snapshot files with their hashes, and a warning where they differ."""
    from aorta_tui.sweep import snapshots

    fs = RunDirFS(run_dir)  # closed when this function returns (its last reference)

    def snapshot_hash(path: Path) -> str | None:
        return snapshots.snapshot_hash(fs, path, schema_hash)

    env_dir = run_dir / "env"
    index: dict[str, Any] = {}
    warnings: list[str] = []
    host = env_dir / "host_env.json"
    if host.is_file():
        index["host_env"] = {"path": "env/host_env.json", "hash": snapshot_hash(host)}
    by_env: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name in sorted({c.environment for c in plan.cells}):
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)
        for path in sorted(env_dir.glob(f"{safe}.json")) + sorted(env_dir.glob(f"{safe}.resume-*.json")):
            by_env[name].append({"path": f"env/{path.name}", "hash": snapshot_hash(path)})
    for name, snaps in by_env.items():
        index[name] = snaps
        hashes = {s["hash"] for s in snaps if s["hash"]}
        if len(hashes) > 1:
            warnings.append(
                f"trials of environment {name!r} ran under different snapshots "
                f"({', '.join(sorted(hashes))}): the run was resumed on a changed machine or image; "
                f"compare them with `aorta-tui env diff {env_dir / snaps[0]['path'].split('/')[-1]} "
                f"{env_dir / snaps[-1]['path'].split('/')[-1]}`"
            )
    return index, warnings


def device_summary(run_dir: Path, records: list[TrialResult]) -> Devices:
    """On which device the trials ran: what each workload reported (``workload_result.device``),
    and the GPUs of the run's host snapshot (``env/host_env.json``), which is all an opaque
    command leaves to go by."""
    from collections import Counter

    reported = Counter(str(r.workload_result.get("device") or "not reported")
                       if isinstance(r.workload_result, dict) else "not reported" for r in records)
    return Devices(dict(sorted(reported.items())), _host_gpus(run_dir / "env" / "host_env.json"))


def _host_gpus(host: Path) -> tuple[str, ...] | None:
    """The GPU names of the run's host snapshot, read through its type (``envsnap.doc``); None
    when there is none or it is damaged: a damaged snapshot must not cost the report, which
    says "unknown" instead (it read a partly damaged one's names by key before the type)."""
    from aorta_tui.core.errors import AortaError
    from aorta_tui.core.inputs import INPUT_LIMITS, load_json_input
    from aorta_tui.envsnap.doc import EnvSnapshot, Field

    if not host.is_file():
        return None
    try:
        snap = EnvSnapshot.from_dict(load_json_input(host, what="snapshot", limit=INPUT_LIMITS["snapshot"]),
                                     where=str(host))
    except AortaError:
        return None
    if snap.gpus is None:
        return None
    names = [gpu.get("name") for gpu in snap.gpus]
    return tuple(str(n.value or "unnamed GPU") if isinstance(n, Field) else "unnamed GPU" for n in names)


def _device_line(d: Devices | None, finished: int) -> str:
    if d is None:
        return "- device: not recorded"
    trials = ", ".join(f"{dev} ({n} of {finished} trials)" for dev, n in d.trials.items()) or "no trial finished"
    gpus = d.host_gpus
    host = ("host snapshot: unknown" if gpus is None else
            "host snapshot: no GPU" if not gpus else f"host snapshot: {len(gpus)} GPU(s), {', '.join(sorted(set(gpus)))}")
    return f"- device: {trials}, as each trial reported it; {host} (env/host_env.json)"


def _confound_line(m: Matrix) -> str:
    t = m.confound_threshold
    if not t or not m.baseline_cell:
        return "- confound: no baseline cell, no check"
    lower, upper = band(float(t))
    return (f"- confound threshold: x{upper:g} either way (mean step time above {upper:.3g}x or below "
            f"{lower:.3g}x the baseline's, and beyond 2 standard errors of the per-trial means)")


def _fmt_iqr(st: dict[str, Any]) -> str:
    if st.get("p25") is None or st.get("p75") is None:
        return "n/a"
    return f"{_fmt_s(st['p25'])} – {_fmt_s(st['p75'])}"


def _fmt_s(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v * 1e3:.3f} ms" if v < 1 else f"{v:.3f} s"


def _within_noise(confound: dict[str, Any]) -> str:
    """``within noise`` with why: the change and the noise band it falls inside."""
    ratio, noise = confound.get("ratio"), confound.get("noise_s")
    if not isinstance(ratio, (int, float)) or not isinstance(noise, (int, float)) or ratio <= 0:
        return "within noise"
    return f"within noise ({change_text(ratio)}; noise ±{_fmt_s(noise)})"


def _fmt_rate(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.0f}%"


def render_markdown(m: Matrix) -> str:
    lines = [
        f"# aorta-tui matrix: {m.ticket} / {m.run_id}",
        "",
        f"- mode: {m.mode}" + (f", workload `{m.workload}`" if m.workload else "")
        + (f", command `{' '.join(m.command)}`" if m.command else ""),
        f"- status: {m.status} ({m.trials_finished}/{m.trials_planned} trials)",
        f"- order: {m.order} (seed {m.seed}); baseline: {m.baseline_cell or 'none'}",
        _device_line(m.devices, m.trials_finished),
        _confound_line(m),
        "",
        "| cell | trials | pass | fail | error | failure rate | step p50 | step IQR (p25 – p75) | n | noise "
        "| step p99 | step mean | source | confound | top detectors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---|---|",
    ]
    lines += [_cell_line(c.stats, m.baseline_cell) for c in m.cells]
    cross = [(c.name, f) for c in m.cells for f in c.stats.cross_trial_failures]
    if cross:
        lines += ["", "## Across trials", ""]
        lines += [f"- **{cell}**: {f['code']}: {f['message']}" for cell, f in cross]
    lines += _failing_lines(m)
    if m.warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in m.warnings]
    if isinstance(m.collectors, dict) and m.collectors:
        from aorta_tui.collect.collectors import markdown_lines

        lines += markdown_lines(m.collectors, m.trials_finished)
    noisy = [(c.name, c.stats.noise) for c in m.cells if c.stats.noise.get("flag")]
    if noisy:
        lines += ["", "## Noise", ""] + [f"- **{cell}**: {n['flag']}: {n['reason']}" for cell, n in noisy]
    return "\n".join(lines + _how_to_read())


def _cell_line(c: CellStats, baseline: str | None) -> str:
    st = c.step_time
    conf = c.confound.get("flag") or ("baseline" if c.cell == baseline else "-")
    if c.confound.get("significant") is False:
        conf = _within_noise(c.confound)
    elif c.confound.get("spread_unknown"):
        conf = "spread unknown"
    dets = ", ".join(f"{d}×{n}" for d, n in c.top_detectors) or "-"
    return (f"| {c.cell} | {c.trials} | {c.passed} | {c.failed} | {c.errored} | "
            f"{_fmt_rate(c.failure_rate)} | {_fmt_s(st.get('p50'))} | {_fmt_iqr(st)} | {c.step_count} | "
            f"{c.noise.get('flag') or '-'} | {_fmt_s(st.get('p99'))} | "
            f"{_fmt_s(st.get('mean'))} | {c.step_time_source} | {conf} | {dets} |")


def _failing_lines(m: Matrix) -> list[str]:
    bad = [t for t in m.trials if t.verdict != "pass"]
    if not bad:
        return []
    lines = ["", "## Failing and erroring trials", ""]
    lines += [f"- `{t.trial_id}`: {t.verdict} ({', '.join(t.detectors) or 'no detector'})"
              f" — `trials/{t.trial_id}/`" for t in bad]
    if m.hint:
        lines += ["", f"Hint: {m.hint}"]
    return lines


def _how_to_read() -> list[str]:
    lines: list[str] = []
    lines += ["", "## How to read this", "",
              "- Step times: `workload` = measured by the workload (device events on a GPU, "
              "`time.perf_counter` on the CPU); `step_time_regex` = parsed from stdout; `trial_wall` = "
              "the whole trial's wall time (probe runs without a step regex).",
              "- `step p50`, `step IQR` and `n`: the median, the interquartile range (p25 – p75) and "
              "the count of the cell's step times, pooled over its trials that did not error.",
              f"- `noise`: `few samples` = fewer than {stats.MIN_SAMPLES} step times; `bimodal` = the "
              f"step times form two groups, each at least {stats.BIMODAL_MIN_SHARE:.0%} of them, "
              f"whose nearest members differ by x{stats.BIMODAL_RATIO:g} or more (the mean and p50 then "
              f"describe neither group); `dispersed` = the IQR exceeds {stats.DISPERSED_REL_IQR:g} x p50. "
              "A noisy cell's figures are not a speed you can compare.",
              "- `confound`: the cell's mean step time against the baseline's, both ways: "
              "`speed (+N%)` slower, `speed (-N%)` faster (`xR` / `x1/R` beyond a factor of 2), "
              "flagged when the ratio is outside the threshold above AND the difference of the "
              "per-trial means exceeds the noise measured from the trials' spread (Welch's t at 95%: "
              "t x the standard error, t = 12.7 with 2 trials a side, about 2 with many); `within "
              "noise` = outside the threshold but not beyond that noise; `spread unknown` = outside "
              "the threshold with fewer than 2 trials a side: no flag, the noise cannot be measured; "
              "`-` = inside the threshold; a cell "
              "that is much faster or slower than the baseline is the mitigation changing the speed, "
              "or the machine's noise: read the `noise` column first.", ""]
    return lines
