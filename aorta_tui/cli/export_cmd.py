"""`aorta-tui export RUN_DIR --format csv|parquet`: a run's results as tables for notebooks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from aorta_tui.cli.common import cli_command

FORMATS = ("csv", "parquet")


@cli_command
def export(
    source: Path = typer.Argument(..., metavar="RUN_DIR",
                                  help="A run directory, a policy sweep directory or a queue result file."),
    fmt: str = typer.Option("csv", "--format", "-f", help="csv or parquet (parquet needs pyarrow)."),
    output: Path | None = typer.Option(  # noqa: UP007 - typer needs Optional on 3.10
        None, "-o", "--output", metavar="DIR",
        help="Directory for the tables (default ./<input name>-export)."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Write a run's results as tables: trials, cells and per-step times of a sweep; trials and
    policies of a policy sweep; points, per-stream figures and iterations of a queue result.

    One file per table (trials.csv, cells.csv, steps.csv ...), each written atomically. CSV
    needs nothing extra; parquet needs the `analysis` extra (pandas) and pyarrow.

    Example: aorta-tui export aorta-out/T-1/20261201-101500-ab12 --format csv -o tables/
    """
    from aorta_tui.analysis.export import export_frames

    notes: list[str] = []
    written = export_frames(source, fmt, output, notes)
    if as_json:
        print(json.dumps({"format": fmt, "files": [{"path": str(p), "rows": n}
                                                    for p, n in written], "notes": notes}, indent=2))
        return
    for path, rows in written:
        print(f"wrote {path} ({rows} rows)")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
