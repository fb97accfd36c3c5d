"""Whether a piece of text is a plain decimal number, in ASCII digits only.

``str.isdigit()`` is the wrong test in front of ``int()``: it accepts superscripts and other
Unicode digits (``'²'``, ``'¹'``) that ``int()`` then refuses with a ``ValueError``, which is a
traceback where the user deserved a usage error. ``str.isdecimal()`` admits Arabic-Indic and
full-width digits that ``int()`` does take, but no field this tool reads (a port, a pid, a trial
number, a count in an option) means them. One test for all of them, here, and a rule test
(``tests/core/test_numerals.py``) keeps ``isdigit``/``isdecimal``/``isnumeric`` out of the package.
"""

from __future__ import annotations

_ASCII_DIGITS = frozenset("0123456789")

# The largest seed (a recipe's ``seed``, ``--seed``): what a signed 64-bit integer holds, so a
# seed is the same number in every JSON reader and RNG it reaches.
MAX_SEED = 2**63 - 1


def ascii_digits(text: str) -> bool:
    """True when ``text`` is one or more of ``0``-``9`` and nothing else (no sign, space or ``_``).

    >>> ascii_digits("8080"), ascii_digits("²"), ascii_digits(""), ascii_digits(" 1")
    (True, False, False, False)
    """
    return bool(text) and all(ch in _ASCII_DIGITS for ch in text)
