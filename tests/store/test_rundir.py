"""Run directory: lock, journal durability and resume bookkeeping, with real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aorta_tui.core.errors import RunDirError
from aorta_tui.core.events import RunFinished, RunStarted, TrialFinished, TrialStarted
from aorta_tui.store.journal_reader import read_journal
from aorta_tui.store.journal_writer import Journal
from aorta_tui.store.lock import RunLock, lock_holder
from aorta_tui.store.naming import JOURNAL
from aorta_tui.store.resume import resume_state
from aorta_tui.store.run_create import prepare_output
from aorta_tui.store.run_list import list_runs, run_info


def test_second_holder_is_refused_with_the_holders_pid(tmp_path: Path):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from aorta_tui.store.lock import RunLock
            lock = RunLock(Path({str(tmp_path)!r})); lock.acquire()
            print("locked", flush=True)
            time.sleep(60)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirError) as exc:
            RunLock(tmp_path).acquire()
        assert str(holder.pid) in exc.value.message
        found = lock_holder(tmp_path)
        assert found is not None and found.pid == holder.pid
    finally:
        holder.kill()
        holder.wait()
    # The kernel released the lock with the dead holder.
    assert lock_holder(tmp_path) is None
    lock = RunLock(tmp_path)
    lock.acquire()
    lock.release()


def test_torn_last_line_is_ignored(tmp_path: Path):
    j = Journal(tmp_path / JOURNAL)
    j.append(RunStarted("r", source="sweep", run_dir=str(tmp_path), total=2))
    j.append(TrialStarted("r", trial_id="a/trial-000", cell="a", trial=0))
    j.close()
    with open(tmp_path / JOURNAL, "a") as fh:
        fh.write('{"event": "trial_finished", "run_id": "r", "trial_')  # killed mid-write
    events = read_journal(tmp_path)
    assert [e.kind for e in events] == ["run_started", "trial_started"]


def test_resume_state_trusts_only_finished_trials_with_results(tmp_path: Path):
    j = Journal(tmp_path / JOURNAL)
    for tid in ("a/trial-000", "a/trial-001", "b/trial-000"):
        j.append(TrialStarted("r", trial_id=tid, cell=tid.split("/")[0], trial=0))
    for tid in ("a/trial-000", "a/trial-001"):
        j.append(TrialFinished("r", trial_id=tid, cell="a", trial=0, verdict="pass"))
    j.close()
    (tmp_path / "trials/a/trial-000").mkdir(parents=True)
    (tmp_path / "trials/a/trial-000/result.json").write_text(json.dumps({"verdict": "pass"}))
    state = resume_state(tmp_path)
    assert set(state.completed) == {"a/trial-000"}
    assert state.interrupted == {"a/trial-001", "b/trial-000"}


def test_run_info_states(tmp_path: Path):
    run = tmp_path / "T" / "run1"
    run.mkdir(parents=True)
    j = Journal(run / JOURNAL)
    j.append(RunStarted("run1", source="sweep", run_dir=str(run), total=3))
    j.append(TrialFinished("run1", trial_id="a/trial-000", cell="a", trial=0, verdict="pass"))
    j.close()
    with open(run / JOURNAL, "a") as fh:
        fh.write('{"event": "trial_finished", "run_id": "run1", "trial_')  # torn: not counted
    (info,) = list_runs(tmp_path)
    assert (info.state, info.total, info.done, info.ticket) == ("interrupted", 3, 1, "T")
    j = Journal(run / JOURNAL)  # a resumed writer: ends the fragment first
    j.append(RunFinished("run1", status="completed", exit_code=0))
    j.close()
    info = run_info(run)
    assert (info.state, info.done) == ("finished", 1)
    assert [e.kind for e in read_journal(run)] == ["run_started", "trial_finished", "run_finished"]


def test_unwritable_output_is_a_clear_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    from aorta_tui.core.errors import UsageError

    with pytest.raises(UsageError, match="cannot create the run directory"):
        prepare_output(blocker, "T")


@pytest.mark.parametrize(("line", "why"), [
    (b'{"event": "progress", "run_id": "r", "done": true}',
     "progress field 'done' is a boolean, not an integer"),
    (b'{"event": "measurement", "run_id": "r", "source": "q", "name": "n", "reasons": {"x": 1}}',
     "measurement field 'reasons' is an object, not an object (values: a string)"),
    (b'{"event": "trial_finished", "run_id": "r", "trial_id": "a/trial-000", "cell": "a", "trial": 0,'
     b' "verdict": "pass", "detectors": ["x", 1]}',
     "trial_finished field 'detectors' is an array, not an array (items: a string)"),
])
def test_a_field_of_the_wrong_type_makes_the_line_damage_naming_field_and_type(line: bytes, why: str) -> None:
    from aorta_tui.store.journal_reader import parse_journal_line

    assert parse_journal_line(line) == (None, why)


def test_a_nan_figure_the_writer_put_down_leaves_the_line_an_event() -> None:
    # json.dumps writes NaN for a figure that is not a number: the line is still its event
    from aorta_tui.store.journal_reader import parse_journal_line

    event, why = parse_journal_line(b'{"event": "histogram_snapshot", "run_id": "r", "probe_set": "p",'
                                    b' "measures": "m", "unit": "us", "count": 1,'
                                    b' "percentiles": {"p50": NaN}, "events_per_s": Infinity}')
    assert why is None and event is not None and event.kind == "histogram_snapshot"
