"""The published JSON Schema accepts every recipe the loader accepts (upstream's, the
examples, generated ones) and rejects the obvious mistakes."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.recipe import RecipeError, check_recipe_text, load_recipe_text, recipe_json_schema
from aorta_tui.recipe import keys as K
from aorta_tui.recipe.keyspec import BlockRef
from tests.recipe.key_blocks import MODES_OF, with_block

REPO = Path(__file__).resolve().parents[2]


# -- a tiny draft 2020-12 validator: the keywords our schema uses ----------------------------
def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    return {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
    }[name](value)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def errors(schema: dict[str, Any], value: Any, path: str = "$") -> list[str]:
    out: list[str] = []
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_is_type(value, t) for t in names):
            return [f"{path}: not {names}"]
    if "const" in schema and not _same(value, schema["const"]):
        out.append(f"{path}: != const")
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        out.append(f"{path}: not in enum")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: < minimum")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: > maximum")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            out.append(f"{path}: <= exclusiveMinimum")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            out.append(f"{path}: too short")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{path}: pattern")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: too few items")
        if schema.get("uniqueItems") and len({json.dumps(v) for v in value}) != len(value):
            out.append(f"{path}: items not unique")
        if "items" in schema:
            for i, v in enumerate(value):
                out += errors(schema["items"], v, f"{path}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in value:
                out.append(f"{path}: missing {k}")
        for k, v in value.items():
            if "propertyNames" in schema:
                out += errors(schema["propertyNames"], k, f"{path}.<key {k}>")
            if k in props:
                out += errors(props[k], v, f"{path}.{k}")
            elif schema.get("additionalProperties") is False:
                out.append(f"{path}: extra key {k}")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += errors(schema["additionalProperties"], v, f"{path}.{k}")
    if "anyOf" in schema and not any(not errors(s, value, path) for s in schema["anyOf"]):
        out.append(f"{path}: matches none of anyOf")
    if "not" in schema and not errors(schema["not"], value, path):
        out.append(f"{path}: matches not")
    if "if" in schema:
        branch = "then" if not errors(schema["if"], value, path) else "else"
        if branch in schema:
            out += errors(schema[branch], value, path)
    return out


SCHEMA = recipe_json_schema()
try:
    import jsonschema as _jsonschema

    JSONSCHEMA: Any = _jsonschema.Draft202012Validator(SCHEMA)
except ImportError:  # optional: the tiny validator above is always used
    JSONSCHEMA = None


def _recipe_files() -> list[Path]:
    # a `mode: sanitizer` recipe has its own schema and loader (collect/sanitizer.py)
    return sorted((REPO / "tests" / "fixtures" / "upstream-recipes").glob("*.yaml")) + sorted(
        p for p in (REPO / "recipes").rglob("*.yaml")
        if "\nmode: sanitizer\n" not in p.read_text(encoding="utf-8"))


def test_schema_is_draft_2020_12_and_covers_every_key():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(SCHEMA["properties"]) == set(K.ALL_TOP_KEYS)
    json.dumps(SCHEMA)  # serialisable
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", _recipe_files(), ids=lambda p: p.name)
def test_upstream_recipes_and_examples_satisfy_the_schema(path):
    data = yaml.safe_load(path.read_text())
    assert errors(SCHEMA, data) == []
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.Draft202012Validator(SCHEMA).validate(data)


TRIAGE = {"schema_version": 1, "workload": "w", "trials": 1, "steps": 1,
          "cells": [{"name": "a", "mitigations": ["none"]}]}
PROBE = {"schema_version": 1, "mode": "probe", "trials": 1, "mitigation_axis": ["none"],
         "diagnostic_axis": ["none"]}


@pytest.mark.parametrize("base, change", [
    (TRIAGE, {"trails": 3}),
    (TRIAGE, {"trials": True}),
    (TRIAGE, {"trials": 0}),
    (TRIAGE, {"schema_version": 2}),
    (TRIAGE, {"mitigation_axis": ["none"]}),
    (PROBE, {"cells": []}),
    (PROBE, {"mitigation_axis": []}),
    (TRIAGE, {"cells": [{"name": "../x", "mitigations": ["none"]}]}),
    (TRIAGE, {"cells": [{"name": "a", "mitigations": ["none"], "bogus": 1}]}),
    (TRIAGE, {"extra_env": {"A": 1}}),
    (TRIAGE, {"order": "shuffled"}),
    (TRIAGE, {"workload_config": {"steps": 3}}),
    (PROBE, {"custom_patterns": [{"id": "x", "match": {}}]}),
])
def test_schema_rejects_common_mistakes(base, change):
    data = {**copy.deepcopy(base), **change}
    assert errors(SCHEMA, data), data
    if JSONSCHEMA is not None:
        assert not JSONSCHEMA.is_valid(data)
    with pytest.raises(RecipeError):
        load_recipe_text(yaml.safe_dump(data))


def _mutations():
    seeds = [yaml.safe_load(p.read_text()) for p in _recipe_files()]
    leaf = st.none() | st.booleans() | st.integers(-2, 5) | st.floats(0.1, 3) | st.sampled_from(
        ["none", "probe", "triage", "x", "tier2:hang", "fail", "events"]) | st.lists(
        st.sampled_from(["none", "a"]), max_size=2)

    @st.composite
    def mutated(draw):
        data = copy.deepcopy(draw(st.sampled_from(seeds)))
        key = draw(st.sampled_from(sorted(K.ALL_TOP_KEYS)))
        if draw(st.booleans()) and key in data:
            del data[key]
        else:
            data[key] = draw(leaf)
        return data

    return mutated()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_whatever_the_loader_accepts_the_schema_accepts(data):
    mine = errors(SCHEMA, data)
    if JSONSCHEMA is not None:  # the tiny validator agrees with the reference implementation
        assert (mine == []) == JSONSCHEMA.is_valid(data), (mine, data)
    try:
        load_recipe_text(yaml.safe_dump(data))
    except RecipeError:
        return
    assert mine == [], data


def test_docs_describe_every_key():
    text = (REPO / "docs" / "recipes.md").read_text()
    for key in sorted(K.ALL_TOP_KEYS | K.CELL_KEYS):
        assert f"`{key}`" in text, key


# -- unknown keys: the schema and the loader refuse the same ones, in every block ------------
def _unknown_key_paths(recipe: dict[str, Any]) -> list[str]:
    issues = check_recipe_text(yaml.safe_dump(recipe))
    assert not [i for i in issues if i.message.startswith("internal error")], issues
    return [i.path for i in issues if i.message.startswith("unknown key")]


@pytest.mark.parametrize("block", sorted(K.BLOCKS))
def test_every_block_refuses_an_unknown_key_in_the_schema_and_the_loader(block):
    good, where = with_block(block, {})
    assert errors(SCHEMA, good) == [] and check_recipe_text(yaml.safe_dump(good)) == []
    bad, _ = with_block(block, {"bogus_key": 1})
    assert errors(SCHEMA, bad), bad
    if JSONSCHEMA is not None:
        assert JSONSCHEMA.is_valid(good) and not JSONSCHEMA.is_valid(bad)
    assert _unknown_key_paths(bad) == [f"{where}.bogus_key" if where else "bogus_key"]


def _value_of(shape: Any) -> st.SearchStrategy[Any]:
    """Values of a key's JSON shape (a shape holding a block is left to the block's test)."""
    if "const" in shape:
        return st.just(shape["const"])
    if "enum" in shape:
        return st.sampled_from(shape["enum"])
    if "anyOf" in shape:
        return st.one_of([_value_of(s) for s in shape["anyOf"]])
    types = shape["type"] if isinstance(shape["type"], list) else [shape["type"]]
    return st.one_of([_typed_value(shape, t) for t in types])


def _typed_value(shape: dict[str, Any], json_type: str) -> st.SearchStrategy[Any]:
    if json_type == "integer":
        return st.integers(shape.get("minimum"), shape.get("maximum"))
    if json_type == "number":
        low = shape.get("minimum", shape.get("exclusiveMinimum"))
        return st.floats(low, shape.get("maximum"), exclude_min="exclusiveMinimum" in shape)
    if json_type == "string":
        text = (st.from_regex(shape["pattern"], fullmatch=True) if "pattern" in shape
                else st.text("abc_ -.:*", min_size=shape.get("minLength", 0), max_size=6))
        banned = shape.get("not", {}).get("enum", [])
        return text.filter(lambda v: v not in banned)
    if json_type == "array":
        return st.lists(_value_of(shape["items"]), min_size=shape.get("minItems", 0),
                        max_size=3, unique_by=json.dumps if shape.get("uniqueItems") else None)
    return {"boolean": st.booleans(), "null": st.none(), "object": st.just({})}[json_type]


def _holds_a_block(shape: Any) -> bool:
    if isinstance(shape, BlockRef):
        return True
    items = shape.values() if isinstance(shape, dict) else shape if isinstance(
        shape, (list, tuple)) else ()
    return any(_holds_a_block(v) for v in items)


_STRUCTURAL = {"schema_version", "mode"}  # they choose the recipe's shape, not a value in it
_KNOWN_NAMES = {s.name for s in K.KEY_SPECS} | set(K.UNSUPPORTED_UPSTREAM)


@st.composite
def _recipes_of_known_keys(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], str]:
    block = draw(st.sampled_from(sorted(K.BLOCKS)))
    mode = draw(st.sampled_from(MODES_OF.get(block, K.MODES)))
    specs = [s for s in K.specs_of(block) if s.mode in ("both", mode)
             and s.name not in _STRUCTURAL and not _holds_a_block(s.shape)]
    chosen = draw(st.lists(st.sampled_from(specs), unique_by=lambda s: s.name)) if specs else []
    values = {s.name: draw(_value_of(s.shape)) for s in chosen}
    good, where = with_block(block, values, mode=mode)
    unknown = draw(st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
        lambda k: k not in _KNOWN_NAMES))
    bad, _ = with_block(block, {**values, unknown: draw(st.integers(0, 3))}, mode=mode)
    return good, bad, f"{where}.{unknown}" if where else unknown


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_recipes_of_known_keys())
def test_for_known_keys_with_values_of_their_shape_schema_and_loader_agree_on_unknown_keys(case):
    good, bad, unknown_path = case
    assert errors(SCHEMA, good) == [], good  # values of each spec's shape satisfy the schema
    assert _unknown_key_paths(good) == []
    assert errors(SCHEMA, bad), bad
    if JSONSCHEMA is not None:
        assert JSONSCHEMA.is_valid(good) and not JSONSCHEMA.is_valid(bad), bad
    assert _unknown_key_paths(bad) == [unknown_path]
