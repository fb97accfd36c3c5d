"""Start the TUI after checking that there is a terminal to draw on."""

from __future__ import annotations

import sys

from aorta_tui.core.errors import UsageError


def launch_tui() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "the TUI needs a terminal, and stdin/stdout are not one",
            hint="use `aorta-tui --batch RECIPE` (add --json for one event per line) in scripts",
        )
    raise UsageError("the TUI is not built yet", hint="use `aorta-tui --batch RECIPE`")
