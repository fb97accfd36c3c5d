"""The recipe key table (keys.KEY_SPECS) is the one list of keys: every field of the validated
model is filled by a spec and every spec fills a field, the model's enums and defaults are the
table's, and recipe.resolved.yaml writes only keys of the table (issue 36 item 5)."""

from __future__ import annotations

from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from aorta_tui.recipe import check_recipe_text, load_recipe, load_recipe_text, model
from aorta_tui.recipe import keys as K
from aorta_tui.recipe.keyspec import TOP, BlockRef, KeySpec
from aorta_tui.recipe.resolved import canonical
from aorta_tui.registry.registry import Registry
from tests.recipe.key_blocks import with_block

REPO = Path(__file__).resolve().parents[2]

# the dataclass each block is validated into (a pattern's `match` keys are CustomPattern's
# regex and condition); inline_env stays a dict in CellSpec.environment
MODELS: dict[str, type] = {
    TOP: model.Recipe, "cell": model.CellSpec, "confound": model.Confound,
    "stop_after": model.StopAfter, "pattern": model.CustomPattern,
    "match": model.CustomPattern, "retain": model.Retain, "redaction": model.Redaction,
    "trace": model.TraceSpec, "executor": model.ExecutorSpec,
}
# fields no key fills: where the recipe came from, and what the loader derives
NOT_FROM_A_KEY: dict[type, set[str]] = {
    model.Recipe: {"collect_options", "source_path", "source_label", "locations",
                   "key_locations"},
    model.Confound: {"baseline_rule"},
}


def _field_defaults(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(cls):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
    return out


def test_every_block_but_inline_env_is_validated_into_a_model():
    assert set(K.BLOCKS) == set(MODELS) | {"inline_env"}


@pytest.mark.parametrize("cls", sorted(set(MODELS.values()), key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_every_model_field_has_a_spec_and_every_spec_a_field(cls):
    filled = [s.field_name for b, m in MODELS.items() if m is cls for s in K.specs_of(b)
              if s.field_name is not None]
    assert len(filled) == len(set(filled)), filled
    assert set(filled) == {f.name for f in fields(cls)} - NOT_FROM_A_KEY.get(cls, set())


def test_the_keys_that_fill_no_field_of_their_own_are_the_documented_two():
    # disable_detector_tiers merges into disable_detectors; match's keys are CustomPattern's
    assert sorted((s.block, s.name) for s in K.KEY_SPECS if s.field_name is None) == [
        ("pattern", "match"), (TOP, "disable_detector_tiers")]


@pytest.mark.parametrize("spec", [s for s in K.KEY_SPECS if s.has_default and s.block in MODELS],
                         ids=lambda s: f"{s.block}.{s.name}")
def test_a_default_the_schema_names_is_the_models_default(spec: KeySpec):
    assert spec.field_name is not None
    assert _field_defaults(MODELS[spec.block])[spec.field_name] == spec.default


@pytest.mark.parametrize(("literal", "values"), [
    (model.Mode, K.MODES), (model.Order, K.ORDERS), (model.TrialIsolation, K.TRIAL_ISOLATION),
    (model.EnvPassthrough, K.ENV_PASSTHROUGH), (model.OnMatch, K.ON_MATCH),
    (model.Verdict, K.VERDICTS), (model.RetainLevel, K.RETAIN_LEVELS),
    (model.TraceMode, K.TRACE_MODES),
], ids=lambda x: getattr(x, "__name__", None) or str(x)[:20])
def test_the_models_literal_types_are_the_tables_enums(literal, values):
    assert get_args(literal) == values


def _block_refs(shape: object) -> list[str]:
    if isinstance(shape, BlockRef):
        return [shape.block]
    if isinstance(shape, dict):
        return [b for v in shape.values() for b in _block_refs(v)]
    if isinstance(shape, (list, tuple)):
        return [b for v in shape for b in _block_refs(v)]
    return []


def test_each_block_is_named_once_by_a_key_and_key_names_are_unique_per_block():
    refs = [b for s in K.KEY_SPECS for b in _block_refs(s.shape)]
    assert sorted(refs) == sorted(set(K.BLOCKS) - {TOP})
    for block in K.BLOCKS:
        names = [s.name for s in K.specs_of(block)]
        assert names and len(names) == len(set(names)), block
    assert {s.block for s in K.KEY_SPECS} == set(K.BLOCKS)
    assert {s.mode for s in K.KEY_SPECS if s.block != TOP} == {"both"}


def test_the_extensions_are_the_keys_docs_recipes_md_names_as_aorta_tuis():
    # upstream AORTA rejects these as unknown keys (docs/recipes.md, "Extensions")
    assert {"order", "seed", "trace", "policy_axis", "command", "executor",
            "bytecode_cache"} == K.EXTENSION_KEYS
    # the extensions' own blocks hold only extension keys, upstream's blocks none
    assert {s.origin for s in K.KEY_SPECS if s.block in ("trace", "executor")} == {"extension"}
    assert {s.origin for s in K.KEY_SPECS if s.block not in (TOP, "trace", "executor")} == {
        "upstream"}


def _nested_blocks(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = [(b, data[b]) for b in ("confound", "stop_after", "retain", "trace", "executor",
                                  "redaction") if isinstance(data.get(b), dict)]
    out += [("cell", c) for c in data.get("cells", [])]
    out += [("pattern", p) for p in data["custom_patterns"]]
    out += [("match", p["match"]) for p in data["custom_patterns"]]
    return out


# a `mode: sanitizer` recipe has its own loader (collect/sanitizer.py)
RECIPES = sorted(p for p in (REPO / "recipes").rglob("*.yaml")
                 if "\nmode: sanitizer\n" not in p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_the_resolved_form_writes_only_keys_of_the_table(path):
    # the hang probe's mitigations are its sidecar's
    data = canonical(load_recipe(path, registry=Registry(sorted(path.parent.glob("*.json")))))
    assert set(data) <= K.COMMON_KEYS | K.keys_of(TOP, mode=data["mode"])
    for block, mapping in _nested_blocks(data):
        assert set(mapping) <= K.keys_of(block), (block, mapping)


# -- the loader's defaults, ranges and choices are the table's --------------------------------
def _loaded_block(block: str, recipe: model.Recipe) -> object:
    """Where the loader puts ``block``'s values in the validated recipe."""
    if block == TOP:
        return recipe
    if block == "cell":
        return recipe.cells[0]
    return recipe.custom_patterns[0] if block == "pattern" else getattr(recipe, block)


@pytest.mark.parametrize("spec", [s for s in K.KEY_SPECS if s.has_default and s.block in MODELS],
                         ids=lambda s: f"{s.block}.{s.name}")
def test_a_key_left_out_is_loaded_as_the_tables_default(spec: KeySpec):
    recipe, _ = with_block(spec.block, {}, mode=None if spec.mode == "both" else spec.mode)
    loaded = _loaded_block(spec.block, load_recipe_text(yaml.safe_dump(recipe)))
    assert spec.field_name is not None
    assert getattr(loaded, spec.field_name) == spec.default


# the other keys a block needs for one key's value to stand on its own
_BESIDE: dict[str, dict[str, Any]] = {
    "executor": {"kind": "slurm"}, "stop_after": {"events": 1, "max_trials": K.MAX_TRIALS}}


def _issues_at(spec: KeySpec, value: object) -> list[str]:
    recipe, where = with_block(spec.block, {**_BESIDE.get(spec.block, {}), spec.name: value},
                               mode=None if spec.mode == "both" else spec.mode)
    path = f"{where}.{spec.name}" if where else spec.name
    return [i.message for i in check_recipe_text(yaml.safe_dump(recipe)) if i.path == path]


def _edges(shape: dict[str, Any]) -> list[tuple[object, bool]]:
    """Values at and just past each bound of ``shape``, with whether the shape allows them."""
    out: list[tuple[object, bool]] = []
    if "minimum" in shape:
        out += [(shape["minimum"], True), (shape["minimum"] - 1, False)]
    if "exclusiveMinimum" in shape:
        out += [(shape["exclusiveMinimum"], False), (shape["exclusiveMinimum"] + 0.5, True)]
    if "maximum" in shape:
        out += [(shape["maximum"], True), (shape["maximum"] + 1, False)]
    return out


_BOUNDED = [s for s in K.KEY_SPECS if isinstance(s.shape, dict) and _edges(dict(s.shape))]
_CHOICES = [s for s in K.KEY_SPECS if isinstance(s.shape, dict) and "enum" in s.shape
            and (s.block, s.name) != (TOP, "mode")]  # the mode chooses the recipe's shape


@pytest.mark.parametrize("spec", _BOUNDED, ids=lambda s: f"{s.block}.{s.name}")
def test_the_loader_refuses_a_number_exactly_where_the_tables_range_ends(spec: KeySpec):
    for value, allowed in _edges(dict(spec.shape)):
        assert (_issues_at(spec, value) == []) is allowed, (value, _issues_at(spec, value))


@pytest.mark.parametrize("spec", _CHOICES, ids=lambda s: f"{s.block}.{s.name}")
def test_the_loader_accepts_each_choice_of_the_table_and_no_other(spec: KeySpec):
    choices = list(spec.shape["enum"]) if isinstance(spec.shape, dict) else []
    for value in choices:
        assert _issues_at(spec, value) == [], value
    for value in ("bogus_choice", True, False):
        if not any(value is c for c in choices):
            assert _issues_at(spec, value), value


def _mapping_of(block: str, recipe: dict[str, Any]) -> dict[str, Any]:
    """The mapping that holds ``block``'s keys in a recipe from ``with_block``."""
    if block == TOP:
        return recipe
    if block in ("cell", "inline_env"):
        cell = recipe["cells"][0]
        return cell if block == "cell" else cell["environment"]
    if block in ("pattern", "match"):
        pattern = recipe["custom_patterns"][0]
        return pattern if block == "pattern" else pattern["match"]
    return recipe[block]


@pytest.mark.parametrize("spec", [s for s in K.KEY_SPECS if s.required],
                         ids=lambda s: f"{s.block}.{s.name}")
def test_the_loader_requires_each_key_the_table_marks_required(spec: KeySpec):
    # with_block's recipes hold only the keys they need (the schema tests check that the loader
    # accepts them); here each required one left out is refused, named
    recipe, _ = with_block(spec.block, {}, mode=None if spec.mode == "both" else spec.mode)
    del _mapping_of(spec.block, recipe)[spec.name]
    messages = [i.message for i in check_recipe_text(yaml.safe_dump(recipe))]
    assert any(spec.name in m for m in messages), messages
