"""The snapshot's shape: walking its leaves, validating it, loading it from a file, hashing it.

Top level::

    {"format": "aorta-tui-envsnap", "schema_version": 1,
     "probe": {...}, "host": {...}, "gpus": [{...}, ...], "driver": {...}, "cuda": {...},
     "rocm": {...}, "torch": {...}, "python": {...}, "env_vars": {...}}

Every section is a tree of dicts (and the ``gpus`` list) whose leaves are the dicts described
in ``fields.py``. ``schema.json`` next to this file is the JSON Schema of the same shape.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.envsnap.fields import STATES, is_leaf

FORMAT = "aorta-tui-envsnap"
SUPPORTED_SCHEMA_VERSIONS = (1,)
SECTIONS = ("probe", "host", "gpus", "driver", "cuda", "rocm", "torch", "python", "env_vars")


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def iter_leaves(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every leaf with its path (``host.kernel_release``, ``gpus[0].name``), in key order."""
    if is_leaf(node):
        yield path, node
    elif isinstance(node, dict):
        for key in node:
            if path == "" and key in ("format", "schema_version"):
                continue
            yield from iter_leaves(node[key], join(path, key))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from iter_leaves(item, join(path, i))


def section_of(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


def validate(snapshot: Any, where: str = "snapshot") -> None:
    """Raise UsageError naming the first thing that does not match the schema."""
    if not isinstance(snapshot, dict):
        raise UsageError(f"{where}: expected a JSON object, found {type(snapshot).__name__}",
                         hint="pass a file written by `aorta-tui env probe`")
    if snapshot.get("format") != FORMAT:
        raise UsageError(f"{where}: not an aorta-tui snapshot (format is {snapshot.get('format')!r})",
                         hint="pass a file written by `aorta-tui env probe` or upstream `aorta env probe`")
    version = snapshot.get("schema_version")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise UsageError(
            f"{where}: unknown schema_version {version!r} (this aorta-tui reads "
            f"{', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))})",
            hint="capture the snapshot again with this version, or upgrade aorta-tui")
    for key in snapshot:
        if key not in SECTIONS and key not in ("format", "schema_version"):
            raise UsageError(f"{where}: unknown top-level key {key!r}",
                             hint=f"the sections are: {', '.join(SECTIONS)}")
    if not isinstance(snapshot.get("gpus", []), list):
        raise UsageError(f"{where}: 'gpus' must be a list")
    for path, leaf in iter_leaves(snapshot):
        if leaf["state"] not in STATES:
            raise UsageError(f"{where}: {path}: state {leaf['state']!r} is not one of {', '.join(STATES)}")
        if leaf["state"] != "ok" and not leaf.get("reason"):
            raise UsageError(f"{where}: {path}: state {leaf['state']!r} without a reason")
    _check_no_stray_values(snapshot, "", where)


def _check_no_stray_values(node: Any, path: str, where: str) -> None:
    if is_leaf(node):
        return
    if isinstance(node, dict):
        for key, child in node.items():
            if path == "" and key in ("format", "schema_version"):
                continue
            if not isinstance(child, (dict, list)):
                raise UsageError(f"{where}: {join(path, key)}: expected a field object "
                                 f"{{value, state, source}}, found a bare {type(child).__name__}")
            _check_no_stray_values(child, join(path, key), where)
    elif isinstance(node, list):
        for i, child in enumerate(node):
            _check_no_stray_values(child, join(path, i), where)


def read_json_file(path: str | os.PathLike[str]) -> Any:
    p = os.fspath(path)
    if os.path.isdir(p):
        raise UsageError(f"{p} is a directory, not a snapshot file",
                         hint="pass the env.json inside it, e.g. " + os.path.join(p, "env.json"))
    try:
        with open(p, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise UsageError(f"{p}: no such file", hint="check the path; `aorta-tui env probe -o FILE` writes one") from None
    except OSError as exc:
        raise UsageError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if not raw.strip():
        raise UsageError(f"{p}: the file is empty", hint="capture it again with `aorta-tui env probe -o FILE`")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{p}: not UTF-8 text (byte {exc.start})", hint="pass a JSON snapshot") from None
    except json.JSONDecodeError as exc:
        truncated = _ends_inside_a_value(raw.decode("utf-8", "replace"))
        what = "truncated JSON (the file ends early)" if truncated else f"not valid JSON: {exc.msg}"
        raise UsageError(f"{p}:{exc.lineno}:{exc.colno}: {what}",
                         hint="capture the snapshot again; writes by aorta-tui are atomic") from None


def _ends_inside_a_value(text: str) -> bool:
    """True when the text stops inside a string, object or array: a cut-off file."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0


def load_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load an aorta-tui snapshot or an upstream AORTA env.json (schema 1.x).

    An upstream file is returned as is (its ``schema_version`` is a ``"1.N"`` string); use
    ``upstream.is_upstream`` to tell them apart.
    """
    from aorta_tui.envsnap import upstream

    data = read_json_file(path)
    where = os.fspath(path)
    if isinstance(data, dict) and data.get("format") != FORMAT and upstream.is_upstream(data):
        upstream.check_version(data, where)
        return data
    if isinstance(data, dict) and "format" not in data and "schema_version" in data:
        raise UsageError(
            f"{where}: unknown snapshot schema_version {data.get('schema_version')!r}",
            hint="aorta-tui reads its own snapshots (format aorta-tui-envsnap, schema 1) and "
                 "upstream AORTA env.json files with schema 1.x")
    validate(data, where)
    return data


def snapshot_hash(snapshot: dict[str, Any]) -> str:
    """Short sha256 over the non-volatile leaves' (path, state, value): equal environments hash equal."""
    from aorta_tui.envsnap.rules import is_volatile

    h = hashlib.sha256()
    for path, leaf in iter_leaves(snapshot):
        if is_volatile(path):
            continue
        h.update(json.dumps([path, leaf["state"], leaf["value"]], sort_keys=True,
                            default=str).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]
