"""Text from a file, made safe to print on a terminal: one sanitiser for everything printed.

A run directory, a snapshot, a journal or an llm's answer is text anyone who can write it
controls. Printed raw, an escape sequence in it is obeyed by the terminal: an OSC sequence sets
the window title (or, on some terminals, writes the clipboard), a CSI one clears the screen or
moves the cursor to overwrite earlier lines, and a bidi override reorders what the reader sees.
:func:`inert` shows such characters as escapes instead (``\\x1b``, ``\\u202e``): the reader sees
that they were there, and nothing is obeyed. The TUI's log view, ``env diff``, ``attach --plain``
and the agent's llm replies all go through it.
"""

from __future__ import annotations

import unicodedata

# Control (C0, DEL, C1), format (bidi overrides and isolates, zero-width marks), surrogate,
# private-use and unassigned characters, and the line and paragraph separators.
_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _shown(ch: str) -> str:
    if ord(ch) < 0x10000:  # \n, \t, \r, \x1b, \x9b, \u202e
        return ch.encode("unicode_escape", "backslashreplace").decode("ascii")
    return f"\\U{ord(ch):08x}"


def inert(text: object, limit: int | None = None) -> str:
    """``text`` safe to print on a terminal: one line, control and format characters (ESC,
    CR, newlines, bidi overrides, zero-width marks) shown as escapes, not obeyed; at most
    ``limit`` characters (None: all)."""
    line = "".join(_shown(ch) if ch.isascii() and not ch.isprintable()
                   or not ch.isascii() and unicodedata.category(ch) in _UNSAFE else ch
                   for ch in str(text))
    if limit is not None and len(line) > limit:
        return line[: limit - 1] + "…"
    return line
