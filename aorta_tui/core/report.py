"""``matrix.json`` and ``matrix.md``: the sweep's result, written atomically."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from aorta_tui import __version__
from aorta_tui.core.aggregate import CellStats, TrialRecord
from aorta_tui.core.atomic import atomic_write_json, atomic_write_text
from aorta_tui.core.plan import Plan
from aorta_tui.core.secrets import mask_env

MATRIX_SCHEMA_VERSION = 1


def write_reports(
    run_dir: Path,
    recipe: Any,
    plan: Plan,
    cells: list[CellStats],
    records: list[TrialRecord],
    *,
    status: str,
    hint: str = "",
) -> dict[str, Path]:
    snapshots, warnings = snapshot_index(run_dir, plan, records)
    matrix = {
        "schema_version": MATRIX_SCHEMA_VERSION,
        "aorta_tui_version": __version__,
        "generated_at": time.time(),
        "run_dir": str(run_dir),
        "run_id": run_dir.name,
        "ticket": recipe.ticket,
        "mode": recipe.mode,
        "workload": recipe.workload if recipe.mode == "triage" else None,
        "command": list(recipe.command or []),
        "status": status,
        "trials_planned": len(plan.trials),
        "trials_finished": len(records),
        "order": plan.order,
        "seed": plan.seed,
        "baseline_cell": plan.baseline_cell,
        "confound_threshold": recipe.confound.threshold if recipe.confound else None,
        "cells": [
            {**s.to_dict(), "mitigations": list(plan.cell(s.cell).mitigations),
             "environment": plan.cell(s.cell).environment,
             "env": mask_env(plan.cell(s.cell).env)}  # never a token (core/secrets.py)
            for s in cells
        ],
        "trials": [
            {"trial_id": r.trial_id, "cell": r.cell, "trial": r.trial, "verdict": r.verdict,
             "detectors": r.detectors, "wall_s": r.wall_s}
            for r in sorted(records, key=lambda r: (r.cell, r.trial))
        ],
        "snapshots": snapshots,
        "warnings": warnings,
        "hint": hint,
    }
    out = {
        "matrix.json": atomic_write_json(run_dir / "matrix.json", matrix),
        "matrix.md": atomic_write_text(run_dir / "matrix.md", render_markdown(matrix)),
    }
    return out


def snapshot_index(run_dir: Path, plan: Plan, records: list[TrialRecord]) -> tuple[dict[str, Any], list[str]]:
    """Each environment's snapshot files with their hashes, and a warning where they differ."""
    from aorta_tui.core.snapshots import snapshot_hash

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


def _fmt_s(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v * 1e3:.3f} ms" if v < 1 else f"{v:.3f} s"


def _fmt_rate(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.0f}%"


def render_markdown(m: dict[str, Any]) -> str:
    lines = [
        f"# aorta-tui matrix: {m['ticket']} / {m['run_id']}",
        "",
        f"- mode: {m['mode']}" + (f", workload `{m['workload']}`" if m["workload"] else "")
        + (f", command `{' '.join(m['command'])}`" if m["command"] else ""),
        f"- status: {m['status']} ({m['trials_finished']}/{m['trials_planned']} trials)",
        f"- order: {m['order']} (seed {m['seed']}); baseline: {m['baseline_cell'] or 'none'}",
        "",
        "| cell | trials | pass | fail | error | failure rate | step p50 | step p99 | step mean | source | confound | top detectors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for c in m["cells"]:
        st = c["step_time_s"]
        conf = c["confound"].get("flag") or ("baseline" if c["cell"] == m["baseline_cell"] else "-")
        if c["confound"].get("significant") is False:
            conf = "within noise"
        dets = ", ".join(f"{d['id']}×{d['count']}" for d in c["top_detectors"]) or "-"
        lines.append(
            f"| {c['cell']} | {c['trials']} | {c['passed']} | {c['failed']} | {c['errored']} | "
            f"{_fmt_rate(c['failure_rate'])} | {_fmt_s(st['p50'])} | {_fmt_s(st['p99'])} | "
            f"{_fmt_s(st['mean'])} | {c['step_time_source']} | {conf} | {dets} |"
        )
    cross = [(c["cell"], f) for c in m["cells"] for f in c.get("cross_trial_failures", [])]
    if cross:
        lines += ["", "## Across trials", ""]
        lines += [f"- **{cell}**: {f['code']}: {f['message']}" for cell, f in cross]
    bad = [t for t in m["trials"] if t["verdict"] != "pass"]
    if bad:
        lines += ["", "## Failing and erroring trials", ""]
        for t in bad:
            lines.append(f"- `{t['trial_id']}`: {t['verdict']} ({', '.join(t['detectors']) or 'no detector'})"
                         f" — `trials/{t['trial_id']}/`")
        if m.get("hint"):
            lines += ["", f"Hint: {m['hint']}"]
    if m["warnings"]:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in m["warnings"]]
    lines += ["", "Step times: `workload` = measured by the workload (device events on a GPU); "
              "`step_time_regex` = parsed from stdout; `trial_wall` = the whole trial's wall time "
              "(probe runs without a step regex).", ""]
    return "\n".join(lines)
