"""The matrix screen's model: the journal's events folded into a cells x trials grid.

Pure Python (no Textual), so it is tested on real journals directly. It only arranges what the
engine reported: verdicts, detectors and exit status come from ``TrialFinished``, per-cell
failure rate, step time and confound from ``CellAggregated``. The only figure computed here is
the ETA, and it says how (the pace of trials finished since this run last started).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_tui.core.events import (
    CellAggregated,
    Event,
    ResultWritten,
    RunFinished,
    RunStarted,
    RunWarning,
    TrialFinished,
    TrialLaunch,
    TrialStarted,
)
from aorta_tui.core.inputs import INPUT_LIMITS, read_json_or_none
from aorta_tui.store.plan_doc import PLAN_FILE, plan_or_none

PENDING, RUNNING = "pending", "running"


@dataclass
class TrialView:
    """One cell of the grid: the engine's ``TrialFinished`` (once there is one), wrapped with
    what only a display needs (its state while pending or running, the attempt and pid of
    ``TrialStarted``). The trial's figures are read from the engine's event, never copied."""

    trial_id: str
    cell: str
    trial: int
    state: str = PENDING  # pending, running, pass, fail, error
    attempt: int = 1
    pid: int | None = None
    launching: bool = False  # its trial_launch is in, its trial_started not yet (start-up)
    finished: TrialFinished | None = None  # the last attempt's, kept while a re-run runs

    @property
    def exit_code(self) -> int | None:
        return self.finished.exit_code if self.finished else None

    @property
    def signal(self) -> int | None:
        return self.finished.signal if self.finished else None

    @property
    def wall_s(self) -> float | None:
        return self.finished.wall_s if self.finished else None

    @property
    def detectors(self) -> list[str]:
        return list(self.finished.detectors) if self.finished else []

    @property
    def reason(self) -> str:
        return self.finished.reason if self.finished else ""

    @property
    def trial_dir(self) -> str:
        return self.finished.trial_dir if self.finished else ""

    @property
    def mean_step_s(self) -> float | None:
        return self.finished.mean_step_s if self.finished else None


@dataclass
class MatrixState:
    run_dir: Path
    run_id: str = ""
    total: int = 0
    cells: list[str] = field(default_factory=list)
    trials: dict[tuple[str, int], TrialView] = field(default_factory=dict)
    cell_stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    status: str | None = None  # None while running; completed, interrupted, failed
    exit_code: int | None = None
    warnings: list[str] = field(default_factory=list)
    results: list[tuple[str, str]] = field(default_factory=list)
    resumed: bool = False
    _pace_start_ts: float | None = None
    _pace_done: int = 0
    _pace_last_ts: float | None = None
    # Slurm runs: trial id -> (node, job state) from slurm/jobs.json (empty for local runs)
    placement: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    _placement_stamp: tuple[int, int] | None = None

    @classmethod
    def for_run(cls, run_dir: Path) -> MatrixState:
        """Start from the run's plan (so pending trials show before they start), if written."""
        state = cls(run_dir=Path(run_dir))
        plan_path = state.run_dir / PLAN_FILE
        # read here (the screen's worker waits on this call), taken apart by the plan's reader
        plan = plan_or_none(read_json_or_none(plan_path, limit=INPUT_LIMITS["plan"]),
                            where=str(plan_path))
        if plan is None:  # none yet, or a damaged one: the journal's trials only
            return state
        for entry in plan.trials:
            if entry.cell is not None and entry.trial is not None:  # else no place in the grid
                state._ensure(entry.cell, entry.trial, entry.trial_id)
        return state

    # --- folding -------------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.run_id = event.run_id
            self.total = event.total
            self.resumed = event.resumed
            self.status = None
            self.exit_code = None
            for cell in event.cells:
                if cell not in self.cells:
                    self.cells.append(cell)
            self._pace_start_ts, self._pace_done, self._pace_last_ts = event.ts, 0, event.ts
        elif isinstance(event, TrialLaunch):  # its 3-7 s start-up is part of running it
            view = self._ensure(event.cell, event.trial, event.trial_id)
            view.state, view.attempt, view.pid, view.launching = RUNNING, event.attempt, None, True
        elif isinstance(event, TrialStarted):
            view = self._ensure(event.cell, event.trial, event.trial_id)
            view.state, view.attempt, view.pid = RUNNING, event.attempt, event.pid
            view.launching = False
        elif isinstance(event, TrialFinished):
            view = self._ensure(event.cell, event.trial, event.trial_id)
            view.state, view.finished, view.launching = event.verdict, event, False
            self._pace_done += 1
            self._pace_last_ts = event.ts
        elif isinstance(event, CellAggregated):
            self.cell_stats[event.cell] = event.stats.to_dict()  # the figures as the grid reads them
        elif isinstance(event, RunWarning):
            self.warnings.append(event.message)
        elif isinstance(event, ResultWritten):
            self.results.append((event.what, event.path))
        elif isinstance(event, RunFinished):
            self.status, self.exit_code = event.status, event.exit_code
            for view in self.trials.values():
                if view.state == RUNNING:  # the orchestrator stopped without finishing it
                    view.state = PENDING

    def apply_all(self, events: list[Event]) -> None:
        for event in events:
            self.apply(event)

    def _ensure(self, cell: str, trial: int, trial_id: str = "") -> TrialView:
        if cell not in self.cells:
            self.cells.append(cell)
        key = (cell, trial)
        view = self.trials.get(key)
        if view is None:
            view = TrialView(trial_id=trial_id or f"{cell}/trial-{trial:03d}", cell=cell, trial=trial)
            self.trials[key] = view
        elif trial_id and not view.trial_id:
            view.trial_id = trial_id
        return view

    @property
    def placement_stamp(self) -> tuple[int, int] | None:
        """(mtime ns, size) of the ``slurm/jobs.json`` that ``placement`` was read from."""
        return self._placement_stamp

    def set_placement(self, stamp: tuple[int, int], placement: dict[str, tuple[str | None, str | None]]) -> None:
        """What :func:`read_placement_file` read (the TUI reads it in a worker, then sets it here)."""
        self._placement_stamp, self.placement = stamp, placement

    def read_placement(self) -> bool:
        """Where each trial of a Slurm run runs (``slurm/jobs.json``, written by the executor at
        most once a second); re-read only when the file changed. True when it changed."""
        read = read_placement_file(self.run_dir, self._placement_stamp)
        if read is None:
            return False
        self.set_placement(*read)
        return True

    # --- reading -------------------------------------------------------------------------

    @property
    def trial_numbers(self) -> list[int]:
        return sorted({trial for (_cell, trial) in self.trials})

    def count(self, state: str) -> int:
        return sum(1 for v in self.trials.values() if v.state == state)

    @property
    def done(self) -> int:
        return sum(1 for v in self.trials.values() if v.state not in (PENDING, RUNNING))

    @property
    def running(self) -> list[TrialView]:
        return [v for v in self.trials.values() if v.state == RUNNING]

    def cell_counts(self, cell: str) -> tuple[int, int, int]:
        """(finished, failed, errored) trials of ``cell`` so far, counted from the journal."""
        views = [v for (c, _t), v in self.trials.items() if c == cell]
        finished = [v for v in views if v.state not in (PENDING, RUNNING)]
        return (
            len(finished),
            sum(1 for v in finished if v.state == "fail"),
            sum(1 for v in finished if v.state == "error"),
        )

    def trial_path(self, view: TrialView) -> Path | None:
        """The trial's own directory, ``<run_dir>/trials/<cell>/trial-<NNN>``.

        Always taken from the run directory's layout, never from the journal's ``trial_dir``:
        that path was written as the orchestrator saw it (relative to *its* working directory,
        ``aorta-out/...`` by default, or absolute before the run was moved), so joining or
        trusting it breaks as soon as the TUI runs elsewhere. ``None`` for an id that is not a
        ``<cell>/trial-<NNN>`` of this run (it would name a path outside ``trials/``).
        """
        from aorta_tui.store.naming import is_trial_id

        if not is_trial_id(view.trial_id):
            return None
        return self.run_dir / "trials" / view.trial_id

    def eta_s(self) -> float | None:
        """Remaining trials x the mean time per finished trial since the run (re)started.

        ``None`` until one trial has finished in this session, or once the run has ended.
        """
        if self.status is not None or self._pace_done == 0:
            return None
        if self._pace_start_ts is None or self._pace_last_ts is None:
            return None
        per_trial = (self._pace_last_ts - self._pace_start_ts) / self._pace_done
        remaining = max(0, (self.total or len(self.trials)) - self.done)
        return per_trial * remaining


def read_placement_file(run_dir: Path, stamp: tuple[int, int] | None
                        ) -> tuple[tuple[int, int], dict[str, tuple[str | None, str | None]]] | None:
    """(stamp, placement) of ``run_dir``'s ``slurm/jobs.json`` when its stamp (mtime ns, size)
    is not ``stamp``; None when it is unchanged, missing (a local run) or unreadable now (read
    again next time). File reads: the TUI calls this in a worker."""
    path = Path(run_dir) / "slurm" / "jobs.json"
    try:
        st = path.stat()
    except OSError:
        return None  # a local run: nothing to show, the grid looks as it always did
    new_stamp = (st.st_mtime_ns, st.st_size)
    if new_stamp == stamp:
        return None
    from aorta_tui.core.errors import AortaError
    from aorta_tui.core.inputs import INPUT_LIMITS, load_json_input
    from aorta_tui.executor.slurm_jobs_doc import WHAT

    try:
        data = load_json_input(path, what=WHAT, limit=INPUT_LIMITS[WHAT])
    except AortaError:  # foreign or unreadable now: read again next time
        return None
    return new_stamp, parse_placement(data, where=str(path))


def parse_placement(data: object, where: str = "slurm/jobs.json"
                    ) -> dict[str, tuple[str | None, str | None]]:
    """``slurm/jobs.json`` -> trial id -> (node, state). A trial whose batch was submitted but
    whose job has not started yet is PENDING; a foreign or odd entry is skipped."""
    from aorta_tui.core.errors import UsageError
    from aorta_tui.executor.slurm_jobs_doc import SlurmJobs

    try:
        # a damaged entry is left out, the others shown; a file that is no job map at all
        # shows no placement (until it changes), as the grid always did
        jobs = SlurmJobs.from_dict(data, where=where, leave_out_damaged=True)
    except UsageError:
        return {}
    out: dict[str, tuple[str | None, str | None]] = {}
    for tid, rec in jobs.trials.items():
        node, state = (rec.place.node, rec.place.state) if rec.place else (None, None)
        batch = jobs.batches.get(rec.batch)
        if state is None and batch is not None and batch.job_id:
            state = "PENDING"
        if rec.cancelled_by_orchestrator and state in (None, "PENDING", "RUNNING"):
            state = "CANCELLED"
        out[tid] = (node or None, state or None)
    return out


def stat_value(stats: dict[str, Any], *names: str) -> object:
    """First present value among ``names``; dotted names reach into nested dicts."""
    for name in names:
        node: object = stats
        for part in name.split("."):
            if not isinstance(node, dict) or part not in node:
                node = None
                break
            node = node[part]
        if node is not None:
            return node
    return None
