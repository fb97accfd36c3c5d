"""The canonical form of a recipe: ``recipe.resolved.yaml``, the recipe hash, ``with_command``.

The canonical form holds every value that changes the plan, with defaults filled in and the
baseline resolved, and nothing else (no comments, no key order, no source path). Loading
``dump_resolved(r)`` gives a recipe equal to ``r`` with the same :func:`recipe_hash`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import yaml

from aorta_tui.core.errors import RecipeError
from aorta_tui.core.secrets import mask_env
from aorta_tui.recipe import keys as K
from aorta_tui.recipe.keyspec import TOP
from aorta_tui.recipe.model import CellSpec, CustomPattern, Recipe


def canonical(recipe: Recipe) -> dict[str, Any]:
    """Plain data for ``recipe``, in the order ``recipe.resolved.yaml`` shows it."""
    r = recipe
    out: dict[str, Any] = {"schema_version": r.schema_version, "mode": r.mode,
                           "ticket": r.ticket, "trials": r.trials}
    if r.mode == "triage":
        # Secrets are masked (core/secrets.py): this form is written to recipe.resolved.yaml and
        # hashed, and neither may hold a token. The trial gets the real value from the Recipe.
        out.update(workload=r.workload, steps=r.steps, workload_config=r.workload_config,
                   extra_env=mask_env(r.extra_env), trial_isolation=r.trial_isolation)
    else:
        out.update(mitigation_axis=list(r.mitigation_axis),
                   diagnostic_axis=list(r.diagnostic_axis),
                   command=list(r.command) if r.command is not None else None,
                   env_passthrough_mode=r.env_passthrough_mode,
                   collect_paths=list(r.collect_paths))
        if r.redaction is not None:
            out["redaction"] = {"scrub_env_keys": list(r.redaction.scrub_env_keys),
                                "scrub_paths": r.redaction.scrub_paths,
                                "scrub_ip_addresses": r.redaction.scrub_ip_addresses}
    out.update(
        order=r.order,
        seed=r.seed,
        confound={"threshold": r.confound.threshold, "baseline_cell": r.confound.baseline_cell},
        stop_after=None if r.stop_after is None else {
            "events": r.stop_after.events, "max_trials": r.stop_after.max_trials,
            "event_verdict": r.stop_after.event_verdict},
        timeout_per_trial=r.timeout_per_trial,
        hang_window_sec=r.hang_window_sec,
        hang_grace_period_at_start=r.hang_grace_period_at_start,
        disable_detectors=list(r.disable_detectors),
        retain=None if r.retain is None else {
            "on_fail": r.retain.on_fail, "on_pass": r.retain.on_pass,
            "on_error": r.retain.on_error},
        step_time_regex=r.step_time_regex,
        custom_patterns=[_pattern(p) for p in r.custom_patterns],
        trace=None if r.trace is None else {"probes": list(r.trace.probes),
                                            "mode": r.trace.mode},
        policy_axis=list(r.policy_axis),
    )
    # absent when the default (the key table's): older resolved files stay identical, and
    # loading the file back fills the same default in
    if r.executor.kind != K.default_of("executor", "kind", str):
        out["executor"] = r.executor.to_dict()
    # collectors and the bytecode cache: absent when unset, so older files and hashes stay the same
    if r.collect:
        out["collect"] = _collectors(r.collect, r.collect_options)
    if r.bytecode_cache != K.default_of(TOP, "bytecode_cache", str):
        out["bytecode_cache"] = r.bytecode_cache
    if r.mode == "triage":
        out["cells"] = [_cell(c) for c in r.cells]
    return out


def _collectors(names: tuple[str, ...], options: dict[str, dict[str, str]]) -> list[str] | dict[str, Any]:
    """Upstream's ``collect:`` as the loader reads it: names, or name -> options when any has some."""
    if not options:
        return list(names)
    return {n: dict(options[n]) if n in options else None for n in names}


def _pattern(p: CustomPattern) -> dict[str, Any]:
    match: dict[str, Any] = {"regex": p.regex}
    if p.condition is not None:
        match["condition"] = p.condition
    return {"id": p.id, "match": match, "on_match": p.on_match,
            "required_for_pass": p.required_for_pass}


def _cell(c: CellSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"name": c.name, "mitigations": list(c.mitigations),
                           "environment": c.environment if isinstance(c.environment, str)
                           else {"docker": c.environment["docker"],
                                 "env": mask_env(c.environment.get("env") or {})},
                           "extra_env": mask_env(c.extra_env)}
    if c.trials is not None:
        out["trials"] = c.trials
    if c.steps is not None:
        out["steps"] = c.steps
    if c.workload_config is not None:
        out["workload_config"] = c.workload_config
    if c.collect is not None:  # a cell's own collectors replace the recipe's ([]: none here)
        out["collect"] = list(c.collect)
    return out


def recipe_hash(recipe: Recipe) -> str:
    """sha256 of the canonical form plus the generated cells (hex)."""
    data = canonical(recipe)
    data.pop("executor", None)  # where trials run changes no trial: `--executor` on a resume is fine
    data.pop("bytecode_cache", None)  # how fast imports are changes no trial either
    data["cells"] = [_cell(c) for c in recipe.cells]
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def dump_resolved(recipe: Recipe) -> str:
    """``recipe.resolved.yaml``: every default filled in, cells explicit, loadable again."""
    header = [
        "# recipe.resolved.yaml, written by aorta-tui: every default filled in, the baseline",
        "# resolved, cells explicit. `aorta-tui --batch` on this file reproduces the same plan.",
        f"# recipe hash: {recipe_hash(recipe)}",
    ]
    if recipe.source_path is not None:
        header.append(f"# from: {recipe.source_path}")
    body = yaml.safe_dump(canonical(recipe), sort_keys=False, allow_unicode=True,
                          default_flow_style=False, width=100)
    text = "\n".join(header) + "\n" + body
    if recipe.mode == "probe":
        lines = ["# cells (mitigation_axis x diagnostic_axis; `none` adds nothing):"]
        for c in recipe.cells:
            lines.append(f"#   {c.name}: mitigations [{', '.join(c.mitigations)}]")
        text += "\n".join(lines) + "\n"
    return text


def with_command(recipe: Recipe, argv: Sequence[str]) -> Recipe:
    """The probe recipe with the command to run (the words after ``--``)."""
    words = list(argv)
    if recipe.mode != "probe":
        raise RecipeError(
            f"a command was given ({' '.join(words)[:80]}), but this recipe is `mode: "
            f"{recipe.mode}`: it runs its workload, not a command",
            hint="drop the words after `--`, or use a `mode: probe` recipe",
            location=recipe.where("mode"))
    if not words:
        raise RecipeError("the command after `--` is empty",
                          hint="write the command after `--`, e.g. `-- bash launch.sh`")
    bad = [w for w in words if not isinstance(w, str) or "\x00" in w]
    if bad:
        raise RecipeError(f"the command contains invalid words: {bad[:3]!r}",
                          hint="each word must be text without NUL characters")
    return replace(recipe, command=tuple(words))


def require_command(recipe: Recipe) -> tuple[str, ...]:
    """The probe recipe's command, or a located error saying how to give one."""
    if recipe.mode == "probe" and recipe.command is None:
        raise RecipeError(
            "this is a `mode: probe` recipe, but no command was given",
            hint="put the command to probe after `--`, e.g. "
            "`aorta-tui --batch recipe.yaml -- bash launch.sh`",
            location=recipe.where("mode"))
    return recipe.command or ()
