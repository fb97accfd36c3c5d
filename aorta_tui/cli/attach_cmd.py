"""`aorta-tui attach RUN_DIR`: re-attach to a sweep by following its journal."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from aorta_tui.cli.common import cli_command


@cli_command
def attach(
    run_dir: Path = typer.Argument(..., help="A run directory (the one that holds journal.jsonl)."),
    plain: bool = typer.Option(False, "--plain", help="Print one plain line per event instead of the TUI."),
) -> None:
    """Re-attach to a running or finished sweep by following its journal.

    Opens the TUI on the matrix screen for that run; with --plain, or when stdout is not a
    terminal, prints the journal's events as plain lines and keeps following until the run
    finishes (or stops without finishing). Quitting never stops the sweep itself.

    Example:

      aorta-tui attach aorta-out/TICKET-1/20261129-101500-ab12
    """
    from aorta_tui.core.errors import RunDirError
    from aorta_tui.store.journal_file import open_journal_file
    from aorta_tui.store.naming import JOURNAL

    journal = open_journal_file(run_dir / JOURNAL)  # a FIFO, /dev/zero, a link: exit 2 here
    if journal is not None:
        journal.close()
    else:
        raise RunDirError(
            f"{run_dir} is not a run directory (no journal.jsonl)",
            hint="pass <output>/<ticket>/<run-id>, e.g. one listed on the TUI's home screen",
        )
    if plain or not (sys.stdin.isatty() and sys.stdout.isatty()):
        from aorta_tui.cli.follow_plain import follow_plain

        raise typer.Exit(follow_plain(run_dir))
    from aorta_tui.cli.tui_launch import launch_tui

    launch_tui(start_run=run_dir)
