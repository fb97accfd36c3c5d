"""The seam between a run and what starts its trials: zygote pools (``trial/warm.py``,
``trial/prepared.py``) and executors (``executor/``).

They used to receive the orchestrator's ``Sweep`` typed ``Any`` and read its private members
(``_workload_cls``, ``_base_env()``). This protocol names exactly what they may use, with
types a checker reads; the sweep fills it (``sweep/orchestrator.py``). It lives here, below
the sweep, because imports point down (docs/architecture.md): a lower package declares what it
needs and the higher one provides it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from aorta_tui.recipe.model import Recipe
    from aorta_tui.registry.workload import Workload


class CellLike(Protocol):
    """What a pool reads of one planned cell (``sweep.plan.CellPlan`` fills it)."""

    @property
    def name(self) -> str: ...
    @property
    def docker(self) -> str | None: ...
    @property
    def environment(self) -> str: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def workload_config(self) -> dict[str, Any] | None: ...


class PlanLike(Protocol):
    """What a pool reads of the plan: a cell by name (``sweep.plan.Plan`` fills it)."""

    def cell(self, name: str) -> CellLike: ...
    @property
    def cells(self) -> Sequence[CellLike]: ...


class TrialHost(Protocol):
    """The run that owns the trials, as the pools and executors see it."""

    @property
    def recipe(self) -> Recipe: ...
    @property
    def plan(self) -> PlanLike: ...
    @property
    def cancel(self) -> threading.Event: ...
    @property
    def workload_cls(self) -> type[Workload] | None:
        """The recipe's workload class (a ``registry.workload.Workload`` subclass), None for a
        probe recipe; loaded and checked once by the run."""
    def base_env(self) -> dict[str, str]:
        """The environment every child starts from (the bytecode cache applied)."""
        ...
