"""The local executor: each trial a process on this machine (``trial/supervisor.run_process``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import threading
    from collections.abc import Sequence

    from aorta_tui.classify.model import Outcome
    from aorta_tui.executor.host import ExecutorHost, ExecutorTrial
    from aorta_tui.trial.supervisor import ProcessOutcome, ProcessSpec


class LocalExecutor:
    kind = "local"

    def check(self, sweep: ExecutorHost, *, dry_run: bool) -> list[str]:
        return []

    def adopt(self, run_dir: Path, unfinished: set[str]) -> set[str]:
        # A run whose trials were Slurm jobs, resumed here (--executor local): refused while
        # one of their jobs still runs, or this machine would run that trial beside it.
        from aorta_tui.executor.slurm import SlurmExecutor

        SlurmExecutor.refuse_unsettled(run_dir, unfinished, self.kind)
        return set()  # a local trial left by a dead orchestrator is ended and run again

    def begin(self, sweep: ExecutorHost, run_dir: Path, pending: Sequence[ExecutorTrial], session: int) -> None:
        return None

    def run(self, trial: ExecutorTrial, pspec: ProcessSpec, *, cancel: threading.Event,
            on_start: Callable[[int | None], None]) -> ProcessOutcome:
        from aorta_tui.trial.supervisor import run_process

        return run_process(pspec, cancel=cancel, on_start=on_start)

    def placement(self, outcome: Outcome | None) -> None:
        return None  # this machine: the classifier's own view stands

    def end(self, *, interrupted: bool) -> None:
        return None
