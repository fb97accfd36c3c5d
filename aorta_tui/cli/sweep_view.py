"""How `sweep run` / ``--batch`` shows a run: :class:`SweepRunView`, the command line's own.

A module of its own, below ``sweep_flow`` and ``sanitizer_flow``, which both take it (the one
importing the other's type would make an import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aorta_tui.cli.metrics_opts import MetricsRequest


@dataclass(frozen=True)
class SweepRunView:
    """The options of `sweep run` the engine never reads, so they stay beside the engine's
    :class:`~aorta_tui.sweep.way_in.SweepRequest`, not in it (the request's file form, the
    agent's hand-over to ``sweep/child.py``, has no use for them)."""

    dry_run: bool = False  # --dry-run: print the plan and exit
    json_mode: bool = False  # --json: the events as JSON lines on stdout (and an error as one)
    verbose: int = 0  # -v: a line per trial on stderr; -vv: also the engine's debug log
    metrics: MetricsRequest | None = None  # --metrics ADDR: the run's progress for Prometheus
