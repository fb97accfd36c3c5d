"""Where a sweep's trials run: an executor starts a trial's worker somewhere and reports how
its process ended (a :class:`~aorta_tui.trial.supervisor.ProcessOutcome`). The planner, the
classifier learns where a trial ran only as typed input (:class:`~aorta_tui.classify.placement.Placement`);
the aggregation and the reports do not know which executor ran a trial.

- ``local`` (:mod:`.local`, the default): a process on this machine (``trial/supervisor.py``).
- ``slurm`` (:mod:`.slurm`): a task of a batched Slurm job array, running the same worker on
  a compute node and writing into the same run directory (docs/slurm.md).

The orchestrator (``sweep/orchestrator.py``) calls, in order: ``check`` (before anything is written),
``adopt`` (on a resume: trials whose job still runs are not retired), ``begin`` (the pending
trials), ``run`` once per trial in plan order, ``placement`` of its outcome (typed input to the
classifier: an executor never classifies), ``end``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from aorta_tui.classify.placement import Placement
from aorta_tui.executor.host import ExecutorHost, ExecutorTrial

if TYPE_CHECKING:
    import threading

    from aorta_tui.classify.model import Outcome
    from aorta_tui.recipe.model import Recipe
    from aorta_tui.trial.supervisor import ProcessOutcome, ProcessSpec


class Executor(Protocol):
    kind: str

    def check(self, sweep: ExecutorHost, *, dry_run: bool) -> list[str]: ...

    def adopt(self, run_dir: Path, unfinished: set[str]) -> set[str]: ...

    def begin(self, sweep: ExecutorHost, run_dir: Path, pending: Sequence[ExecutorTrial], session: int) -> None: ...

    def run(self, trial: ExecutorTrial, pspec: ProcessSpec, *, cancel: threading.Event,
            on_start: Callable[[int | None], None]) -> ProcessOutcome: ...

    def placement(self, outcome: Outcome | None) -> Placement | None: ...

    def end(self, *, interrupted: bool) -> None: ...


def executor_for(recipe: Recipe) -> Executor:
    if recipe.executor.kind == "slurm":
        from aorta_tui.executor.slurm import SlurmExecutor

        return SlurmExecutor(recipe)
    from aorta_tui.executor.local import LocalExecutor

    return LocalExecutor()


def with_executor_kind(recipe: Recipe, kind: str) -> Recipe:
    """``--executor KIND``: the recipe's executor block with its kind replaced (a recipe's
    Slurm options stay; switching to local drops them, since local takes none)."""
    from aorta_tui.core.errors import UsageError
    from aorta_tui.recipe.keys import EXECUTOR_KINDS
    from aorta_tui.recipe.model import ExecutorSpec

    if kind not in EXECUTOR_KINDS:
        raise UsageError(f"--executor {kind!r} is not an executor",
                         hint=f"use one of {', '.join(EXECUTOR_KINDS)}")
    spec = recipe.executor if kind == "slurm" else ExecutorSpec()
    return dataclasses.replace(recipe, executor=dataclasses.replace(spec, kind=kind))






