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


def main() -> None:
    out = {}
    for item in json.load(sys.stdin):
        try:
            out[item["path"]] = plan(Path(item["path"]), tuple(Path(s) for s in item["sidecars"]))
        except Exception as exc:  # upstream's refusal, whatever its type
            out[item["path"]] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
