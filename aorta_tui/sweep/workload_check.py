"""Check a triage recipe's ``workload_config`` against the workload's declared settings.

Upstream resolves workload names when a cell runs, so a recipe loads even where the workload
is not installed. ``aorta-tui recipe validate`` goes one step further where it can: when the
workload imports, each cell's merged ``workload_config`` is checked against the workload's
``config_schema`` and every problem points at the offending key. A workload that is not
available here is a note, not an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import AortaError
from aorta_tui.recipe.checks import RecipeIssue
from aorta_tui.recipe.model import Recipe

if TYPE_CHECKING:
    from aorta_tui.registry.workload import ConfigField, Workload

_PATH = re.compile(r"^(?:unknown key )?((?:cells\[\d+\]\.)?workload_config(?:\.[^\s.:]+)*)")


def workload_issues(recipe: Recipe) -> tuple[list[RecipeIssue], list[str]]:
    """(problems with locations, notes). Empty for probe recipes."""
    if recipe.mode != "triage" or not recipe.workload:
        return [], []
    from aorta_tui.registry.registry import load_workload

    try:
        cls = load_workload(recipe.workload)
    except AortaError as exc:
        return [], [f"workload {recipe.workload!r} is not available here ({exc.message}); "
                    "its settings were not checked, and a run here would stop with this error"]
    # load_workload returns a Workload subclass (it refuses anything else), so the base
    # class's config_schema and launch are always there: no getattr guard
    issues: list[RecipeIssue] = []
    seen: set[str] = set()
    _check(recipe, cls.config_schema, recipe.workload_config, "workload_config", issues, seen)
    for i, cell in enumerate(recipe.cells):
        if cell.workload_config is not None:
            _check(recipe, cls.config_schema, cell.effective_workload_config(recipe),
                   f"cells[{i}].workload_config", issues, seen)
    notes = _config_hooks(recipe, cls, issues)
    if recipe.trial_isolation == "in_process" and not cls.launch.in_process_safe:
        issues.append(_issue(recipe, "trial_isolation",
                             f"workload {recipe.workload!r} does not declare itself safe to run "
                             "in process", "use trial_isolation: process (the default)"))
    return issues, notes


def workload_problems(recipe: Recipe) -> list[RecipeIssue]:
    """The located problems alone (``load_recipe``'s ``workload_check``)."""
    return workload_issues(recipe)[0]


def _config_hooks(recipe: Recipe, cls: type[Workload], issues: list[RecipeIssue]) -> list[str]:
    """A workload's own combination checks (``config_problems``: located errors) and notes
    (``config_notes``: a setting that does less here, and why), once per key. Either hook is
    optional, each on its own (a plugin with one of them crashed asking for the other): the
    Workload base class defines neither, so these getattr guards are the hooks' contract."""
    from aorta_tui.registry.workload import validate_config

    problems_of: Callable[[dict[str, Any]], Iterable[tuple[str, str, str]]] | None = \
        getattr(cls, "config_problems", None)
    notes_of: Callable[[dict[str, Any]], Iterable[tuple[str, str]]] | None = \
        getattr(cls, "config_notes", None)
    notes: list[str] = []
    if issues or (problems_of is None and notes_of is None):
        return notes
    seen: set[str] = set()
    configs = [("workload_config", recipe.workload_config)] + [
        (f"cells[{i}].workload_config", c.effective_workload_config(recipe))
        for i, c in enumerate(recipe.cells) if c.workload_config is not None]
    for base, raw in configs:
        try:
            cfg = validate_config(cls.config_schema, raw, path=base)
        except AortaError:
            continue
        for key, problem, fix in problems_of(cfg) if problems_of else ():
            if (path := _hook_path(recipe, base, key)) not in seen:
                seen.add(path)
                issues.append(_issue(recipe, path, problem, fix))
        for key, note in notes_of(cfg) if notes_of else ():
            if (path := _hook_path(recipe, base, key)) not in seen:
                seen.add(path)
                line, col = recipe.locations.get(path, (0, 0))
                where = f"{recipe.source}:{line}:{col}: " if line else f"{recipe.source}: "
                notes.append(f"{where}{path}: {note}")
    return notes


def _hook_path(recipe: Recipe, base: str, key: str) -> str:
    """The key's path where the recipe spells it (a cell's own config), else the top level's."""
    return f"{base}.{key}" if f"{base}.{key}" in recipe.locations else f"workload_config.{key}"


def _check(recipe: Recipe, schema: tuple[ConfigField, ...], config: dict[str, Any], base: str,
           issues: list[RecipeIssue], seen: set[str]) -> None:
    """Report every bad key: validate, drop the key it complained about, validate again."""
    from aorta_tui.registry.workload import validate_config

    config = dict(config)
    for _ in range(len(config) + 1):
        try:
            validate_config(schema, config, path=base)
            return
        except AortaError as exc:
            match = _PATH.match(exc.message)
            path = match.group(1) if match else base
            top = path[len(base) + 1:].split(".", 1)[0] if path.startswith(base + ".") else ""
            if base != "workload_config" and path not in recipe.locations:
                # the key is inherited from the recipe's workload_config: reported there
                path = "workload_config" + path[len(base):]
            if path not in seen:
                seen.add(path)
                message = exc.message
                if match and message[len(match.group(1)):].startswith(": unknown key "):
                    message = (f"unknown setting {path.rsplit('.', 1)[-1]!r} of workload "
                               f"{recipe.workload!r}")
                elif match and message.startswith(match.group(1)):
                    message = message[len(match.group(1)):].lstrip(": ")
                issues.append(_issue(recipe, path, message, exc.hint, key="unknown" in message))
            if top not in config:
                return
            del config[top]


def _issue(recipe: Recipe, path: str, message: str, hint: str | None, *,
           key: bool = False) -> RecipeIssue:
    from aorta_tui.recipe.loader import parent_path

    if key and path in recipe.key_locations:
        line, col = recipe.key_locations[path]
        return RecipeIssue(line, col, path, message, hint)
    probe = path
    while probe and probe not in recipe.locations:
        probe = parent_path(probe)
    line, col = recipe.locations.get(probe, (1, 1))
    return RecipeIssue(line, col, path, message, hint)
