"""The one run loop of every engine that runs planned trials into a run directory (issue 36).

The recipe sweep, the policy sweep and the queue sweep each used to write the same steps by
hand, in slightly different orders: take the run's lock, read what a resume keeps, end the
processes a killed run left, open the journal first on the bus, say ``RunStarted``, run the
unfinished trials in plan order (a trial counts once its journal line is on disk), stop between
trials when cancelled, write the record of a Ctrl-C before it propagates, turn a full disk into
a located exit 3 that says how to resume, and always release the lock. :func:`run_planned` does
those steps once; an engine fills in only what is its own (:class:`TrialEngine`): what a resume
takes over, the resources its trials share, the warnings it knows before any trial, which
trials it skips, one trial, and its closing document.
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from aorta_tui.core.errors import AortaError, ExitCode
from aorta_tui.core.events import EventBus, Progress, RunStarted, RunWarning
from aorta_tui.store.resume import ResumeState
from aorta_tui.store.run_store import RunStore
from aorta_tui.store.write_errors import write_failure


@dataclass
class RunOutcome:
    """How a run ended, whichever engine ran it: each engine's outcome extends this one (the
    sweep's records and cells, the policy sweep's report, the queue sweep's document)."""

    run_dir: Path
    status: str  # completed, interrupted
    exit_code: int


Trial = TypeVar("Trial")
Outcome = TypeVar("Outcome", bound=RunOutcome)


@dataclass(frozen=True)
class TakeOver:
    """What a resumed run hands the new session (read under the lock, before ``RunStarted``)."""

    state: ResumeState  # trials done, started and never done, damaged journal lines
    sessions: int  # the ``run_started`` lines the journal already holds
    unfinished: frozenset[str]  # planned trials to run again (their orphans already ended)
    orphan_notes: tuple[str, ...] = ()  # what ending the orphans found, said after RunStarted


class TrialEngine(ABC, Generic[Trial, Outcome]):
    """What an engine says of its own run; :func:`run_planned` does the rest.

    The four abstract steps are every engine's; the others have the defaults of an engine
    whose trials share nothing (the policy sweep, the queue sweep), and the recipe sweep fills
    them in (its zygotes, snapshots, kernel log, Slurm jobs and ``stop_after``)."""

    def take_over(self, previous: TakeOver) -> None:
        """A resume: what the last session left, under the lock, before the journal opens."""
        return None

    def prepare(self, pending: Sequence[Trial]) -> contextlib.AbstractContextManager[None]:
        """Resources started before the journal opens (so their start overlaps its set-up) and
        held until the run ends, whatever ends it."""
        return contextlib.nullcontext()

    @abstractmethod
    def announce(self) -> None:
        """The warnings known before any trial runs (after ``RunStarted``)."""

    def running(self, pending: Sequence[Trial]) -> contextlib.AbstractContextManager[None]:
        """Resources around the trials themselves (entered after :meth:`announce`)."""
        return contextlib.nullcontext()

    def should_run(self, trial: Trial) -> bool:
        """False: the trial is skipped this session (a rule such as ``stop_after``)."""
        return True

    @abstractmethod
    def run_trial(self, trial: Trial) -> str | None:
        """Run one trial: its result written, then its journal line. Returns the progress
        message, or None when the trial was stopped (the run ends as interrupted). An
        AortaError raised here ends the run (the engine has said why)."""

    @abstractmethod
    def finish(self, status: str, exit_code: int) -> Outcome:
        """The run's closing record (its document, ``RunFinished``); ``status`` is completed
        or interrupted."""

    def keyboard_interrupt(self) -> None:
        """A Ctrl-C reached the loop: the record it leaves before the exception propagates."""
        self.finish("interrupted", int(ExitCode.INTERRUPTED))

    @abstractmethod
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
    recipe_hash: str = ""  # RunStarted's, where a recipe made the plan
    # what the trials' identity tokens are bound to (trial/orphans.py); the run id by default
    identity_key: str = ""
    progress: bool = True  # a Progress event after each trial (the recipe sweep's journal has none)


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
    previous = _take_over(store, plan, ids) if plan.resumed else None
    done = set(previous.state.completed) if previous is not None else set()
    if previous is not None:
        engine.take_over(previous)
    pending = [t for t, tid in zip(plan.trials, ids, strict=True) if tid not in done]
    with engine.prepare(pending):
        bus.prepend(store.open_journal())  # the journal sees every event first
        bus.emit(RunStarted(plan.run_id, source=plan.source, run_dir=str(store.path),
                            total=len(ids), cells=plan.cells, recipe_hash=plan.recipe_hash,
                            resumed=previous is not None and previous.sessions > 0,
                            already_done=len(done)))
        store.check_journal()
        engine.announce()
        if previous is not None:
            _say_take_over(store, bus, plan.run_id, previous)
        try:
            with engine.running(pending):
                status = _run_trials(store, bus, plan, engine, pending, len(done), cancel)
        except KeyboardInterrupt:
            engine.keyboard_interrupt()
            raise
        exit_code = ExitCode.OK if status == "completed" else ExitCode.INTERRUPTED
        outcome = engine.finish(status, int(exit_code))
        store.check_journal()
        return outcome


def _run_trials(store: RunStore, bus: EventBus, plan: RunPlan[Trial],
                engine: TrialEngine[Trial, Outcome], pending: Sequence[Trial], done: int,
                cancel: threading.Event | None) -> str:
    """The trials in plan order; "completed", or "interrupted" when a stop came."""
    for trial in pending:
        if cancel is not None and cancel.is_set():
            return "interrupted"
        if not engine.should_run(trial):
            continue
        message = engine.run_trial(trial)
        store.check_journal()  # a trial is done only once the journal says so
        if message is None:
            return "interrupted"
        done += 1
        if plan.progress:
            bus.emit(Progress(plan.run_id, done=done, total=len(plan.trials), message=message))
    return "completed"


def _take_over(store: RunStore, plan: RunPlan[Trial], ids: list[str]) -> TakeOver:
    """The resume set, and the trial a SIGKILLed run left running ended (only a process that
    carries its token: trial/orphans.py) before any trial directory is reused (issue 27)."""
    from aorta_tui.trial.orphans import end_unfinished

    scan = store.scan()  # read once: the resume set, the orphans and the sessions come from it
    state = store.resume_state(set(ids), scan=scan)
    unfinished = frozenset(ids) - set(state.completed)
    report = end_unfinished(store.path, plan.identity_key or plan.run_id, scan.events,
                            set(unfinished))
    return TakeOver(state, store.sessions(scan), unfinished, tuple(report.warnings()))


def _say_take_over(store: RunStore, bus: EventBus, run_id: str, previous: TakeOver) -> None:
    """What the resume found, once ``RunStarted`` is in the journal: the orphans it ended and
    the journal lines it could not read."""
    for note in previous.orphan_notes:
        bus.emit(RunWarning(run_id, message=f"resume: {note}", code="orphan"))
    for damage in previous.state.damaged:
        bus.emit(RunWarning(run_id, message=f"resume: {damage.describe(store.journal_path)}",
                            code="journal_damaged"))
