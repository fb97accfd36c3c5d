"""Tables to files: one CSV or parquet file per table, each written atomically.

CSV is written by the standard library from the tables themselves (no pandas: the quickstart's
``export --format csv`` works on a fresh install); parquet goes through pandas and pyarrow."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from aorta_tui.analysis.tables import Table
from aorta_tui.core.errors import EnvironmentProblem, UsageError

FORMATS = ("csv", "parquet")


def export_frames(source: Path, fmt: str, output: Path | None,
                  notes: list[str] | None = None) -> list[tuple[Path, int]]:
    """Write every frame of ``source`` into ``output`` (a directory); returns (path, rows).
    What the frames leave out, and why, is appended to ``notes``."""
    from aorta_tui.analysis.tables import load_tables
    from aorta_tui.bundle.archive import identify_input
    from aorta_tui.core.atomic import atomic_write_bytes

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}",
                         hint="--format csv, or --format parquet (needs pyarrow)")
    if fmt == "parquet":
        from aorta_tui.analysis.frames import require_pandas

        require_pandas()
        _require_pyarrow()
    inp = identify_input(source)
    out_dir = output if output is not None else Path(f"{Path(inp.name).stem if inp.kind == 'queue-result' else inp.name}-export")
    _check_output_dir(out_dir)
    tables = load_tables(inp.path)
    left_out = list(tables["trials"].left_out) if "trials" in tables else []
    if left_out and notes is not None:
        shown = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
        notes.append(f"{len(left_out)} trial(s) finished in the journal but have no whole "
                     f"result.json (damaged or missing), so they are not in trials/steps: {shown}")
    encoded = {name: _encode(t, fmt) for name, t in tables.items()}  # all before any write
    written = []
    try:
        out_dir.mkdir(parents=False, exist_ok=True)
        for name, data in encoded.items():
            path = atomic_write_bytes(out_dir / f"{name}.{fmt}", data)
            written.append((path, len(tables[name].rows)))
    except OSError as exc:
        raise EnvironmentProblem(f"{exc.filename or out_dir}: cannot write: {exc.strerror or exc}",
                                 hint="pick another -o DIR or free space") from None
    return written


def _encode(table: Table, fmt: str) -> bytes:
    if fmt == "csv":
        return _csv(table)
    from aorta_tui.analysis.frames import as_frames

    buf = io.BytesIO()
    as_frames({"t": table})["t"].to_parquet(buf, index=False)
    return buf.getvalue()


def _csv(table: Table) -> bytes:
    """The table as pandas' ``to_csv(index=False)`` writes it (a header even without rows,
    minimal quoting, "\n" line ends, an empty cell for None and NaN), except that an integer
    stays an integer where a column also holds an empty cell (pandas made such a column float
    and wrote 3 as "3.0")."""
    if not table.columns:  # no row named a column: empty lines, as pandas writes them
        return b"\n" * (1 + len(table.rows))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow([_cell(row.get(c)) for c in table.columns])
    return buf.getvalue().encode("utf-8")


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)  # a float's str is its shortest round-trip form, as pandas writes it


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise EnvironmentProblem("--format parquet needs pyarrow, which is not installed",
                                 hint="pip install pyarrow, or use --format csv") from None


def _check_output_dir(out_dir: Path) -> None:
    hint = "pass -o DIR: a directory (created if its parent exists)"
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} exists and is not a directory", hint=hint)
    if not out_dir.parent.is_dir():
        raise UsageError(f"{out_dir}: the directory {out_dir.parent} does not exist", hint=hint)
