"""What a screen may ask of the app that hosts it.

Screens (``screens/base.py``) type ``self.aorta`` as this protocol rather than importing
``AortaApp``: the app imports every screen, so a screen importing the app back was an import
cycle (hidden under ``TYPE_CHECKING``). ``AortaApp`` satisfies it structurally.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from aorta_tui.tui.machine import MachineFacts
from aorta_tui.tui.settings import TuiSettings


class AortaHost(Protocol):
    output_dir: Path  # where runs are written and listed
    settings: TuiSettings  # what the TUI was told at start (tui/settings.py), never os.environ
    cwd: Path  # where recipes are found; paths are shown relative to it
    fixed_machine_facts: MachineFacts | None  # given facts (snapshot tests), else None
    opened_runs: list[Path]  # every run shown, absolute: quitting names those still running

    def open_run(self, run_dir: Path) -> None: ...

    def open_recipe(self, path: Path | None) -> None: ...

    def action_goto(self, name: str) -> None: ...
