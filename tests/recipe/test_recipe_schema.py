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

from aorta_tui.recipe import RecipeError, load_recipe_text, recipe_json_schema
from aorta_tui.recipe import keys as K

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
        p for p in (REPO / "recipes" / "examples").glob("*.yaml")
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
