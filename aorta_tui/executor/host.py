"""The run as an executor sees it (the seam below the orchestrator; ``trial/host.py``)."""

from __future__ import annotations

from collections.abc import Sequence, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from aorta_tui.trial.host import CellLike, PlanLike, TrialHost

if TYPE_CHECKING:
    from aorta_tui.trial.supervisor import ProcessSpec


class ExecutorTrial(Protocol):
    """What an executor reads of one planned trial (``sweep.plan.TrialSpec`` fills it)."""

    @property
    def trial_id(self) -> str: ...
    @property
    def cell(self) -> str: ...
    @property
    def trial(self) -> int: ...  # its index within the cell


class ExecutorCell(CellLike, Protocol):
    """What an executor reads of a planned cell besides the pools' view
    (``sweep.plan.CellPlan`` fills it)."""

    @property
    def name(self) -> str: ...
    @property
    def docker(self) -> str | None: ...


class ExecutorPlan(PlanLike, Protocol):
    """What an executor reads of the plan besides a cell by name: every cell (the Slurm
    executor checks each cell's world size) and how many trials it holds (``sweep.plan.Plan``
    fills it)."""

    def cell(self, name: str) -> ExecutorCell: ...
    @property
    def cells(self) -> Sequence[ExecutorCell]: ...
    @property
    def trials(self) -> Sized: ...


class ExecutorHost(TrialHost, Protocol):
    """The run as an executor sees it: the pools' view, and the preparation of a trial (its
    directory, environment, argv and ``ProcessSpec``) that a batched submission does ahead."""

    @property
    def plan(self) -> ExecutorPlan: ...

    def prepare_trial(self, run_dir: Path, spec: ExecutorTrial
                      ) -> tuple[ExecutorCell, Path, dict[str, str], list[str], ProcessSpec]: ...
