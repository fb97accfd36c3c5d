"""`aorta-tui recipe ...`: check a recipe, show its plan, print its JSON Schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from aorta_tui.cli.common import check_output_file, cli_command, new_app

app = new_app(
    "Recipes (schema_version 1, compatible with upstream AORTA): validate, resolve, schema.\n\n"
    "Examples:\n\n"
    "  aorta-tui recipe validate recipes/quickstart.yaml\n\n"
    "  aorta-tui recipe validate probe.yaml --json\n\n"
    "  aorta-tui recipe resolve probe.yaml -- bash launch.sh > resolved.yaml\n\n"
    "  aorta-tui recipe schema -o recipe.schema.json"
)

_VALIDATE_HELP = (
    "Check FILE and print its plan: mode, cells with their mitigations and the variables "
    "they set, trials. Every problem is reported with file:line:col, the key and the fix. "
    "Where the recipe's workload is installed, its workload_config is checked too.\n\n"
    "Exit codes: 0 valid; 2 invalid (or unreadable).\n\n"
    "Example: aorta-tui recipe validate recipes/examples/probe-bash.yaml --json"
)


@app.command("validate", help=_VALIDATE_HELP)
@cli_command
def validate(
    file: Path = typer.Argument(..., metavar="FILE", help="Recipe YAML file."),
    json_mode: bool = typer.Option(False, "--json", help="Print the plan (or the problems) as "
                                   "JSON on stdout."),
    mitigations_file: list[Path] = typer.Option([], "--mitigations-file", help="Sidecar JSON "
                                                "of extra mitigations (repeatable)."),
) -> None:
    from aorta_tui.collect.sanitizer import peek_mode
    from aorta_tui.core.errors import RecipeError
    from aorta_tui.recipe import RecipeValidationError, load_recipe
    from aorta_tui.registry.registry import Registry
    from aorta_tui.sweep.plan_summary import summarize
    from aorta_tui.sweep.workload_check import workload_issues, workload_problems

    if peek_mode(file) == "sanitizer":  # upstream's separate loader (collect/sanitizer.py)
        _validate_sanitizer(file, json_mode)
        return
    registry = Registry(mitigations_file)
    try:
        recipe = load_recipe(file, registry=registry, workload_check=workload_problems)
        problems, notes = workload_issues(recipe)
        if problems:
            raise RecipeValidationError(problems, recipe.source)
    except RecipeError as exc:
        if json_mode:
            _print_problems_json(file, exc)
        raise
    summary = summarize(recipe, registry)
    summary["warnings"] += notes
    if json_mode:
        print(json.dumps({"ok": True, **summary}, indent=2))
        return
    _print_summary(summary)


def _validate_sanitizer(file: Path, json_mode: bool) -> None:
    """A ``mode: sanitizer`` recipe: load it as `sweep run` does and print its checks."""
    from aorta_tui.collect.sanitizer import load_sanitizer_recipe, plan_lines, plan_summary
    from aorta_tui.core.errors import RecipeError

    try:
        summary = plan_summary(load_sanitizer_recipe(file))
    except RecipeError as exc:
        if json_mode:
            _print_problems_json(file, exc)
        raise
    if json_mode:
        print(json.dumps({"ok": True, **summary}, indent=2))
    else:
        print("\n".join(plan_lines(summary)))


def _print_problems_json(file: Path, exc: Exception) -> None:
    """`recipe validate --json` of a recipe that does not load: every located issue."""
    issues = [i.as_dict() for i in getattr(exc, "issues", [])] or [
        {"line": 0, "column": 0, "path": "", "message": getattr(exc, "message", str(exc)),
         "hint": getattr(exc, "hint", None)}]
    print(json.dumps({"ok": False, "file": str(file), "issues": issues}, indent=2))


def _print_summary(s: dict[str, Any]) -> None:
    out: list[str] = [f"{s['file']}: valid recipe (schema_version {s['schema_version']}, "
                      f"mode {s['mode']}, hash {s['hash'][:12]})"]
    if s["mode"] == "triage":
        out.append(f"  workload {s['workload']}, {s['steps']} steps per trial")
    else:
        cmd = " ".join(s["command"]) if s["command"] else "(given after `--` at run time)"
        out.append(f"  command: {cmd}")
    n = len(s["cells"])
    out.append(f"  {n} cell{'s' if n != 1 else ''}, {s['total_trials']} trials, order {s['order']} "
               f"(seed {s['seed']}), baseline {s['baseline_cell']} ({s['baseline_rule']})")
    if s.get("ticket"):
        out.append(f"  ticket {s['ticket']}")
    width = max(len(c["name"]) for c in s["cells"])
    for c in s["cells"]:
        mits = ", ".join(c["mitigations"]) or "-"
        env = " ".join(f"{k}={v}" for k, v in c["env"].items()) or "(no variables)"
        out.append(f"  {c['name']:<{width}}  x{c['trials']:<3} [{mits}] env {c['environment']}: "
                   f"{env}")
    for w in s["warnings"]:
        out.append(f"  note: {w}")
    print("\n".join(out))


@app.command("resolve", context_settings={"allow_extra_args": True,
                                          "ignore_unknown_options": True},
             help="Print FILE as recipe.resolved.yaml: defaults filled in, baseline resolved, "
             "cells explicit, plus the command after `--` for probe recipes.\n\n"
             "Example: aorta-tui recipe resolve probe.yaml -- bash launch.sh > resolved.yaml")
@cli_command
def resolve(
    ctx: typer.Context,
    file: Path = typer.Argument(..., metavar="FILE", help="Recipe YAML file."),
    mitigations_file: list[Path] = typer.Option([], "--mitigations-file", help="Sidecar JSON "
                                                "of extra mitigations (repeatable)."),
) -> None:
    from aorta_tui.recipe import dump_resolved, load_recipe, with_command
    from aorta_tui.registry.registry import Registry

    recipe = load_recipe(file, registry=Registry(mitigations_file))
    if ctx.args:
        recipe = with_command(recipe, list(ctx.args))
    sys.stdout.write(dump_resolved(recipe))


@app.command("schema", help="Print the recipe JSON Schema (draft 2020-12) for editors, or "
             "write it to a file.\n\nExample: aorta-tui recipe schema -o recipe.schema.json  "
             "(then point your YAML language server at it)")
@cli_command
def schema(
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the schema here "
                                       "(atomically) instead of stdout."),
) -> None:
    from aorta_tui.recipe import recipe_json_schema

    text = json.dumps(recipe_json_schema(), indent=2) + "\n"
    check_output_file(output)
    if output is None:
        sys.stdout.write(text)
        return
    from aorta_tui.core.atomic import atomic_write_text
    from aorta_tui.store.write_errors import output_write_error

    try:
        atomic_write_text(output, text)
    except OSError as exc:  # a full disk is the machine's (exit 3), a bad path the user's (2)
        raise output_write_error(exc, output, option="--output") from None
    print(f"wrote {output}", file=sys.stderr)
