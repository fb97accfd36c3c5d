"""The one "did you mean" of the project: close names for a typo, in the hint of an error.

Every unknown-name error (a recipe key, a workload, a policy, a sidecar key, an env.json field,
a condition's variable) asks here, so the matching is the same everywhere: difflib's ratio, the
best first, ties broken by name (difflib's own order, whatever the order of ``candidates``).
Two phrasings exist because tests and users read both:

- :func:`did_you_mean`: the one closest name, quoted, ready to prefix the rest of a hint
  (``"did you mean 'steps'? "``, or ``""``); :func:`phrase` words a name found otherwise;
- :func:`did_you_mean_any`: up to ``n`` names, unquoted, joined (``"did you mean a, b?"``, or
  ``None`` so the caller says what lists them instead).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_WORD = 200  # no name is this long; difflib's cost grows with the product of the lengths


def close_matches(word: str, candidates: Iterable[str], *, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``candidates`` close to ``word`` (difflib ratio >= ``cutoff``), best first."""
    word = str(word)
    if len(word) > MAX_WORD:
        return []
    return difflib.get_close_matches(word, [str(c) for c in candidates], n=n, cutoff=cutoff)


def nearest(word: str, candidates: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The closest of ``candidates`` to ``word``, or ``None``."""
    close = close_matches(word, candidates, n=1, cutoff=cutoff)
    return close[0] if close else None


def phrase(near: str | None) -> str:
    """``"did you mean 'x'? "`` for a name already found (or rewritten, say with a prefix),
    else ``""``: the one wording of a single suggestion."""
    return f"did you mean {near!r}? " if near else ""


def did_you_mean(word: str, candidates: Iterable[str], *, cutoff: float = 0.6) -> str:
    """``"did you mean 'x'? "`` for the closest candidate, else ``""``."""
    return phrase(nearest(word, candidates, cutoff=cutoff))


def did_you_mean_any(word: str, candidates: Iterable[str], *, n: int = 3, cutoff: float = 0.6,
                     joiner: str = ", ") -> str | None:
    """``"did you mean a, b?"`` for up to ``n`` close candidates, else ``None``."""
    close = close_matches(word, candidates, n=n, cutoff=cutoff)
    return f"did you mean {joiner.join(close)}?" if close else None
