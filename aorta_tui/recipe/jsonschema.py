"""A JSON Schema (draft 2020-12) of recipe schema_version 1, for editors.

It describes shapes, types, enums and which keys belong to which mode; the loader checks more
(registry names, regex syntax, condition sandbox, unique cell names). Point an editor's YAML
language server at the output of ``aorta-tui recipe schema``. Every key's shape, description
and default come from the key table (``keys.KEY_SPECS``); this module only assembles them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aorta_tui.recipe import keys as K
from aorta_tui.recipe.keyspec import TOP, BlockRef, KeySpec

SCHEMA_ID = "https://aorta-tui.invalid/schemas/recipe-v1.json"


def recipe_json_schema() -> dict[str, Any]:
    """The schema as a dict (serialise with ``json.dumps``), generated from the key table."""
    top = K.specs_of(TOP)
    triage_only = sorted(K.TRIAGE_KEYS)
    probe_only = sorted(K.PROBE_KEYS)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "aorta-tui recipe (schema_version 1)",
        "description": "A sweep: triage mode runs a workload over cells; probe mode runs a "
                       "command over mitigation_axis x diagnostic_axis. See docs/recipes.md.",
        "type": "object",
        "properties": {s.name: _key_schema(s) for s in top},
        "additionalProperties": False,
        "required": _required(top, "both"),
        # a key of the other mode is refused; each mode has its own required keys
        "if": {"properties": {"mode": {"const": "probe"}}, "required": ["mode"]},
        "then": {"required": _required(top, "probe"),
                 "not": {"anyOf": [{"required": [k]} for k in triage_only]}},
        "else": {"required": _required(top, "triage"),
                 "not": {"anyOf": [{"required": [k]} for k in probe_only]}},
    }


def _required(specs: tuple[KeySpec, ...], mode: str) -> list[str]:
    return [s.name for s in specs if s.required and s.mode == mode]


def _key_schema(spec: KeySpec) -> dict[str, Any]:
    """One key's value: its shape (a block's object where it names one), then its description
    and default."""
    out = _block_schema(spec.shape.block) if isinstance(spec.shape, BlockRef) else {
        k: _render(v) for k, v in spec.shape.items()}
    if spec.description is not None:
        out["description"] = spec.description
    if spec.has_default:
        out["default"] = spec.default
    return out


def _block_schema(name: str) -> dict[str, Any]:
    """A block's object: its keys' schemas, no other key, and its required keys."""
    block = K.BLOCKS[name]
    specs = K.specs_of(name)
    json_type = block.json_type if isinstance(block.json_type, str) else list(block.json_type)
    out: dict[str, Any] = {"type": json_type, "additionalProperties": False,
                           "properties": {s.name: _key_schema(s) for s in specs}}
    if block.description is not None:
        out["description"] = block.description
    required = [s.name for s in specs if s.required]
    if required:
        out["required"] = required
    return out


def _render(value: object) -> object:
    """A fresh copy of a shape's ``value`` (callers may change the schema they get, and the
    table is shared) with every :class:`BlockRef` replaced by its block's object."""
    if isinstance(value, BlockRef):
        return _block_schema(value.block)
    if isinstance(value, Mapping):
        return {k: _render(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_render(v) for v in value]
    return value
