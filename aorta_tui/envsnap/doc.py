"""The environment snapshot (``env.json``) as a typed value: one serializer, one reader.

A snapshot is a fixed set of sections (``probe``, ``host``, ``gpus``, ``driver``, ``cuda``,
``rocm``, ``torch``, ``python``, ``env_vars``: docs/envsnap.md, ``schema.json``), each a tree of
:class:`Field` leaves: a value with its state and where it came from. Which fields a section
holds depends on the machine and the vendor (a GPU's keys, a library's, each tracked variable),
so a section is a mapping of names to fields or to deeper mappings (:data:`Fields`), not a
class per section; the leaf and the top level are fixed, and typed.

One serializer, :meth:`EnvSnapshot.to_json`: the object the capture has always written (through
``core.atomic.json_bytes``), keys sorted at every level (lists keep their order) so two
snapshots diff line by line. One reader, :meth:`EnvSnapshot.from_dict` (``schema.load_snapshot``
opens the file: bounded, ``INPUT_LIMITS["snapshot"]``): every leaf checked, a damaged one named
with the file and the field path (UsageError, exit 2). A field this version does not know, in
any section, is kept as read: a snapshot a newer aorta-tui wrote reads back with nothing lost.
A top-level key outside the sections is refused, as it always was (``schema.json``:
``additionalProperties: false``; a new section is a new ``schema_version``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeGuard

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import FieldReader, Json, json_type_name

FORMAT = "aorta-tui-envsnap"
SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
SECTIONS = ("probe", "host", "gpus", "driver", "cuda", "rocm", "torch", "python", "env_vars")
STATES = ("ok", "not_applicable", "unknown", "error")
LEAF_KEYS = frozenset({"value", "state", "source", "reason", "needs_root", "set", "category"})
WHAT = "snapshot"
HINT = "pass a file written by `aorta-tui env probe -o FILE` (or upstream `aorta env probe`)"


@dataclass(frozen=True)
class Field:
    """One leaf: ``{"value", "state", "source", "reason"?, "needs_root"?, "set"?,
    "category"?}``; None: the file does not hold the key (and it is not written back)."""

    value: Json
    state: str  # one of STATES
    source: str | None = None  # file:PATH, cmd:COMMAND, api:CALL, env:NAME (the writer always has one)
    reason: str | None = None  # why there is no value: present whenever state is not ok
    needs_root: bool | None = None  # a permission error hid the value
    is_set: bool | None = None  # an environment variable's: was it set ("set" in the file)
    category: str | None = None  # an environment variable's rank (numerics, scheduling, ...)

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def to_json(self) -> dict[str, Json]:
        """The leaf's object, keys in sorted order (the writer's: inside the value too, the
        limits' ``{"hard", "soft"}``), absent ones left out."""
        known: dict[str, Json] = {
            "category": self.category, "needs_root": self.needs_root, "reason": self.reason,
            "set": self.is_set, "source": self.source}
        out: dict[str, Json] = {k: v for k, v in known.items() if v is not None}
        out["state"] = self.state
        out["value"] = sorted_json(self.value)
        return out

    __hash__ = None  # type: ignore[assignment]  # value may be a list or an object


# A section (or a library inside one): names to fields or to deeper mappings.
Fields: TypeAlias = "dict[str, Field | Fields]"
Node: TypeAlias = "Field | Fields"


@dataclass(frozen=True)
class EnvSnapshot:
    """``env.json`` (docs/envsnap.md); a section is None when the file does not hold it (a
    capture that failed as a whole writes only ``probe``)."""

    schema_version: int = SCHEMA_VERSION
    probe: Fields | None = None
    host: Fields | None = None
    gpus: tuple[Fields, ...] | None = None
    driver: Fields | None = None
    cuda: Fields | None = None
    rocm: Fields | None = None
    torch: Fields | None = None
    python: Fields | None = None
    env_vars: Fields | None = None

    __hash__ = None  # type: ignore[assignment]  # dict fields: never a dict key

    def section(self, name: str) -> Fields | tuple[Fields, ...] | None:
        """The section called ``name`` (one of SECTIONS), None when absent."""
        if name not in SECTIONS:
            raise KeyError(name)
        value: Fields | tuple[Fields, ...] | None = getattr(self, name)
        return value

    def sections(self) -> Iterator[tuple[str, Fields | tuple[Fields, ...]]]:
        """The sections the snapshot holds, in the written (sorted) order."""
        for name in sorted(SECTIONS):
            node = self.section(name)
            if node is not None:
                yield name, node

    def leaves(self) -> Iterator[tuple[str, Field]]:
        """Every field with its path (``host.kernel_release``, ``gpus[0].name``), in the
        written order: ``schema.iter_leaves`` of :meth:`to_json`, without the round trip."""
        for name, node in self.sections():
            if isinstance(node, tuple):
                for i, gpu in enumerate(node):
                    yield from _leaves(gpu, f"{name}[{i}]")
            else:
                yield from _leaves(node, name)

    def top(self) -> dict[str, str | int | Fields | tuple[Fields, ...]]:
        """The top level as the file has it (``format``, ``schema_version`` and the sections,
        sorted): what ``--field`` walks."""
        out: dict[str, str | int | Fields | tuple[Fields, ...]] = {
            "format": FORMAT, "schema_version": self.schema_version, **dict(self.sections())}
        return {k: out[k] for k in sorted(out)}

    def to_json(self) -> dict[str, Json]:
        """The object env.json holds (``core.atomic.json_bytes`` writes it): keys sorted at
        every level, as the capture has always written them."""
        out: dict[str, Json] = {}
        for key, node in self.top().items():
            if isinstance(node, tuple):
                out[key] = [fields_json(gpu) for gpu in node]
            elif isinstance(node, dict):
                out[key] = fields_json(node)
            else:
                out[key] = node
        return out

    @classmethod
    def from_dict(cls, data: object, *, where: str = WHAT) -> EnvSnapshot:
        """Read a parsed env.json; a damaged one is a located UsageError (exit 2)."""
        return _read(FieldReader(where, WHAT), data)


@dataclass(frozen=True)
class UpstreamSnapshot:
    """An upstream AORTA env.json (amd-aorta, ``schema_version`` ``"1.N"``), as written: another
    tool's layout of plain values, untyped by nature here; ``upstream.py`` reads the parts
    aorta-tui compares (``leaves``, ``project``)."""

    data: dict[str, Json]

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    @property
    def schema_version(self) -> Json:
        return self.data.get("schema_version")

    def to_json(self) -> dict[str, Json]:
        return self.data


# What ``schema.load_snapshot`` reads: one of ours, or upstream's
Snapshot: TypeAlias = EnvSnapshot | UpstreamSnapshot


def fields_json(fields: Fields) -> dict[str, Json]:
    """A section's (or a library's) object, keys sorted."""
    return {k: node_json(fields[k]) for k in sorted(fields)}


def sorted_json(value: Json) -> Json:
    """``value`` with every object's keys sorted, at every depth (lists keep their order)."""
    if isinstance(value, dict):
        return {k: sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_json(v) for v in value]
    return value


def node_json(node: Node) -> dict[str, Json]:
    return node.to_json() if isinstance(node, Field) else fields_json(node)


def _leaves(fields: Fields, path: str) -> Iterator[tuple[str, Field]]:
    for key in sorted(fields):
        node = fields[key]
        if isinstance(node, Field):
            yield f"{path}.{key}", node
        else:
            yield from _leaves(node, f"{path}.{key}")


def is_leaf_object(node: object) -> TypeGuard[dict[str, Any]]:
    """A JSON object that is a field: it has a value and a state, and only a field's keys."""
    return isinstance(node, dict) and "state" in node and "value" in node and set(node) <= LEAF_KEYS


# -- the reader -----------------------------------------------------------------------------


def _read(f: FieldReader, data: object) -> EnvSnapshot:
    where = f.where
    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected a JSON object, found {type(data).__name__}",
                         hint="pass a file written by `aorta-tui env probe`")
    if data.get("format") != FORMAT:
        raise UsageError(f"{where}: not an aorta-tui snapshot (format is {data.get('format')!r})",
                         hint="pass a file written by `aorta-tui env probe` or upstream `aorta env probe`")
    version = data.get("schema_version")
    # An int, not its look-alikes: true and 1.0 equal 1 to Python, but the writer never wrote
    # either (stricter than before, which let them through as version 1).
    if type(version) is not int or version not in SUPPORTED_SCHEMA_VERSIONS:
        raise UsageError(
            f"{where}: unknown schema_version {version!r} (this aorta-tui reads "
            f"{', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))})",
            hint="capture the snapshot again with this version, or upgrade aorta-tui")
    for key in data:
        if key not in SECTIONS and key not in ("format", "schema_version"):
            raise UsageError(f"{where}: unknown top-level key {key!r}",
                             hint=f"the sections are: {', '.join(SECTIONS)}")
    sections: dict[str, Fields | tuple[Fields, ...]] = {}
    for key in SECTIONS:
        if key in data:
            sections[key] = _gpus(f, data[key]) if key == "gpus" else _section(f, key, data[key])
    return EnvSnapshot(schema_version=version, **sections)  # type: ignore[arg-type]


def _gpus(f: FieldReader, node: object) -> tuple[Fields, ...]:
    if not isinstance(node, list):
        raise UsageError(f"{f.where}: gpus: expected an array of GPU objects, found "
                         f"{json_type_name(node)}", hint=HINT)
    out = []
    for i, gpu in enumerate(node):
        if not isinstance(gpu, dict) or is_leaf_object(gpu):
            raise UsageError(f"{f.where}: gpus[{i}]: expected a GPU object of fields, "
                             f"found {json_type_name(gpu)}", hint=HINT)
        out.append(_fields(f, gpu, f"gpus[{i}]"))
    return tuple(out)


def _section(f: FieldReader, key: str, node: object) -> Fields:
    if not isinstance(node, dict) or is_leaf_object(node):
        raise UsageError(f"{f.where}: {key}: expected an object of fields, found "
                         f"{'a single field' if is_leaf_object(node) else json_type_name(node)}",
                         hint=HINT)
    return _fields(f, node, key)


def _fields(f: FieldReader, node: dict[str, object], path: str) -> Fields:
    # kept in the written (sorted) order, whatever order the file had: a field's neighbours
    # in a message, a subtree's --field value come out as the file the capture writes has them
    out: Fields = {}
    for key in sorted(node):
        child = node[key]
        at = f"{path}.{key}"
        if is_leaf_object(child):
            out[key] = _field(f, child, at)
        elif isinstance(child, dict):
            out[key] = _fields(f, child, at)
        elif isinstance(child, list):
            # An array of fields inside a section: the old reader walked one, but no writer
            # wrote one and schema.json allows none (refused now: a hand-made file).
            raise UsageError(f"{f.where}: {at}: expected a field object {{value, state, source}} "
                             "or an object of fields, found an array", hint=HINT)
        else:
            raise UsageError(f"{f.where}: {at}: expected a field object "
                             f"{{value, state, source}}, found a bare {type(child).__name__}",
                             hint=HINT)
    return out


def _field(f: FieldReader, d: dict[str, Json], path: str) -> Field:
    state = d["state"]
    if state not in STATES:
        raise UsageError(f"{f.where}: {path}: state {state!r} is not one of {', '.join(STATES)}",
                         hint=HINT)
    assert isinstance(state, str)
    if state != "ok" and not d.get("reason"):
        raise UsageError(f"{f.where}: {path}: state {state!r} without a reason", hint=HINT)
    # The other keys have the types schema.json gives them, null none of them (the old reader
    # did not look: a source of 5 reached the diff's text; refused now, located).
    # Its objects' keys sorted as the file has them: a capture's value (a limit's {"soft",
    # "hard"}) reads, prints and sums up as the written file's does.
    value = sorted_json(d["value"])
    return Field(
        value=value, state=state,
        source=f.text(d, "source", path) if "source" in d else None,
        reason=f.text(d, "reason", path) if "reason" in d else None,
        needs_root=f.boolean(d, "needs_root", path) if "needs_root" in d else None,
        is_set=f.boolean(d, "set", path) if "set" in d else None,
        category=f.text(d, "category", path) if "category" in d else None)
