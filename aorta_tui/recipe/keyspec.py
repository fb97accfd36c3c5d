"""The types of the recipe key table (``keys.py``): one :class:`KeySpec` per key of each block.

A spec holds what every reader of a key needs: the block it belongs to, the mode(s) that allow
it, whether upstream AORTA defines it, the JSON shape of its value (what ``jsonschema.py``
writes), its description and its default. The validator checks more than the shape says
(registry names, regex syntax, conditions); those checks stay in ``validate.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Mode = Literal["both", "triage", "probe"]
Origin = Literal["upstream", "extension"]

# The block of a recipe's top-level keys; every other block is named by the key that holds it.
TOP = "recipe"


class _NoDefault:
    """The default of a key whose schema names none (``None`` is a real default: null)."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault()


@dataclass(frozen=True)
class BlockRef:
    """Where the object schema of a block stands inside a key's shape (the generator puts the
    block's keys there, so a block's key names are written once, in its specs)."""

    block: str


@dataclass(frozen=True)
class Block:
    """A mapping of keys with specs of their own: its JSON type and description."""

    name: str
    json_type: str | tuple[str, ...] = "object"
    description: str | None = None


# A JSON Schema fragment: str keys, JSON values, and BlockRef where a block's object goes.
Shape = Mapping[str, object] | BlockRef


@dataclass(frozen=True)
class KeySpec:
    """One key of one block.

    ``shape`` is the JSON Schema of the value without ``description`` and ``default`` (those
    are fields here, so a test can compare them with the model). ``required`` is per block;
    at the top level a required key of one mode is required in that mode only. ``model_field``
    names the dataclass field the key fills: ``True`` for the key's own name, ``False`` when
    it has none (its value is merged into other fields, said where the spec is written).
    """

    name: str
    shape: Shape
    block: str = TOP
    mode: Mode = "both"
    origin: Origin = "upstream"
    description: str | None = None
    default: object = NO_DEFAULT
    required: bool = False
    model_field: str | bool = True

    @property
    def field_name(self) -> str | None:
        """The model field this key fills, or None when it fills none of its own."""
        if isinstance(self.model_field, str):
            return self.model_field
        return self.name if self.model_field else None

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    def at(self, where: str) -> str:
        """This key's path in a mapping at path ``where`` ("" for the top), as the loader marks
        it (loader.child_path): ``cells[0]`` and ``steps`` make ``cells[0].steps``."""
        return f"{where}.{self.name}" if where else self.name
