"""Loading a snapshot from a file (ours or upstream's), validating one, walking its JSON.

Top level::

    {"format": "aorta-tui-envsnap", "schema_version": 1,
     "probe": {...}, "host": {...}, "gpus": [{...}, ...], "driver": {...}, "cuda": {...},
     "rocm": {...}, "torch": {...}, "python": {...}, "env_vars": {...}}

Every section is a tree of dicts (and the ``gpus`` list) whose leaves are the field objects of
``doc.py``, which reads the file into its typed value (``EnvSnapshot``). ``schema.json`` next
to this file is the JSON Schema of the same shape.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, Json, json_type_name, load_json_input
from aorta_tui.envsnap.doc import (
    FORMAT,
    HINT,
    SECTIONS,
    SUPPORTED_SCHEMA_VERSIONS,
    EnvSnapshot,
    Snapshot,
    UpstreamSnapshot,
    is_leaf_object,
)

__all__ = ["FORMAT", "SECTIONS", "SUPPORTED_SCHEMA_VERSIONS", "iter_leaves", "load_snapshot",
           "read_json_file", "section_of", "validate"]


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def iter_leaves(node: object, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every leaf object of a snapshot's JSON with its path (``host.kernel_release``,
    ``gpus[0].name``), in key order: for JSON not (yet) read as an :class:`EnvSnapshot` (the
    capture's own tree, a sweep's file it hashes as it is); a typed one has ``leaves()``."""
    if is_leaf_object(node):
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


def validate(snapshot: object, where: str = "snapshot") -> EnvSnapshot:
    """The snapshot ``snapshot`` (parsed JSON) holds; UsageError naming the first thing that
    does not match the schema (``EnvSnapshot.from_dict``, the one reader)."""
    return EnvSnapshot.from_dict(snapshot, where=where)


_HINT = HINT


def read_json_file(path: str | os.PathLike[str]) -> object:
    """The parsed JSON of a snapshot file: bounded, regular files only, errors located."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise UsageError(f"{p} is a directory, not a snapshot file",
                         hint="pass the env.json inside it, e.g. " + os.path.join(p, "env.json"))
    data: object = load_json_input(p, what="snapshot", limit=INPUT_LIMITS["snapshot"], hint=_HINT)
    return data


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Load an aorta-tui snapshot (an :class:`EnvSnapshot`) or an upstream AORTA env.json
    (schema 1.x: an :class:`UpstreamSnapshot`, its values as written); a damaged file, or
    another of the tool's files, is a located UsageError (exit 2)."""
    from aorta_tui.envsnap import upstream

    data = read_json_file(path)
    where = os.fspath(path)
    if isinstance(data, dict) and data.get("format") != FORMAT and upstream.is_upstream(data):
        upstream.check_version(data, where)
        _check_upstream(data, where)
        return UpstreamSnapshot(data)
    if isinstance(data, dict) and (what := other_kind(data)) is not None:
        raise UsageError(f"{where} is {what[0]}, not an environment snapshot",
                         hint=f"{what[1]}; env diff compares two files written by "
                              "`aorta-tui env probe -o FILE`")
    if isinstance(data, dict) and "format" not in data and "schema_version" in data:
        raise UsageError(
            f"{where}: unknown snapshot schema_version {data.get('schema_version')!r}",
            hint="aorta-tui reads its own snapshots (format aorta-tui-envsnap, schema 1) and "
                 "upstream AORTA env.json files with schema 1.x")
    return EnvSnapshot.from_dict(data, where=where)


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


def other_kind(data: dict[str, object]) -> tuple[str, str] | None:
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


def _check_upstream(data: dict[str, Json], where: str) -> None:
    """The upstream values aorta-tui transforms (not just shows) have the type it needs."""
    arch = data.get("gpu_arch")
    targets = arch.get("gfx_targets") if isinstance(arch, dict) else None
    if targets is not None and not (isinstance(targets, list)
                                    and all(isinstance(t, str) for t in targets)):
        raise UsageError(f"{where}: gpu_arch.gfx_targets: expected an array of strings, found "
                         f"{json_type_name(targets)}", hint=_HINT)


