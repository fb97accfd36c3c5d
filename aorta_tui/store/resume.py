"""Resume bookkeeping: which trials a run finished (a ``trial_finished`` line and a whole
result file), which it started and never finished, and the journal lines that are damage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aorta_tui.core.events import TrialFinished, TrialStarted
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.store.journal_reader import Damage, JournalScan, scan_journal
from aorta_tui.store.naming import JOURNAL, is_trial_id


@dataclass
class ResumeState:
    completed: dict[str, dict[str, Any]]  # trial_id -> its trial_finished event dict
    interrupted: set[str]  # started, never finished: re-run
    damaged: list[Damage] = field(default_factory=list)  # journal lines that are not events


def read_trial_result(run_dir: Path | RunDirFS, trial_id: str) -> dict[str, Any] | None:
    """``trials/<trial_id>/result.json`` when it is a whole result of that trial, else ``None``.

    Only the trial's own directory is read, through the run's file layer (no link followed):
    a retired attempt (``trial-NNN.interrupted-K``) is evidence, never a result.
    """
    if not is_trial_id(trial_id):
        return None
    rel = f"trials/{trial_id}/result.json"
    if isinstance(run_dir, RunDirFS):
        d = run_dir.read_json_or_none(rel)
    else:
        try:
            with RunDirFS(run_dir) as fs:
                d = fs.read_json_or_none(rel)
        except OSError:
            return None
    if not isinstance(d, dict) or d.get("trial_id", trial_id) != trial_id:
        return None  # not this trial's result (a copied directory), or not a result at all
    if not isinstance(d.get("verdict"), str):
        return None
    cell, _, number = trial_id.partition("/")
    if not isinstance(d.get("cell"), str):
        d["cell"] = cell
    if not isinstance(d.get("trial"), int) or isinstance(d.get("trial"), bool):
        d["trial"] = int(number.removeprefix("trial-"))
    d["trial_id"] = trial_id
    return d


def resume_state(run_dir: Path, trial_ids: set[str] | None = None, *,
                 read_result: Callable[[str], dict[str, Any] | None] | None = None,
                 sweep_ids: bool = True, scan: JournalScan | None = None) -> ResumeState:
    """What the journal says was done, checked against the result files.

    ``trial_ids`` is the plan's set: a journal line about any other trial is not trusted.
    ``read_result`` reads one trial's whole result (default: a sweep's ``result.json``,
    ``read_trial_result``); ``sweep_ids=False`` for another engine's trial ids (a policy sweep's).
    ``scan``: the journal as the caller already read it (a resume reads it once).
    """
    if read_result is None:
        def read_result(tid: str) -> dict[str, Any] | None:
            return read_trial_result(run_dir, tid)
    completed: dict[str, dict[str, Any]] = {}
    started: set[str] = set()
    if scan is None:
        scan = scan_journal(run_dir / JOURNAL, sweep_ids=sweep_ids)
    for ev in scan.events:
        tid = getattr(ev, "trial_id", None)
        if tid is None or (trial_ids is not None and tid not in trial_ids):
            continue
        if isinstance(ev, TrialStarted):
            started.add(tid)
        elif (isinstance(ev, TrialFinished) and tid not in completed
              and read_result(tid) is not None):
            # A finished line without its whole result file is not trusted (the result is
            # written first).
            completed[tid] = ev.to_dict()
    return ResumeState(completed=completed, interrupted=started - set(completed), damaged=scan.damaged)
