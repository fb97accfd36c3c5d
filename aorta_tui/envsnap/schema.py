"""The snapshot's shape: walking its leaves, validating it, loading it from a file, hashing it.

Top level::

    {"format": "aorta-tui-envsnap", "schema_version": 1,
     "probe": {...}, "host": {...}, "gpus": [{...}, ...], "driver": {...}, "cuda": {...},
     "rocm": {...}, "torch": {...}, "python": {...}, "env_vars": {...}}

Every section is a tree of dicts (and the ``gpus`` list) whose leaves are the dicts described
in ``fields.py``. ``schema.json`` next to this file is the JSON Schema of the same shape.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, json_type_name, load_json_input
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
    _check_sections(snapshot, where)
    for path, leaf in iter_leaves(snapshot):
        if leaf["state"] not in STATES:
            raise UsageError(f"{where}: {path}: state {leaf['state']!r} is not one of {', '.join(STATES)}")
        if leaf["state"] != "ok" and not leaf.get("reason"):
            raise UsageError(f"{where}: {path}: state {leaf['state']!r} without a reason")
    _check_no_stray_values(snapshot, "", where)


def _check_sections(snapshot: dict[str, Any], where: str) -> None:
    """Every section an object and ``gpus`` an array of objects: the shape readers index into."""
    for key in SECTIONS:
        if key not in snapshot:
            continue
        node = snapshot[key]
        if key == "gpus":
            if not isinstance(node, list):
                raise UsageError(f"{where}: gpus: expected an array of GPU objects, found "
                                 f"{json_type_name(node)}", hint=_HINT)
            for i, gpu in enumerate(node):
                if not isinstance(gpu, dict) or is_leaf(gpu):
                    raise UsageError(f"{where}: gpus[{i}]: expected a GPU object of fields, "
                                     f"found {json_type_name(gpu)}", hint=_HINT)
        elif not isinstance(node, dict) or is_leaf(node):
            raise UsageError(f"{where}: {key}: expected an object of fields, found "
                             f"{'a single field' if is_leaf(node) else json_type_name(node)}",
                             hint=_HINT)


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


_HINT = "pass a file written by `aorta-tui env probe -o FILE` (or upstream `aorta env probe`)"


def read_json_file(path: str | os.PathLike[str]) -> Any:
    """The parsed JSON of a snapshot file: bounded, regular files only, errors located."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise UsageError(f"{p} is a directory, not a snapshot file",
                         hint="pass the env.json inside it, e.g. " + os.path.join(p, "env.json"))
    return load_json_input(p, what="snapshot", limit=INPUT_LIMITS["snapshot"], hint=_HINT)


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
        _check_upstream(data, where)
        return data
    if isinstance(data, dict) and (what := other_kind(data)) is not None:
        raise UsageError(f"{where} is {what[0]}, not an environment snapshot",
                         hint=f"{what[1]}; env diff compares two files written by "
                              "`aorta-tui env probe -o FILE`")
    if isinstance(data, dict) and "format" not in data and "schema_version" in data:
        raise UsageError(
            f"{where}: unknown snapshot schema_version {data.get('schema_version')!r}",
            hint="aorta-tui reads its own snapshots (format aorta-tui-envsnap, schema 1) and "
                 "upstream AORTA env.json files with schema 1.x")
    validate(data, where)
    return data


# The tool's other JSON files (their "kind"): what each is, and the command that reads it.
_OTHER_KINDS = {
    "aorta-tui/queue-result": ("a `queue run` result",
                               "compare two with `aorta-tui queue compare A.json B.json`"),
    "aorta-tui/queue-sweep": ("a `queue sweep` result",
                              "compare two with `aorta-tui queue compare A.json B.json`"),
    "aorta-tui/queue-sweep-run": ("a `queue sweep` run record",
                                  "its result is the sweep's -o file"),
    "aorta-tui/policy-report": ("a `policy sweep` report (policy.json)",
                                "print it with `aorta-tui policy report DIR`"),
    "aorta-tui/policy-sweep": ("a `policy sweep` manifest (sweep.json)",
                               "print its report with `aorta-tui policy report DIR`"),
    "aorta-tui/bundle": ("a bundle manifest", "a bundle's snapshots are its env/*.json"),
    "aorta-tui/agent": ("an `agent` record", "its runs' snapshots are in their env/ folders"),
}


def other_kind(data: dict[str, Any]) -> tuple[str, str] | None:
    """(what the file is, where to take it) for another of the tool's JSON files, else None."""
    kind = data.get("kind")
    return _OTHER_KINDS.get(kind) if isinstance(kind, str) else None


_KIND_NEAR_THE_TOP = 1024  # the tool writes "schema_version" then "kind" first


def other_kind_of_file(path: str | os.PathLike[str]) -> str | None:
    """What the file is when it is another of the tool's JSON files (read from its first
    bytes, for a list of candidates that opens nothing whole), else None."""
    import re

    try:
        with open(path, "rb") as f:
            head = f.read(_KIND_NEAR_THE_TOP).decode("utf-8", "replace")
    except OSError:
        return None
    m = re.search(r'"kind"\s*:\s*"(aorta-tui/[a-z-]+)"', head)
    known = _OTHER_KINDS.get(m.group(1)) if m else None
    return known[0] if known else None


def _check_upstream(data: dict[str, Any], where: str) -> None:
    """The upstream values aorta-tui transforms (not just shows) have the type it needs."""
    arch = data.get("gpu_arch")
    targets = arch.get("gfx_targets") if isinstance(arch, dict) else None
    if targets is not None and not (isinstance(targets, list)
                                    and all(isinstance(t, str) for t in targets)):
        raise UsageError(f"{where}: gpu_arch.gfx_targets: expected an array of strings, found "
                         f"{json_type_name(targets)}", hint=_HINT)


