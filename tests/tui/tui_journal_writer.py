"""A process that writes a run journal with the engine's own writer (RunLock + Journal).

Used where a test needs exact control over timing (a torn line, a pause between trials) that a
real sweep cannot give; tests that need the whole engine run a real sweep instead.

    python tui_journal_writer.py RUN_DIR CELLS TRIALS DELAY_S [--die-before-finish]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from aorta_tui.core.events import RunFinished, RunStarted, TrialFinished, TrialStarted
from aorta_tui.store.journal_writer import Journal
from aorta_tui.store.lock import RunLock


def main() -> None:
    run_dir = Path(sys.argv[1])
    cells = sys.argv[2].split(",")
    trials, delay = int(sys.argv[3]), float(sys.argv[4])
    die = "--die-before-finish" in sys.argv
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(run_dir)
    lock.acquire()
    journal = Journal(run_dir / "journal.jsonl")
    rid = run_dir.name
    journal.append(RunStarted(rid, source="sweep", run_dir=str(run_dir), total=len(cells) * trials, cells=cells))
    print("started", flush=True)
    for t in range(trials):
        for cell in cells:
            tid = f"{cell}/trial-{t:03d}"
            journal.append(TrialStarted(rid, trial_id=tid, cell=cell, trial=t))
            time.sleep(delay)
            verdict = "fail" if cell.startswith("bad") else "pass"
            journal.append(TrialFinished(rid, trial_id=tid, cell=cell, trial=t, verdict=verdict,
                                         exit_code=3 if verdict == "fail" else 0, wall_s=delay,
                                         detectors=["nonzero_exit"] if verdict == "fail" else []))
    if die:
        return  # the lock goes with the process: an interrupted run
    journal.append(RunFinished(rid, status="completed", exit_code=0))
    journal.close()
    lock.release()


if __name__ == "__main__":
    main()
