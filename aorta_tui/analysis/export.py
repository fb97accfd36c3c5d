"""Frames to files: one CSV or parquet file per frame, each written atomically."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from aorta_tui.core.errors import EnvironmentProblem, UsageError

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "parquet")


def export_frames(source: Path, fmt: str, output: Path | None,
                  notes: list[str] | None = None) -> list[tuple[Path, int]]:
    """Write every frame of ``source`` into ``output`` (a directory); returns (path, rows).
    What the frames leave out, and why, is appended to ``notes``."""
    from aorta_tui.analysis.frames import load, require_pandas
    from aorta_tui.bundle.archive import identify_input
    from aorta_tui.core.atomic import atomic_write_bytes

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}",
                         hint="--format csv, or --format parquet (needs pyarrow)")
    require_pandas()
    if fmt == "parquet":
        _require_pyarrow()
    inp = identify_input(source)
    out_dir = output if output is not None else Path(f"{Path(inp.name).stem if inp.kind == 'queue-result' else inp.name}-export")
    _check_output_dir(out_dir)
    frames = load(inp.path)
    left_out = frames["trials"].attrs.get("left_out", []) if "trials" in frames else []
    if left_out and notes is not None:
        shown = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
        notes.append(f"{len(left_out)} trial(s) finished in the journal but have no whole "
                     f"result.json (damaged or missing), so they are not in trials/steps: {shown}")
    encoded = {name: _encode(df, fmt) for name, df in frames.items()}  # all before any write
    written = []
    try:
        out_dir.mkdir(parents=False, exist_ok=True)
        for name, data in encoded.items():
            path = atomic_write_bytes(out_dir / f"{name}.{fmt}", data)
            written.append((path, len(frames[name])))
    except OSError as exc:
        raise EnvironmentProblem(f"{exc.filename or out_dir}: cannot write: {exc.strerror or exc}",
                                 hint="pick another -o DIR or free space") from None
    return written


def _encode(df: pd.DataFrame, fmt: str) -> bytes:
    if fmt == "csv":
        return df.to_csv(index=False).encode("utf-8")
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


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
