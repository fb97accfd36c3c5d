"""Reading and following a run journal: the matrix screen's and `attach --plain`'s source."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.events import Event, RunStarted, TrialFinished, TrialStarted
from aorta_tui.store.journal_follow import JournalFollower, JournalReader, format_event_line
from aorta_tui.store.journal_writer import Journal
from aorta_tui.tui.matrix_state import MatrixState

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WRITER = HERE / "tui_journal_writer.py"


def _lines(events: list[Event]) -> bytes:
    return b"".join(json.dumps(e.to_dict()).encode() + b"\n" for e in events)


def _events(n: int) -> list[Event]:
    out: list[Event] = [RunStarted("r", source="sweep", run_dir="x", total=n, cells=["a"])]
    for i in range(n):
        out.append(TrialStarted("r", trial_id=f"a/trial-{i:03d}", cell="a", trial=i))
        out.append(TrialFinished("r", trial_id=f"a/trial-{i:03d}", cell="a", trial=i, verdict="pass"))
    return out


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_reader_returns_every_event_once_whatever_the_write_boundaries(tmp_path_factory, cuts) -> None:
    run_dir = tmp_path_factory.mktemp("run")
    events = _events(5)
    data = _lines(events)
    reader = JournalReader(run_dir)
    got: list[Event] = []
    offsets = sorted({min(c, len(data)) for c in cuts} | {len(data)})
    written = 0
    with (run_dir / "journal.jsonl").open("wb") as fh:
        for end in offsets:
            fh.write(data[written:end])
            fh.flush()
            written = end
            got.extend(reader.read_new())
    assert [e.to_dict() for e in got] == [e.to_dict() for e in events]
    assert reader.malformed == 0


def test_reader_holds_back_a_torn_last_line_and_counts_garbage(tmp_path: Path) -> None:
    events = _events(1)
    data = _lines(events)
    (tmp_path / "journal.jsonl").write_bytes(b"not json\n" + data + b'{"event": "trial_sta')
    reader = JournalReader(tmp_path)
    assert len(reader.read_new()) == len(events)
    assert reader.malformed == 1
    assert reader.read_new() == []


def test_follower_sees_history_then_live_appends_from_another_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "T" / "run1"
    got: list[Event] = []
    finished = threading.Event()

    def on_events(batch: list[Event]) -> None:
        got.extend(batch)
        if any(e.kind == "run_finished" for e in batch):
            finished.set()

    proc = subprocess.Popen([sys.executable, str(WRITER), str(run_dir), "a,bad", "3", "0.05"],
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    follower = JournalFollower(run_dir, on_events, poll_s=0.2).start()
    try:
        assert finished.wait(20), f"follower saw only {[e.kind for e in got]}"
    finally:
        follower.stop()
        proc.wait(10)
    kinds = [e.kind for e in got]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("trial_finished") == 6
    state = MatrixState.for_run(run_dir)
    state.apply_all(got)
    assert state.count("pass") == 3 and state.count("fail") == 3
    assert state.cell_counts("bad") == (3, 3, 0)
    assert state.status == "completed"


def test_matrix_state_from_the_engine_journal_writer(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(RunStarted("r", source="sweep", run_dir=str(tmp_path), total=4, cells=["a", "b"], ts=100.0))
    journal.append(TrialStarted("r", trial_id="a/trial-000", cell="a", trial=0, ts=100.0))
    journal.append(TrialFinished("r", trial_id="a/trial-000", cell="a", trial=0, verdict="pass", ts=110.0))
    journal.append(TrialStarted("r", trial_id="b/trial-000", cell="b", trial=0, ts=110.0))
    journal.close()
    state = MatrixState.for_run(tmp_path)
    state.apply_all(JournalReader(tmp_path).read_new())
    assert [v.trial_id for v in state.running] == ["b/trial-000"]
    # One trial in 10 s since the run started, three left: about 30 s.
    assert state.eta_s() == 30.0


def test_plain_lines_name_the_verdict_exit_and_detectors() -> None:
    line = format_event_line(TrialFinished("r", trial_id="a/trial-001", cell="a", trial=1, verdict="fail",
                                           exit_code=3, wall_s=1.5, detectors=["nonzero_exit"]))
    assert line.split() == ["fail", "a/trial-001", "1.50s", "(exit", "3;", "detectors", "nonzero_exit)"]


def test_a_trial_line_without_a_wall_time_says_so_instead_of_zero() -> None:
    from aorta_tui.core.events import event_from_dict
    from aorta_tui.store.journal_follow import format_event_line

    old = event_from_dict({"event": "trial_finished", "run_id": "r", "ts": 1.0, "trial_id": "c-t1",
                           "cell": "c", "trial": 1, "verdict": "pass"})
    assert old.wall_s is None
    line = format_event_line(old)
    assert "wall n/a" in line and "0.00s" not in line
    measured = TrialFinished("r", trial_id="c-t1", cell="c", trial=1, verdict="pass", wall_s=1.234)
    assert "1.23s" in format_event_line(measured)
