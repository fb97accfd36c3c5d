"""`aorta-tui sweep ...` commands."""

from __future__ import annotations

from aorta_tui.cli.common import new_app

app = new_app("Recipe-driven mitigation sweeps.")
