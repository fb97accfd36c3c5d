"""Recipes, schema_version 1: load, validate, resolve, hash (compatible with upstream AORTA).

    recipe = load_recipe("recipes/quickstart.yaml", registry=Registry())
    recipe.cells, recipe.confound.baseline_cell, recipe.where("cells[1].mitigations[0]")
    recipe = with_command(recipe, ["bash", "launch.sh"])      # probe runs
    recipe_hash(recipe), dump_resolved(recipe)

Every problem is a :class:`RecipeError` (exit code 2) naming ``file:line:col``, the key path,
what was expected and the fix; several problems are reported together.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import RecipeError
from aorta_tui.recipe import keys as K
from aorta_tui.recipe.checks import RecipeIssue, RecipeValidationError
from aorta_tui.recipe.condition import Condition, compile_condition
from aorta_tui.recipe.jsonschema import recipe_json_schema
from aorta_tui.recipe.keyspec import TOP
from aorta_tui.recipe.loader import LoadProblem, Marks, parse_yaml_text, read_recipe_file
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


# A front end's check of a triage recipe's workload settings against the workload itself
# (sweep/workload_check.py: it imports the workload, which this layer may not).
WorkloadCheck = Callable[[Recipe], list[RecipeIssue]]


def load_recipe(path: str | Path, *, registry: RegistryView | None = None,
                workload_check: WorkloadCheck | None = None) -> Recipe:
    """Read and validate a recipe file. Raises :class:`RecipeError` (a
    :class:`RecipeValidationError` listing every problem when the file parses).

    ``workload_check``: also run where the recipe has other problems, so that a
    ``workload_config`` typo is reported with them, not only after they are fixed."""
    p = Path(path)
    source = str(p)
    try:
        text = read_recipe_file(p)
    except LoadProblem as exc:
        raise RecipeValidationError([_issue(exc)], source) from None
    return _load(text, source=source, source_path=p, registry=registry,
                 workload_check=workload_check)


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
          registry: RegistryView | None, workload_check: WorkloadCheck | None = None) -> Recipe:
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
    if issues and workload_check is not None:
        issues = issues + _workload_issues_despite(data, marks, source, issues, workload_check)
    if issues or recipe is None:
        raise RecipeValidationError(issues or [RecipeIssue(1, 1, "", "invalid recipe")], source,
                                    more=more)
    return recipe


def _workload_issues_despite(data: object, marks: Marks, source: str, found: list[RecipeIssue],
                             check: WorkloadCheck) -> list[RecipeIssue]:
    """The workload-settings problems of a recipe that has others: checked on the part of it
    they depend on (workload, settings, the cells' settings, at the same key paths), when that
    part is valid by itself; none that repeats a path already reported."""
    if not isinstance(data, dict):
        return []
    mode = data.get(K.spec(TOP, "mode").name)
    if (K.default_of(TOP, "mode", str) if mode is None else mode) != "triage":
        return []
    part: dict[str, Any] = {k: data[k] for k in ("schema_version", "workload", "workload_config",
                                                 "trial_isolation") if k in data}
    part.update(trials=1, steps=1, cells=[])
    written_cells = data.get("cells")
    for i, cell in enumerate(written_cells if isinstance(written_cells, list) else []):
        own = {"name": f"cell-{i}", "mitigations": ["none"]}  # kept in place: same paths
        if isinstance(cell, dict) and "workload_config" in cell:
            own["workload_config"] = cell["workload_config"]
        part["cells"].append(own)
    if not part["cells"]:
        part["cells"] = [{"name": "cell-0", "mitigations": ["none"]}]
    recipe, problems, _ = build_recipe(part, marks, source=source, source_path=None,
                                       registry=None)
    if recipe is None or problems:
        return []
    seen = {i.path for i in found}
    return [i for i in check(recipe) if i.path not in seen]


def _issue(exc: LoadProblem) -> RecipeIssue:
    return RecipeIssue(exc.line, exc.column, exc.path, exc.message, exc.hint)
