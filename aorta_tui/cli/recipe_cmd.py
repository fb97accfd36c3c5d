"""`aorta-tui recipe ...` commands (being built; see the issue tracker)."""

from __future__ import annotations

from aorta_tui.cli.common import new_app

app = new_app("recipe commands.")
