"""Per-step times from a trial's log, for recipes' ``step_time_regex``.

Units: the value is in seconds unless the group that holds it says otherwise by its name:
``step_time`` or ``seconds`` or ``s`` -> seconds, ``ms`` -> milliseconds, ``us`` ->
microseconds (all returned in seconds). Without such a named group the first group is used
(seconds), and without any group the whole match. The first match on each line counts; a
value that does not parse as a finite number is skipped.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import BinaryIO

from aorta_tui.classify.linear import LinearRegex, compile_linear, line_matches_bytes
from aorta_tui.classify.scan import iter_blocks

_UNIT_GROUPS = (("step_time", 1.0), ("seconds", 1.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6))


def step_value_group(rx: re.Pattern[str] | LinearRegex) -> tuple[int | str, float]:
    """Which group holds the step time, and the factor that turns it into seconds."""
    for name, factor in _UNIT_GROUPS:
        if name in rx.groupindex:
            return name, factor
    return (1 if rx.groups >= 1 else 0), 1.0


def extract_step_times(path: Path | BinaryIO, regex: str | re.Pattern[str]) -> list[float]:
    """Step times in seconds, in log order; ``[]`` when the file is missing. ``path`` may be
    a file already opened (a run's log, opened by the run's file layer).

    The regex runs on RE2 (linear time, see :mod:`.linear`). Raises ``re.error`` for one
    RE2 refuses (the recipe layer validates it first).
    """
    rx = compile_linear(regex.pattern if isinstance(regex, re.Pattern) else regex)
    group, factor = step_value_group(rx)
    out: list[float] = []
    try:
        for text, _first in iter_blocks(path):
            for _ls, _le, m in line_matches_bytes(rx, text.encode("utf-8")):
                raw = m.group(group)
                if raw is None:
                    continue
                try:
                    value = float(raw.strip()) * factor
                except ValueError:
                    continue
                if math.isfinite(value):
                    out.append(value)
    except OSError:
        return out
    return out
