"""The loaders as pandas DataFrames, for notebooks: one DataFrame per table of ``tables.py``
(same names, same columns, same rows); :func:`load` picks the loader by what the path is.

pandas is the ``analysis`` extra: without it every loader here raises an EnvironmentProblem
naming the extra (``export --format csv`` needs none: it writes the tables themselves)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from aorta_tui.analysis import tables as T
from aorta_tui.core.errors import EnvironmentProblem

if TYPE_CHECKING:
    import pandas as pd

Frames = dict[str, "pd.DataFrame"]
EXTRA_HINT = "pip install 'aorta-tui[analysis]' (or: pip install 'pandas>=2')"


def require_pandas() -> ModuleType:
    """The pandas module, or a clear EnvironmentProblem naming the extra that provides it."""
    try:
        import pandas
    except ImportError:
        raise EnvironmentProblem("pandas is not installed: results as DataFrames need the "
                                 "`analysis` extra", hint=EXTRA_HINT) from None
    return pandas


def as_frames(tables: T.Tables) -> Frames:
    """Each table as a DataFrame; a table's ``left_out`` is the frame's ``attrs["left_out"]``."""
    pd = require_pandas()
    frames = {}
    for name, table in tables.items():
        frames[name] = df = pd.DataFrame(table.rows, columns=list(table.columns))
        df.attrs["left_out"] = list(table.left_out)
    return frames


def _framed(loader: Callable[[Path], T.Tables], path: str | Path) -> Frames:
    require_pandas()  # before any file is read: the missing extra is the first thing said
    return as_frames(loader(Path(path)))


def load(path: str | Path) -> Frames:
    """The frames of a run directory, a policy sweep directory or a queue result file."""
    return _framed(T.load_tables, path)


def load_run(run_dir: str | Path) -> Frames:
    """``trials`` (one row per finished trial of the plan, ``attrs["left_out"]``: the trials
    the journal finished whose result.json is not whole), ``cells`` and ``steps``."""
    return _framed(T.run_tables, run_dir)


def load_policy_sweep(run_dir: str | Path) -> Frames:
    """``trials``, ``policies`` (per metric its median and 95% interval) and ``per_stream``."""
    return _framed(T.policy_sweep_tables, run_dir)


def load_queue(path: str | Path) -> Frames:
    """``points``, ``per_stream`` and ``iterations`` of a queue result or sweep."""
    return _framed(T.queue_tables, path)
