"""What a recipe will do, as plain data: the cells, the variables each sets, the trials.

Used by ``aorta-tui recipe validate`` (text and ``--json``) and usable by the TUI's editor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aorta_tui.core.secrets import mask_env
from aorta_tui.recipe.model import Recipe
from aorta_tui.recipe.resolved import recipe_hash

if TYPE_CHECKING:
    from aorta_tui.registry.registry import Registry


def cell_env(recipe: Recipe, cell_name: str, registry: Registry) -> dict[str, str]:
    """Variables a cell's trials get on top of the parent environment, in precedence order:
    environment < mitigations < recipe extra_env < cell extra_env."""
    from aorta_tui.recipe.checks import mitigation_env
    from aorta_tui.registry.registry import merged_env

    cell = recipe.cell(cell_name)
    env_layer = registry.environment(cell.environment).env
    mits = mitigation_env([registry.mitigation(m) for m in cell.mitigations],
                          where=f"cell {cell.name!r}")
    return merged_env(env_layer, mits, recipe.extra_env, cell.extra_env)


def summarize(recipe: Recipe, registry: Registry) -> dict[str, Any]:
    trials_word = "max_trials" if recipe.stop_after else "trials"
    cells = []
    vendor_notes: dict[str, list[str]] = {}
    for c in recipe.cells:
        n = recipe.stop_after.max_trials if recipe.stop_after else c.effective_trials(recipe)
        cells.append({
            "name": c.name,
            "mitigations": list(c.mitigations),
            "environment": c.environment_name,
            "env": mask_env(cell_env(recipe, c.name, registry)),  # printed: no tokens
            "trials": n,
            "steps": c.effective_steps(recipe),
            "baseline": c.name == recipe.confound.baseline_cell,
        })
        for m in c.mitigations:
            vendor = registry.mitigations[m].vendor
            if vendor in ("rocm", "cuda") and m not in vendor_notes.setdefault(vendor, []):
                vendor_notes[vendor].append(m)
    warnings = []
    for vendor, names in sorted(vendor_notes.items()):
        this, other = ("ROCm", "CUDA") if vendor == "rocm" else ("CUDA", "ROCm")
        warnings.append(f"{', '.join(names)} set {this}-only variables (no effect on {other})")
    from aorta_tui.classify.upstream_ids import no_counterpart_notes

    warnings += no_counterpart_notes(recipe.disable_detectors)
    if recipe.all_collectors():
        from aorta_tui.collect.collectors import availability_notes  # per trial: result.json

        warnings += availability_notes(recipe.all_collectors(), mode=recipe.mode)
    if recipe.redaction is not None:
        warnings.append("redaction is recorded (recipe.resolved.yaml) and applied by "
                        "`aorta-tui bundle RUN_DIR` (docs/bundle.md), not to the run's own files")
    if recipe.stop_after:
        warnings.append(f"stop_after: each cell stops after {recipe.stop_after.events} "
                        f"'{recipe.stop_after.event_verdict}' trials, else after "
                        f"{recipe.stop_after.max_trials} ({trials_word} shown)")
        if any(c.trials is not None for c in recipe.cells):
            warnings.append("stop_after.max_trials replaces the cells' own `trials` (as upstream)")
    return {
        "file": recipe.source,
        "schema_version": recipe.schema_version,
        "mode": recipe.mode,
        "hash": recipe_hash(recipe),
        "ticket": recipe.ticket,
        "workload": recipe.workload,
        "steps": recipe.steps,
        "command": list(recipe.command) if recipe.command else None,
        "order": recipe.order,
        "seed": recipe.seed,
        "baseline_cell": recipe.confound.baseline_cell,
        "baseline_rule": recipe.confound.baseline_rule,
        "confound_threshold": recipe.confound.threshold,
        "total_trials": sum(c["trials"] for c in cells),
        "cells": cells,
        "warnings": warnings,
    }
