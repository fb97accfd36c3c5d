"""Recipes, schema_version 1: load, validate, resolve, hash (compatible with upstream AORTA).

    recipe = load_recipe("recipes/quickstart.yaml", registry=Registry())
    recipe.cells, recipe.confound.baseline_cell, recipe.where("cells[1].mitigations[0]")
    recipe = with_command(recipe, ["bash", "launch.sh"])      # probe runs
    recipe_hash(recipe), dump_resolved(recipe)

Every problem is a :class:`RecipeError` (exit code 2) naming ``file:line:col``, the key path,
what was expected and the fix; several problems are reported together.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aorta_tui.core.errors import RecipeError
from aorta_tui.recipe.checks import RecipeIssue, RecipeValidationError
from aorta_tui.recipe.condition import Condition, compile_condition
from aorta_tui.recipe.jsonschema import recipe_json_schema
from aorta_tui.recipe.loader import LoadProblem, parse_yaml_text, read_recipe_file
from aorta_tui.recipe.model import (
    SCHEMA_VERSION,
    CellSpec,
    Confound,
    CustomPattern,
    Recipe,
    Redaction,
    Retain,
    StopAfter,
    TraceSpec,
    condition_variables,
)
from aorta_tui.recipe.resolved import (
    canonical,
    dump_resolved,
    recipe_hash,
    require_command,
    with_command,
)
from aorta_tui.recipe.validate import build_recipe, resolve_baseline

if TYPE_CHECKING:
    from aorta_tui.recipe.checks import RegistryView

__all__ = [
    "SCHEMA_VERSION",
    "CellSpec",
    "Condition",
    "Confound",
    "CustomPattern",
    "Recipe",
    "RecipeError",
    "RecipeIssue",
    "RecipeValidationError",
    "Redaction",
    "Retain",
    "StopAfter",
    "TraceSpec",
    "canonical",
    "check_recipe_text",
    "compile_condition",
    "condition_variables",
    "dump_resolved",
    "load_recipe",
    "load_recipe_text",
    "recipe_hash",
    "recipe_json_schema",
    "require_command",
    "resolve_baseline",
    "with_command",
]


def load_recipe(path: str | Path, *, registry: RegistryView | None = None) -> Recipe:
    """Read and validate a recipe file. Raises :class:`RecipeError` (a
    :class:`RecipeValidationError` listing every problem when the file parses)."""
    p = Path(path)
    source = str(p)
    try:
        text = read_recipe_file(p)
    except LoadProblem as exc:
        raise RecipeValidationError([_issue(exc)], source) from None
    return _load(text, source=source, source_path=p, registry=registry)


def load_recipe_text(text: str, *, source: str = "<recipe>",
                     registry: RegistryView | None = None) -> Recipe:
    """Validate recipe text (the TUI editor's buffer); ``source`` names it in messages."""
    return _load(text, source=source, source_path=None, registry=registry)


def check_recipe_text(text: str, *, source: str = "<recipe>",
                      registry: RegistryView | None = None) -> list[RecipeIssue]:
    """Every problem of ``text`` (empty when valid). Never raises: for validation as you type."""
    try:
        _load(text, source=source, source_path=None, registry=registry)
    except RecipeValidationError as exc:
        return list(exc.issues)
    except RecipeError as exc:
        return [RecipeIssue(0, 0, "", exc.message, exc.hint)]
    except Exception as exc:  # a bug must not take the editor down with it
        return [RecipeIssue(0, 0, "", f"internal error while checking: {type(exc).__name__}: "
                            f"{exc}", "please report this")]
    return []


def _load(text: str, *, source: str, source_path: Path | None,
          registry: RegistryView | None) -> Recipe:
    if not isinstance(text, str):
        raise RecipeValidationError([RecipeIssue(0, 0, "", f"expected recipe text, got "
                                                 f"{type(text).__name__}")], source)
    if source.lower().endswith(".json"):
        # JSON is YAML except that YAML forbids tab indentation; JSON strings cannot hold a
        # raw tab, so every tab here is whitespace and a space keeps the columns.
        text = text.replace("\t", " ")
    try:
        data, marks = parse_yaml_text(text)
    except LoadProblem as exc:
        raise RecipeValidationError([_issue(exc)], source) from None
    if not text.strip() or data is None:
        data = None
    recipe, issues, more = build_recipe(data, marks, source=source, source_path=source_path,
                                        registry=registry)
    if issues or recipe is None:
        raise RecipeValidationError(issues or [RecipeIssue(1, 1, "", "invalid recipe")], source,
                                    more=more)
    return recipe


def _issue(exc: LoadProblem) -> RecipeIssue:
    return RecipeIssue(exc.line, exc.column, exc.path, exc.message, exc.hint)
