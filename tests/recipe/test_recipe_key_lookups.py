"""The validator names a recipe key through the table (keys.spec/specs/path/default_of), so a key
is spelled in keys.KEY_SPECS and looked up everywhere else.

Three checks: every lookup written in aorta_tui/recipe/ resolves (also those only an error path
reaches, which no recipe test may run); validate.py writes no key path of a block itself
(``"stop_after.events"``, ``f"{path}.trials"``), and each path it writes as a literal is a
top-level key of the table; and a default changed in the table is what the loader then loads,
so no copy of it is left in the loader.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from aorta_tui.recipe import keys as K
from aorta_tui.recipe import load_recipe_text
from aorta_tui.recipe.keyspec import TOP, KeySpec
from tests.recipe.key_blocks import with_block

RECIPE = Path(__file__).resolve().parents[2] / "aorta_tui" / "recipe"
VALIDATE = RECIPE / "validate.py"
_LOOKUPS = {"spec", "specs", "path", "default_of"}
_KINDS = {"str": str, "int": int, "float": float, "bool": bool}
# a Validator method's first argument is the path its issue is reported at
_PATH_TAKERS = {"issue", "mapping", "integer", "number", "string", "boolean", "choice",
                "str_list", "env_map", "json_data"}


def _literal(node: ast.expr) -> object:
    """A lookup's argument as written: a string, TOP, a kind (str, float), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return TOP if node.id == "TOP" else _KINDS.get(node.id)
    return None


def _lookups() -> list[tuple[str, str, list[object]]]:
    """``(where, function, arguments)`` of each ``K.spec(...)``-like call under aorta_tui/recipe."""
    out = []
    for path in sorted(RECIPE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "K"
                    and node.func.attr in _LOOKUPS):
                out.append((f"{path.name}:{node.lineno}", node.func.attr,
                            [_literal(a) for a in node.args]))
    return out


def test_every_key_lookup_written_in_the_recipe_package_resolves_in_the_table() -> None:
    found = _lookups()
    assert len(found) >= 40, found  # the walker sees validate.py's lookups
    for where, function, args in found:
        block, names = args[0], args[1:]
        assert block in K.BLOCKS, (where, block)
        if function == "default_of":
            name, kind = names
            if isinstance(name, str):
                assert isinstance(K.default_of(str(block), name, kind), kind), where  # type: ignore[arg-type]
            continue
        for name in names:
            if isinstance(name, str):  # a name held in a variable is one of a loop's, over the table
                assert (str(block), name) in {(s.block, s.name) for s in K.KEY_SPECS}, where
        if function == "path":
            assert block == TOP or block in K.TOP_BLOCKS, where


def _validate_tree() -> ast.AST:
    return ast.parse(VALIDATE.read_text(encoding="utf-8"))


def test_validate_writes_no_path_of_a_blocks_key_itself() -> None:
    dotted = {K.path(s.block, s.name) for s in K.KEY_SPECS if s.block in K.TOP_BLOCKS}
    in_lists = {s.name for s in K.KEY_SPECS if s.block != TOP and s.block not in K.TOP_BLOCKS}
    written = []
    for node in ast.walk(_validate_tree()):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            written += [node.value for d in dotted if re.search(rf"^{re.escape(d)}\b", node.value)]
        if isinstance(node, ast.JoinedStr):  # f"{path}.trials": a key of a cell joined by hand
            for part in node.values:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    head = re.match(r"\.(\w+)", part.value)
                    if head and head.group(1) in in_lists:
                        written.append(part.value)
    assert written == []


def test_each_path_validate_writes_as_a_literal_is_a_top_level_key() -> None:
    """``v.integer("trials", ...)``, ``f"cells[{i}]"``: a top-level key's path is its name."""
    top = {s.name for s in K.specs_of(TOP)}
    paths: list[str] = []
    for node in ast.walk(_validate_tree()):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "v"
                and node.func.attr in _PATH_TAKERS and node.args):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            paths.append(first.value)
        elif (isinstance(first, ast.JoinedStr) and first.values
              and isinstance(first.values[0], ast.Constant)):
            paths.append(str(first.values[0].value).partition("[")[0])
    assert len(paths) >= 20, paths
    assert {p for p in paths if p} <= top, sorted({p for p in paths if p} - top)


# -- a default is the table's: change it there, and the loader follows -------------------------
def _another_value(spec: KeySpec) -> object:
    """A valid value of ``spec`` other than its default."""
    enum = spec.shape.get("enum", []) if isinstance(spec.shape, Mapping) else []
    assert isinstance(enum, list)
    choices = [c for c in enum if c != spec.default and type(c) is type(spec.default)]
    if choices:
        return choices[0]
    if isinstance(spec.default, bool):
        return not spec.default
    if isinstance(spec.default, str):  # a registered name: none is checked without a registry
        return f"{spec.default}-other"
    assert isinstance(spec.default, (int, float)), spec
    return spec.default + 1


# the mode chooses the recipe's shape: another default mode is another recipe
_DEFAULTS = [s for s in K.KEY_SPECS if s.has_default and (s.block, s.name) != (TOP, "mode")]


@pytest.mark.parametrize("spec", _DEFAULTS, ids=lambda s: f"{s.block}.{s.name}")
def test_a_default_changed_in_the_table_is_what_the_loader_loads(
        spec: KeySpec, monkeypatch: pytest.MonkeyPatch) -> None:
    other = _another_value(spec)
    table = {(s.block, s.name): s for s in K.KEY_SPECS}
    table[(spec.block, spec.name)] = replace(spec, default=other)
    monkeypatch.setattr(K, "spec", lambda block, name: table[(block, name)])
    recipe, _ = with_block(spec.block, {}, mode=None if spec.mode == "both" else spec.mode)
    if spec.block == "retain":
        recipe["retain"] = {}
    loaded: Any = load_recipe_text(yaml.safe_dump(recipe))
    holder = {TOP: loaded, "cell": loaded.cells[0] if loaded.cells else None,
              "pattern": loaded.custom_patterns[0] if loaded.custom_patterns else None
              }.get(spec.block) or getattr(loaded, spec.block)
    assert spec.field_name is not None
    assert getattr(holder, spec.field_name) == other
