"""The one run loop of an engine that runs planned trials into a run directory (issue 36).

The policy sweep and the queue sweep each used to write the same steps by hand, in slightly
different orders: take the run's lock, read what a resume keeps, open the journal first on the
bus, say ``RunStarted``, end the processes a killed run left, run the unfinished trials in plan
order (a trial counts once its journal line is on disk), stop between trials when cancelled,
write the record of a Ctrl-C before it propagates, turn a full disk into a located exit 3 that
says how to resume, and always release the lock. :func:`run_planned` does those steps once; an
engine fills in only what is its own (:class:`TrialEngine`): the warnings it knows before any
trial, one trial, and its closing document.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from aorta_tui.core.errors import AortaError, ExitCode
from aorta_tui.core.events import EventBus, Progress, RunStarted, RunWarning
from aorta_tui.store.run_store import RunStore
from aorta_tui.store.write_errors import write_failure

Trial = TypeVar("Trial")
Outcome = TypeVar("Outcome")
Trial_contra = TypeVar("Trial_contra", contravariant=True)
Outcome_co = TypeVar("Outcome_co", covariant=True)


class TrialEngine(Protocol[Trial_contra, Outcome_co]):
    """What an engine says of its own run; the loop does the rest."""

    def announce(self) -> None:
        """The warnings known before any trial runs (after ``RunStarted``)."""

    def run_trial(self, trial: Trial_contra) -> str:
        """Run one trial: its result written, then its journal line. Returns the progress
        message. An AortaError raised here ends the run (the engine has said why)."""

    def finish(self, status: str, exit_code: int) -> Outcome_co:
        """The run's closing record (its document, ``RunFinished``); ``status`` is completed
        or interrupted (a Ctrl-C calls it too, before the KeyboardInterrupt propagates)."""

    def write_failed(self, problem: AortaError) -> None:
        """A write the machine refused (full disk, quota): said before ``problem`` is raised."""


@dataclass(frozen=True)
class RunPlan(Generic[Trial]):
    run_id: str
    source: str  # RunStarted's source: which engine wrote the run
    trials: Sequence[Trial]  # in the order they run
    trial_id: Callable[[Trial], str]
    cells: list[str]
    resumed: bool
    resume_command: str  # how the user finishes this run after a full disk


def run_planned(store: RunStore, bus: EventBus, plan: RunPlan[Trial],
                engine: TrialEngine[Trial, Outcome], *,
                cancel: threading.Event | None = None) -> Outcome:
    """Run ``plan``'s unfinished trials into ``store``'s directory under its lock; the
    engine's outcome. The lock is taken before the resume set is read (another process may be
    running the same directory) and released whatever happens."""
    store.acquire()
    try:
        return _run_locked(store, bus, plan, engine, cancel)
    except OSError as exc:  # a full disk, a quota, an I/O error: the machine's problem
        problem = write_failure(exc, store.path, resume_command=plan.resume_command)
        if problem is None:
            raise
        engine.write_failed(problem)
        raise problem from None
    finally:
        bus.close()
        store.release()


def _run_locked(store: RunStore, bus: EventBus, plan: RunPlan[Trial],
                engine: TrialEngine[Trial, Outcome], cancel: threading.Event | None) -> Outcome:
    ids = [plan.trial_id(t) for t in plan.trials]
    # a resume keeps the trials whose final result and journal line are both on disk
    done = store.completed(set(ids)) if plan.resumed else set()
    bus.prepend(store.open_journal())  # the journal sees every event first
    bus.emit(RunStarted(plan.run_id, source=plan.source, run_dir=str(store.path), total=len(ids),
                        cells=plan.cells, resumed=plan.resumed, already_done=len(done)))
    engine.announce()
    if plan.resumed:  # before any trial directory is reused (issue 27 item 1)
        _end_orphans(store, bus, plan.run_id, set(ids) - done)
    status, exit_code = "completed", int(ExitCode.OK)
    count = len(done)
    try:
        for trial, tid in zip(plan.trials, ids, strict=True):
            if tid in done:
                continue  # a finished trial is never run again
            if cancel is not None and cancel.is_set():
                status, exit_code = "interrupted", int(ExitCode.INTERRUPTED)
                break
            message = engine.run_trial(trial)
            store.check_journal()  # a trial is done only once the journal says so
            count += 1
            bus.emit(Progress(plan.run_id, done=count, total=len(ids), message=message))
    except KeyboardInterrupt:
        engine.finish("interrupted", int(ExitCode.INTERRUPTED))
        raise
    if cancel is not None and cancel.is_set() and status == "completed" and ids:
        status, exit_code = "interrupted", int(ExitCode.INTERRUPTED)  # the last trial was cut
    return engine.finish(status, exit_code)


def _end_orphans(store: RunStore, bus: EventBus, run_id: str, unfinished: set[str]) -> None:
    """The trial a SIGKILLed run left running is ended (only a process that carries its token:
    trial/orphans.py), and said so, before it runs again."""
    from aorta_tui.trial.orphans import end_unfinished

    report = end_unfinished(store.path, run_id, store.events(), unfinished)
    for note in report.warnings():
        bus.emit(RunWarning(run_id, message=f"resume: {note}", code="orphan"))
