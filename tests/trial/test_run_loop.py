"""The one run loop (trial/run_loop.py) driven by a small engine over a real run directory:
what it runs, in which order, what a resume keeps, what stops it and what it says."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from aorta_tui.core.errors import AortaError, ExitCode
from aorta_tui.core.events import (
    CallbackSink,
    Event,
    EventBus,
    Progress,
    RunStarted,
    RunWarning,
    TrialFinished,
)
from aorta_tui.store.lock import lock_holder
from aorta_tui.store.naming import JOURNAL
from aorta_tui.store.run_store import RunStore, StoreLayout
from aorta_tui.trial.run_loop import RunOutcome, RunPlan, TakeOver, TrialEngine, run_planned

LAYOUT = StoreLayout(sweep_ids=False)
TRIALS = ["t1", "t2", "t3", "t4"]


class _Engine(TrialEngine[str, RunOutcome]):
    """Writes each trial's result, then its journal line, and records every step it is asked."""

    def __init__(self, store: RunStore, bus: EventBus, *, stop_at: str = "", skip: str = "",
                 cancel_after: str = "", cancel: threading.Event | None = None,
                 ctrl_c_at: str = "") -> None:
        self.store, self.bus, self.steps = store, bus, []
        self.stop_at, self.skip, self.ctrl_c_at = stop_at, skip, ctrl_c_at
        self.cancel_after, self.cancel = cancel_after, cancel
        self.previous: TakeOver | None = None

    def take_over(self, previous: TakeOver) -> None:
        self.previous = previous
        self.steps.append("take_over")

    @contextlib.contextmanager
    def prepare(self, pending: Sequence[str]) -> Iterator[None]:
        self.steps.append(f"prepare {','.join(pending)}")
        yield
        self.steps.append("prepared closed")

    def announce(self) -> None:
        self.steps.append("announce")

    @contextlib.contextmanager
    def running(self, pending: Sequence[str]) -> Iterator[None]:
        self.steps.append("running")
        yield
        self.steps.append("running closed")

    def should_run(self, trial: str) -> bool:
        return trial != self.skip

    def run_trial(self, trial: str) -> str | None:
        self.steps.append(trial)
        if trial == self.ctrl_c_at:
            raise KeyboardInterrupt
        if trial == self.stop_at:
            return None
        self.store.make_trial_dir(trial)
        self.store.write_result(trial, {"trial": trial})
        self.bus.emit(TrialFinished("run", trial_id=trial, cell=trial, trial=1, verdict="pass"))
        if trial == self.cancel_after and self.cancel is not None:
            self.cancel.set()
        return f"{trial} done"

    def finish(self, status: str, exit_code: int) -> RunOutcome:
        self.steps.append(f"finish {status} {exit_code}")
        return RunOutcome(self.store.path, status, exit_code)

    def write_failed(self, problem: AortaError) -> None:
        self.steps.append("write_failed")


def _run(run_dir: Path, *, resumed: bool = False, **engine_args: object
         ) -> tuple[str, _Engine, list[Event]]:
    """(status, the engine, the events the bus carried) of one session on ``run_dir``."""
    seen: list[Event] = []
    store, bus = RunStore(run_dir, LAYOUT), EventBus([CallbackSink(seen.append)])
    cancel = threading.Event()
    engine = _Engine(store, bus, cancel=cancel, **engine_args)  # type: ignore[arg-type]
    plan = RunPlan("run", source="test", trials=TRIALS, trial_id=str, cells=TRIALS,
                   resumed=resumed, resume_command=f"resume {run_dir}")
    return run_planned(store, bus, plan, engine, cancel=cancel).status, engine, seen


def _ran(engine: _Engine) -> list[str]:
    return [step for step in engine.steps if step in TRIALS]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    path.mkdir()
    return path


def test_every_trial_runs_once_in_order_inside_the_engines_resources(run_dir: Path) -> None:
    status, engine, seen = _run(run_dir)
    assert status == "completed"
    assert engine.steps == ["prepare t1,t2,t3,t4", "announce", "running", *TRIALS,
                            "running closed", "finish completed 0", "prepared closed"]
    started = [e for e in seen if isinstance(e, RunStarted)]
    assert [(s.total, s.resumed, s.already_done) for s in started] == [(4, False, 0)]
    assert [e.done for e in seen if isinstance(e, Progress)] == [1, 2, 3, 4]
    assert lock_holder(run_dir) is None  # released


def test_a_stop_between_trials_interrupts_and_a_resume_runs_only_the_rest(run_dir: Path) -> None:
    status, engine, _ = _run(run_dir, cancel_after="t2")
    assert (status, engine.steps[-2]) == ("interrupted", f"finish interrupted {int(ExitCode.INTERRUPTED)}")
    assert "t3" not in engine.steps

    status, engine, seen = _run(run_dir, resumed=True)
    assert status == "completed"
    assert engine.steps[:2] == ["take_over", "prepare t3,t4"]
    assert _ran(engine) == ["t3", "t4"]
    assert engine.previous is not None and engine.previous.unfinished == {"t3", "t4"}
    assert engine.previous.sessions == 1
    started = next(e for e in seen if isinstance(e, RunStarted))
    assert (started.resumed, started.already_done) == (True, 2)
    assert [e.done for e in seen if isinstance(e, Progress)] == [3, 4]


def test_a_trial_the_engine_stops_ends_the_run_as_interrupted(run_dir: Path) -> None:
    status, engine, seen = _run(run_dir, stop_at="t2")
    assert status == "interrupted"
    assert _ran(engine) == ["t1", "t2"]
    assert [e.done for e in seen if isinstance(e, Progress)] == [1]  # the stopped one never counts


def test_a_skipped_trial_is_not_run_and_not_done(run_dir: Path) -> None:
    status, engine, seen = _run(run_dir, skip="t3")
    assert status == "completed"
    assert _ran(engine) == ["t1", "t2", "t4"]
    _, engine, _ = _run(run_dir, resumed=True)  # a later session may still run it
    assert _ran(engine) == ["t3"]


def test_ctrl_c_leaves_the_engines_record_and_the_lock_free(run_dir: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        _run(run_dir, ctrl_c_at="t2")
    assert lock_holder(run_dir) is None
    status, engine, _ = _run(run_dir, resumed=True)
    assert _ran(engine) == ["t2", "t3", "t4"]


def test_a_resume_says_each_damaged_journal_line_after_run_started(run_dir: Path) -> None:
    _run(run_dir, cancel_after="t1")
    with open(run_dir / JOURNAL, "ab") as journal:
        journal.write(b"{not json\n")
    _, _, seen = _run(run_dir, resumed=True)
    kinds = [type(e).__name__ for e in seen]
    damaged = [e for e in seen if isinstance(e, RunWarning) and e.code == "journal_damaged"]
    assert len(damaged) == 1 and f"{JOURNAL}:" in damaged[0].message
    assert kinds.index("RunStarted") < seen.index(damaged[0])
