"""Results as data: run directories, policy sweeps and queue results as pandas DataFrames.

For notebooks and scripts (docs/analysis.md)::

    from aorta_tui.analysis import load
    frames = load("aorta-out/T-1/20261201-101500-ab12")   # {"trials": df, "cells": df, "steps": df}

pandas is an optional extra (``pip install 'aorta-tui[analysis]'``); without it every loader
raises :class:`~aorta_tui.core.errors.EnvironmentProblem` naming the extra, while
:func:`load_tables` returns the same tables as plain rows (what ``export --format csv`` writes).
Importing this package does not import pandas.
"""

from __future__ import annotations

from aorta_tui.analysis.frames import (
    load,
    load_policy_sweep,
    load_queue,
    load_run,
    require_pandas,
)
from aorta_tui.analysis.tables import Table, load_tables

__all__ = ["Table", "load", "load_policy_sweep", "load_queue", "load_run", "load_tables",
           "require_pandas"]
