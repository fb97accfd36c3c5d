"""``--field a.b.c``: one value from a snapshot, JSON-typed; a wrong path names the nearest keys.

Paths are dotted; list items are ``gpus.0.name`` or ``gpus[0].name``. On a leaf the result is
its value; ``.state``, ``.source``, ``.reason`` after a leaf's path give that attribute. On a
subtree the result is the subtree with every leaf replaced by its value.
"""

from __future__ import annotations

import re

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import Json
from aorta_tui.core.numerals import ascii_digits
from aorta_tui.core.suggest import close_matches
from aorta_tui.envsnap.doc import EnvSnapshot, Field

_META = ("value", "state", "source", "reason", "needs_root", "set", "category")


def split_path(path: str) -> list[str]:
    parts = [p for p in re.split(r"\.|\[(\d+)\]", path.strip()) if p]
    if not parts:
        raise UsageError("--field needs a path such as torch.version or gpus.0.architecture")
    return parts


def values_only(node: object) -> Json:
    """A part of a snapshot (a field, a subtree, the GPUs, a top-level value) with every field
    replaced by its value, keys in the written (sorted) order."""
    if isinstance(node, Field):
        return node.value
    if isinstance(node, dict):
        return {k: values_only(node[k]) for k in sorted(node)}
    if isinstance(node, (list, tuple)):
        return [values_only(v) for v in node]
    assert node is None or isinstance(node, (str, int, float, bool))  # format, schema_version
    return node


def _attribute(leaf: Field, name: str) -> Json:
    """A field's key by the name the file gives it (None: the field does not hold it)."""
    return leaf.to_json().get(name)


def get_field(snapshot: EnvSnapshot, path: str) -> Json:
    node: object = snapshot.top()
    walked: list[str] = []
    parts = split_path(path)
    for i, part in enumerate(parts):
        where = ".".join(walked) or "the top level"
        if isinstance(node, Field):
            if part in _META and i == len(parts) - 1:
                return _attribute(node, part)
            raise UsageError(f"--field {path}: {where} is a field; after it only "
                             f"{', '.join(_META[:4])} may follow")
        if isinstance(node, (list, tuple)):
            if not ascii_digits(part) or int(part) >= len(node):
                raise UsageError(f"--field {path}: {where} is a list of {len(node)} items; "
                                 f"use an index 0..{max(len(node) - 1, 0)}"
                                 if node else f"--field {path}: {where} is an empty list")
            node = node[int(part)]
        elif isinstance(node, dict):
            if part not in node:
                raise UsageError(f"--field {path}: no key {part!r} under {where}",
                                 hint=_nearest(part, sorted(node)))
            node = node[part]
        else:
            raise UsageError(f"--field {path}: {where} is a {type(node).__name__}, not an object")
        walked.append(part)
    return values_only(node)


def _nearest(key: str, keys: list[str]) -> str:
    close = close_matches(key, keys, n=5, cutoff=0.4)
    close += [k for k in keys if key.lower() in k.lower() and k not in close][:5]
    shown = close or sorted(keys)[:12]
    more = "" if close or len(keys) <= 12 else f" (and {len(keys) - 12} more)"
    label = "nearest keys" if close else "keys here"
    return f"{label}: {', '.join(shown)}{more}"
