"""Run under upstream AORTA (PYTHONPATH = its `pip install --target` dir): print, as JSON, the
plan upstream's own loader builds for each recipe given on stdin, or why it refuses it.

stdin: [{"path": ..., "sidecars": [...]}, ...]; stdout: {path: {"cells": [...]} | {"error": ...}}.
Only upstream's public loader and its env-var resolution are used (no run, no GPU).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def plan(path: Path, sidecars: tuple[Path, ...]) -> dict:
    from aorta.triage.recipe import load_recipe
    from aorta.triage.runner import _resolve_cell_env_vars

    recipe = load_recipe(path, sidecar_files=sidecars or None)
    cells = []
    for cell in recipe.cells:
        env = _resolve_cell_env_vars(cell.mitigations, {**recipe.extra_env, **cell.extra_env},
                                     sidecars or None, environment=cell.environment)
        stop = recipe.stop_after
        trials = stop.max_trials if stop is not None else cell.effective_trials(recipe.trials)
        steps = cell.effective_steps(recipe.steps) if recipe.steps is not None else None
        cells.append({"name": cell.name, "mitigations": list(cell.mitigations),
                      "environment": cell.environment, "env": env, "trials": trials,
                      "steps": steps})
    return {"cells": cells}


def sanitizer(path: Path) -> dict | None:
    """Upstream's separate `mode: sanitizer` loader: what it keeps, or why it refuses."""
    from aorta.instrumentation.rocjitsu_sanitizers.recipe import load_sanitizer_recipe

    if "mode: sanitizer" not in path.read_text(errors="replace"):
        return None
    try:
        r = load_sanitizer_recipe(path)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    return {"ticket": r.ticket, "target": r.target, "source_kind": r.source_kind,
            "sanitizers": list(r.sanitizers), "report": r.report_name,
            "timeout_s": r.timeout_seconds}


def main() -> None:
    out = {}
    for item in json.load(sys.stdin):
        try:
            out[item["path"]] = plan(Path(item["path"]), tuple(Path(s) for s in item["sidecars"]))
        except Exception as exc:  # upstream's refusal, whatever its type
            out[item["path"]] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            out[item["path"]]["sanitizer"] = sanitizer(Path(item["path"]))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
