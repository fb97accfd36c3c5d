"""Reads shared by the collectors' typed documents (sanitizer_report.py, summaries.py): a key
the writer always writes, whose absence is damage, not an unknown value."""

from __future__ import annotations

from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import FieldReader


def required(f: FieldReader, d: dict[str, Any], key: str, path: str) -> object:
    """``d[key]``: the writer always writes it (null included), so its absence is damage,
    named with the file and the field (exit 2)."""
    if key not in d:
        raise UsageError(f"{f.where}: {f.join(path, key)}: missing",
                         hint=f"this {f.what} is damaged or was not written by aorta-tui")
    return d[key]


def opt_text(f: FieldReader, d: dict[str, Any], key: str, path: str) -> str | None:
    """A string or null; the key itself must be there (see :func:`required`)."""
    required(f, d, key, path)
    return f.opt_text(d, key, path)


def opt_integer(f: FieldReader, d: dict[str, Any], key: str, path: str) -> int | None:
    """An integer or null; the key itself must be there (see :func:`required`)."""
    required(f, d, key, path)
    return f.opt_integer(d, key, path)


def strings(f: FieldReader, d: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
    """An array of strings the writer always writes."""
    return f.strings(required(f, d, key, path), f.join(path, key))
