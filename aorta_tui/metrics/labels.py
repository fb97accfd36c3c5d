"""Label values fit to leave the machine: the bundle's secret rules, a length cap, few series.

Every label value goes through :class:`aorta_tui.bundle.redact.Scrubber` (secret-looking
values, token formats, credentials in URLs, user names in home directories, and absolute
paths, which no metric needs) before a scrape can see it. The number of keys (streams,
devices, ioctl commands) per metric and process is capped at :data:`MAX_KEYS`; the rest are
summed into the key ``other``, so a program with thousands of streams cannot blow up the
series count.
"""

from __future__ import annotations

import threading

MAX_KEYS = 16
OTHER = "other"
MAX_LABEL_CHARS = 120
_CACHE_LIMIT = 4096


class LabelSanitiser:
    """Scrubs label values with the bundle's rules; thread-safe, remembers what it scrubbed."""

    def __init__(self, *, distinct: bool = False) -> None:
        """``distinct``: a scrubbed value keeps a stable ``#N`` of its own (cell names: two
        cells are two series); without it, values that scrub alike are one series (a trace's
        stream keys: their counts are summed under one label)."""
        from aorta_tui.bundle.redact import RedactionConfig, Scrubber

        self._distinct = distinct
        # paths are scrubbed too: a label has no business carrying one
        self._scrubber = Scrubber(RedactionConfig(scrub_paths=True))
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()
        # the scanner's import (detect-secrets, 0.15-0.5 s) happens here, before serving, and
        # never inside the first scrape or the tracer's snapshot
        self("warm-up")

    def __call__(self, value: object) -> str:
        text = str(value)
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                return hit
            clean = self._scrub(text)
            if len(self._cache) < _CACHE_LIMIT:
                self._cache[text] = clean
            return clean

    def _scrub(self, text: str) -> str:
        from aorta_tui.bundle.redact import FileState

        # one line: a newline or control character in a label has no meaning to a dashboard
        flat = "".join(ch if ch.isprintable() else " " for ch in text)
        self._scrubber.learn_text(flat)
        scrubbed, _hits = self._scrubber.scrub_line(flat, FileState(), 0)
        # two cells whose names held secrets stay two series: <redacted:secret>#1, #2
        if self._distinct:
            scrubbed = self._scrubber.distinct(flat, scrubbed)
        if len(scrubbed) > MAX_LABEL_CHARS:
            tail = scrubbed[scrubbed.rfind("#"):] if scrubbed != flat else ""
            scrubbed = scrubbed[: MAX_LABEL_CHARS - 3 - len(tail)] + "..." + tail
        return scrubbed


def capped(items: list[tuple[str, int]], limit: int = MAX_KEYS) -> tuple[list[str], list[str]]:
    """(keys kept, keys summed into ``other``) of ``(key, count)`` pairs: the busiest first."""
    ordered = sorted(items, key=lambda kv: (-kv[1], kv[0]))
    if len(ordered) <= limit:
        return [k for k, _ in ordered], []
    return [k for k, _ in ordered[: limit - 1]], [k for k, _ in ordered[limit - 1:]]
