"""Read recipe text into plain Python values while remembering where each value came from.

PyYAML's ``safe_load`` forgets positions, so we compose the node graph ourselves and build
dicts, lists and scalars from it, recording ``key path -> (line, column)`` (both 1-based) for
every value and every mapping key. YAML problems (syntax, duplicate keys, alias cycles, tags
that are not plain data) become :class:`LoadProblem` s with the position PyYAML reports.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import yaml

MAX_RECIPE_BYTES = 4 * 1024 * 1024  # a recipe is a page of YAML; anything larger is a mistake
MAX_NODES = 200_000  # bounds alias expansion ("billion laughs") and pathological nesting
MAX_DEPTH = 64
# No recipe number needs more digits than this (seeds fit in 19). Longer integers are refused
# while loading: Python refuses to convert a 4,300-digit one, and a huge one overflows floats.
MAX_INT_DIGITS = 30

_PLAIN_TAGS = {
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}
_SCALAR_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}


# libyaml's parser is ~7x faster (it matters for validation as you type); same nodes and marks.
if TYPE_CHECKING:  # CSafeLoader exists only where PyYAML was built with libyaml
    _YamlLoader: TypeAlias = yaml.SafeLoader | yaml.CSafeLoader
_Loader: type[_YamlLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LoadProblem(Exception):
    """A problem found while reading the text; ``line``/``column`` are 1-based (0 = unknown)."""

    def __init__(self, message: str, *, line: int = 0, column: int = 0, hint: str | None = None,
                 path: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.hint = hint
        self.path = path


@dataclass
class Marks:
    """Positions of values (``values``) and of mapping keys (``keys``) by key path."""

    values: dict[str, tuple[int, int]] = field(default_factory=dict)
    keys: dict[str, tuple[int, int]] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)  # scalars as written (for hints)

    def at(self, path: str, *, key: bool = False) -> tuple[int, int]:
        """The position of ``path``, or of its closest recorded ancestor."""
        table = self.keys if key else self.values
        probe = path
        while True:
            if probe in table:
                return table[probe]
            if key and probe in self.values:
                return self.values[probe]
            if not probe:
                return self.values.get("", (1, 1))
            probe = parent_path(probe)


def parent_path(path: str) -> str:
    """``cells[1].mitigations[0]`` -> ``cells[1].mitigations`` -> ``cells[1]`` -> ``cells``."""
    if path.endswith("]") and "[" in path:  # a key may itself end in "]" (hostile input)
        return path[: path.rindex("[")]
    if "." in path:
        return path[: path.rindex(".")]
    return ""


def child_path(parent: str, key: object) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{parent}[{key}]"
    text = str(key)
    return f"{parent}.{text}" if parent else text


def read_recipe_file(path: str | Path) -> str:
    """Read a recipe file as text; every failure is a :class:`LoadProblem`."""
    p = Path(path)
    try:
        if p.is_dir():
            raise LoadProblem("this is a directory, not a recipe file",
                              hint="pass the path of a .yaml file inside it")
        if p.exists() and not stat.S_ISREG(p.stat().st_mode):
            # a FIFO would block in open() until a writer came, /dev/zero never end
            raise LoadProblem("this is not a regular file (a FIFO, device or socket), not a recipe file",
                              hint="pass the path of a .yaml file")
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:  # bounded read: a huge file must not hang us
            data = fh.read(MAX_RECIPE_BYTES + 1)
    except FileNotFoundError:
        raise LoadProblem("no such recipe file",
                          hint="check the path (recipes/examples/ has working examples)") from None
    except PermissionError:
        raise LoadProblem("cannot read the file: permission denied",
                          hint="make the file readable (chmod a+r) or run as its owner") from None
    except OSError as exc:
        raise LoadProblem(f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > MAX_RECIPE_BYTES:
        raise LoadProblem(f"the file is larger than {MAX_RECIPE_BYTES} bytes; no recipe is that big",
                          hint="is this really a recipe file?")
    if b"\x00" in data:
        raise LoadProblem("this is a binary file, not a YAML recipe",
                          hint="pass the recipe's .yaml file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise LoadProblem(f"the file is not UTF-8 text (byte {data[exc.start]:#x})", line=line,
                          column=col, hint="save the recipe as UTF-8") from None


def parse_yaml_text(text: str) -> tuple[Any, Marks]:
    """Parse one YAML document into plain values plus the position of every value and key."""
    if len(text) > MAX_RECIPE_BYTES:
        raise LoadProblem(f"the recipe is {len(text)} characters; at most {MAX_RECIPE_BYTES}")
    loader: _YamlLoader | None = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        marks = Marks()
        if node is None:
            return None, marks
        builder = _Builder(loader, marks)
        return builder.build(node, "", 0), marks
    except LoadProblem:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        what = exc.problem or "malformed YAML"
        if exc.context and exc.problem:
            started = exc.context_mark
            since = f" that starts at line {started.line + 1}" if started is not None and \
                started.line + 1 != line else ""
            what = f"{exc.problem} ({exc.context}{since})"
        hint = _yaml_hint(f"{exc.problem} {exc.context}")
        raise LoadProblem(f"invalid YAML: {what}", line=line, column=col, hint=hint) from None
    except UnicodeEncodeError as exc:  # libyaml encodes the text: lone surrogates fail there
        line, col = _line_col(text, exc.start)
        raise LoadProblem("the text holds a character that is not valid Unicode (a lone "
                          "surrogate)", line=line, column=col, hint="remove it") from None
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        raise LoadProblem(f"the text holds a character YAML does not allow (U+{exc.character:04X})" if isinstance(exc.character, int) else "the text holds a character YAML does not allow",
                          line=line, column=col, hint="remove the control character") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise LoadProblem(f"invalid YAML: {exc}", line=line, column=col) from None
    except RecursionError:
        raise LoadProblem("the YAML nests too deeply to be a recipe", line=1, column=1) from None
    finally:
        if loader is not None:
            loader.dispose()


def _line_col(text: str, position: int) -> tuple[int, int]:
    before = text[:position]
    return before.count("\n") + 1, position - (before.rfind("\n") + 1) + 1


def _yaml_hint(problem: str) -> str:
    if "tab" in problem:
        return "indent with spaces, not tabs"
    if "mapping values are not allowed" in problem:
        return "a value containing ': ' must be quoted, or the indentation is off by a level"
    if "expected a single document" in problem:
        return "a recipe is one YAML document: remove the extra '---'"
    if "could not find expected ':'" in problem or "simple key" in problem:
        return "check for a missing ':' after a key, or an unclosed quote"
    if "found character" in problem:
        return "quote the value"
    return "fix the YAML syntax at this position (a YAML linter shows more context)"


class _Builder:
    def __init__(self, loader: _YamlLoader, marks: Marks) -> None:
        self.loader = loader
        self.marks = marks
        self.count = 0
        self.active: set[int] = set()

    def build(self, node: yaml.Node, path: str, depth: int) -> object:
        self.count += 1
        line, col = node.start_mark.line + 1, node.start_mark.column + 1
        if self.count > MAX_NODES:
            raise LoadProblem(f"the YAML expands to more than {MAX_NODES} values (alias bomb?)",
                              line=line, column=col, path=path)
        if depth > MAX_DEPTH:
            raise LoadProblem(f"the YAML nests deeper than {MAX_DEPTH} levels", line=line,
                              column=col, path=path)
        if id(node) in self.active:
            raise LoadProblem("a YAML alias refers to itself (a cycle)", line=line, column=col,
                              path=path, hint="replace the alias with the data it should hold")
        self.marks.values.setdefault(path, (line, col))
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                self._check_tag(node, "tag:yaml.org,2002:seq", path)
                return [self.build(item, child_path(path, i), depth + 1)
                        for i, item in enumerate(node.value)]
            if isinstance(node, yaml.MappingNode):
                self._check_tag(node, "tag:yaml.org,2002:map", path)
                return self._mapping(node, path, depth)
        finally:
            self.active.discard(id(node))
        raise LoadProblem(f"unsupported YAML node {type(node).__name__}", line=line, column=col)

    def _check_tag(self, node: yaml.Node, expected: str, path: str) -> None:
        if node.tag != expected:
            raise LoadProblem(
                f"unsupported YAML tag {node.tag!r}", line=node.start_mark.line + 1,
                column=node.start_mark.column + 1, path=path,
                hint="recipes hold plain data: remove the tag")

    def _scalar(self, node: yaml.ScalarNode, path: str) -> object:
        if node.tag not in _SCALAR_TAGS:
            raise LoadProblem(
                f"unsupported YAML tag {node.tag!r} (a recipe holds strings, numbers, booleans "
                "and null)", line=node.start_mark.line + 1, column=node.start_mark.column + 1,
                path=path, hint="quote the value to make it a string")
        self.marks.raw.setdefault(path, node.value)
        line, col = node.start_mark.line + 1, node.start_mark.column + 1
        if node.tag == "tag:yaml.org,2002:int":
            digits = sum(ch.isalnum() for ch in node.value)
            if digits > MAX_INT_DIGITS:
                raise LoadProblem(
                    f"an integer of {digits} digits is too large for a recipe (at most "
                    f"{MAX_INT_DIGITS} digits)", line=line, column=col, path=path,
                    hint="write a smaller number, or quote it to make it a string")
        try:
            return self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError) as exc:  # e.g. a malformed timestamp or number
            raise LoadProblem(f"cannot read this value: {str(exc)[:120]}", line=line, column=col,
                              path=path, hint="quote the value to make it a string") from None

    def _mapping(self, node: yaml.MappingNode, path: str, depth: int) -> dict[Any, Any]:
        # Resolve YAML merge keys (`<<: *defaults`) the way safe_load does; merged pairs come
        # first and may be overridden by the mapping's own keys, which must be unique.
        explicit = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
        self.loader.flatten_mapping(node)
        n_merged = len(node.value) - explicit
        out: dict[Any, Any] = {}
        own: set[Any] = set()
        for index, (key_node, value_node) in enumerate(node.value):
            kline, kcol = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise LoadProblem("a mapping key must be a plain word, not a list or mapping",
                                  line=kline, column=kcol, path=path,
                                  hint="write `key: value`; a leading '?' or '[' makes a complex key")
            key = self._scalar(key_node, path)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise LoadProblem(f"unsupported mapping key {key!r}", line=kline, column=kcol)
            if index >= n_merged:
                if key in own:
                    raise LoadProblem(
                        f"duplicate key {key!r}{' in ' + path if path else ''}", line=kline,
                        column=kcol, path=child_path(path, str(key)),
                        hint="YAML would silently keep only the last one: remove or merge the "
                        "duplicate")
                own.add(key)
            sub = child_path(path, str(key))
            self.marks.keys[sub] = (kline, kcol)
            if index >= n_merged:
                self.marks.values.pop(sub, None)  # the mapping's own value wins over a merge
            out[key] = self.build(value_node, sub, depth + 1)
        return out
