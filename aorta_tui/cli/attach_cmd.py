"""`aorta-tui attach RUN_DIR`: follow a sweep's journal."""

from __future__ import annotations

from pathlib import Path

import typer

from aorta_tui.cli.common import cli_command


@cli_command
def attach(run_dir: Path = typer.Argument(..., help="A run directory (holds journal.jsonl).")) -> None:
    """Re-attach to a running or finished sweep by following its journal."""
    from aorta_tui.core.errors import UsageError

    raise UsageError("`aorta-tui attach` is not built yet")
