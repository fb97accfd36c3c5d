"""Reading a file the user hands us: bounded, typed, and located when it is wrong.

Every file the tool reads (recipes, sidecars, snapshots, queue results, policy files, journals)
goes through here, so each gets the same three guarantees:

- **no hang**: only regular files are read (a FIFO, ``/dev/zero`` or a socket is refused before
  it is opened for reading, and the open itself never blocks);
- **no unbounded read**: at most ``limit`` bytes are read, and a larger file is refused with its
  size and the limit;
- **a located message**: a bad byte or bad JSON names ``file:line:column``; nesting deeper than
  ``max_depth`` is refused instead of exhausting the interpreter's stack.

Errors are :class:`~aorta_tui.core.errors.UsageError` (exit 2): bad input, never exit 70.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from aorta_tui.core.errors import UsageError

KiB = 1 << 10
MiB = 1 << 20
DEFAULT_MAX_DEPTH = 64


def describe_size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n / KiB:.1f} KiB" if n >= KiB else f"{n} B"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_input_bytes(path: str | os.PathLike[str], *, what: str, limit: int,
                     hint: str | None = None) -> bytes:
    """The bytes of the regular file ``path`` (``what`` names it in messages: "snapshot")."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise UsageError(f"{p}: no such file", hint=hint) from None
    except OSError as exc:
        raise UsageError(f"{p}: cannot read the {what}: {exc.strerror or exc}", hint=hint) from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{p} is {_kind(st.st_mode)}, not a {what} file",
                         hint=hint or f"pass the path of a {what} file")
    if st.st_size > limit:
        raise UsageError(
            f"{p}: the {what} is {describe_size(st.st_size)}, over the {describe_size(limit)} limit",
            hint=hint or f"a {what} this large is not one aorta-tui wrote; check the path")
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO after the stat, open does not wait for
        # a writer; the fstat below then refuses it.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"{p}: cannot read the {what}: {exc.strerror or exc}", hint=hint) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{p} is {_kind(st.st_mode)}, not a {what} file", hint=hint)
        data = fh.read(limit + 1)
    if len(data) > limit:  # the file grew after the stat
        raise UsageError(f"{p}: the {what} is over the {describe_size(limit)} limit", hint=hint)
    return data


def line_col(data: bytes | str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``data``."""
    nl = b"\n" if isinstance(data, bytes) else "\n"
    line = data.count(nl, 0, offset) + 1  # type: ignore[arg-type]
    start = data.rfind(nl, 0, offset) + 1  # type: ignore[arg-type]
    return line, offset - start + 1


def decode_utf8(data: bytes, *, where: str, what: str, hint: str | None = None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = line_col(data, exc.start)
        raise UsageError(
            f"{where}:{line}:{col}: the {what} is not UTF-8 text (byte 0x{data[exc.start]:02x})",
            hint=hint or f"pass a UTF-8 {what} file") from None


def read_input_text(path: str | os.PathLike[str], *, what: str, limit: int,
                    hint: str | None = None) -> str:
    """The UTF-8 text of ``path``, bounded and checked as :func:`read_input_bytes` does."""
    data = read_input_bytes(path, what=what, limit=limit, hint=hint)
    return decode_utf8(data, where=os.fspath(path), what=what, hint=hint)


def json_depth_exceeds(value: Any, max_depth: int) -> bool:
    """True when ``value`` nests containers deeper than ``max_depth`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def parse_json_text(text: str, *, where: str, what: str, max_depth: int = DEFAULT_MAX_DEPTH,
                    hint: str | None = None) -> Any:
    """``json.loads`` with located errors, bounded nesting, and no NaN/Infinity surprises."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}:{exc.lineno}:{exc.colno}: the {what} is not valid JSON: {exc.msg}",
                         hint=hint) from None
    except RecursionError:
        value = None
        deep = True
    else:
        deep = json_depth_exceeds(value, max_depth)
    if deep:
        raise UsageError(f"{where}: the {what} nests deeper than {max_depth} levels",
                         hint=hint or f"no {what} aorta-tui reads nests this deep; check the file")
    return value


def load_json_input(path: str | os.PathLike[str], *, what: str, limit: int,
                    max_depth: int = DEFAULT_MAX_DEPTH, hint: str | None = None) -> Any:
    """Read and parse a JSON input file with every guarantee of this module."""
    where = os.fspath(path)
    text = read_input_text(path, what=what, limit=limit, hint=hint)
    if not text.strip():
        raise UsageError(f"{where}: the {what} file is empty", hint=hint)
    return parse_json_text(text, where=where, what=what, max_depth=max_depth, hint=hint)


def require_object(value: Any, *, where: str, field: str = "", what: str = "file",
                   hint: str | None = None) -> dict[str, Any]:
    """``value`` if it is a JSON object, else a located error naming the field and the type."""
    if isinstance(value, dict):
        return value
    at = f"{where}: {field}" if field else where
    found = "an array" if isinstance(value, list) else f"a {type(value).__name__}"
    raise UsageError(f"{at}: expected an object, found {found}", hint=hint or f"pass a {what}")


def clip_for_message(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, so an error about a huge value stays short."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text)} characters)"


def is_regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False
