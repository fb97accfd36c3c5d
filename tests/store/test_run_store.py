"""store/run_store.py: one run directory's layout, lock, journal, resume set and results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core.errors import RunDirError
from aorta_tui.core.events import TrialFinished, TrialStarted
from aorta_tui.core.inputs import Json
from aorta_tui.policy.evaluator import POLICY_LAYOUT
from aorta_tui.policy.outcome_doc import TrialEnd, TrialOutcome
from aorta_tui.store.run_store import RunStore, StoreLayout

FLAT = StoreLayout(result_file="outcome.json", sweep_ids=False)


def _finished(tid: str) -> TrialFinished:
    return TrialFinished("r", trial_id=tid, cell=tid.split("/")[0], trial=0, verdict="pass",
                         exit_code=0, wall_s=0.1)


def test_a_trial_counts_only_with_its_result_and_its_journal_line(tmp_path: Path) -> None:
    with RunStore(tmp_path) as store:
        journal = store.open_journal()
        store.fresh_trial_dir("a/trial-000")
        store.write_result("a/trial-000", {"trial_id": "a/trial-000", "verdict": "pass"})
        journal.append(_finished("a/trial-000"))  # both: counts
        journal.append(TrialStarted("r", trial_id="a/trial-001", cell="a", trial=1))
        journal.append(_finished("a/trial-001"))  # a line without its result: does not
        store.fresh_trial_dir("a/trial-002")
        store.write_result("a/trial-002", {"trial_id": "a/trial-002", "verdict": "pass"})
        # a result without its line (a kill between the two): does not
        state = store.resume_state({"a/trial-000", "a/trial-001", "a/trial-002"})
    assert set(state.completed) == {"a/trial-000"}
    assert state.interrupted == {"a/trial-001"}
    assert store.sessions() == 0


def _outcome(status: str) -> dict[str, Json]:
    """A policy trial's outcome.json, as the evaluator writes one."""
    return TrialOutcome(policy="baseline", trial=1, position=0, argv=(), env_set={},
                        env_removed=(), exit_code=0, signal=None, timed_out=False,
                        exec_error=None, wall_s=0.5, peak_rss_kb=None, peak_rss_reason=None,
                        gpu_control="", end=TrialEnd(status)).to_json()


def test_a_flat_layout_reads_its_own_result_file_and_refuses_paths(tmp_path: Path) -> None:
    store = RunStore(tmp_path, POLICY_LAYOUT)
    ok = _outcome("ok")
    store.fresh_trial_dir("001-baseline-t1")
    store.write_result("001-baseline-t1", ok)
    store.fresh_trial_dir("002-x-t1")
    store.write_result("002-x-t1", _outcome("cancelled"))  # not final: runs again
    store.fresh_trial_dir("003-x-t1")
    store.write_result("003-x-t1", {"status": "ok"})  # its reader refuses it: runs again
    assert store.read_result("001-baseline-t1") == ok
    assert store.read_result("002-x-t1") is None
    assert store.read_result("003-x-t1") is None
    for bad in ("../escape", "a/b", "..", "", "x\x00y"):
        assert store.read_result(bad) is None
        with pytest.raises(ValueError):
            store.trial_dir(bad)
    assert (tmp_path / "trials" / "001-baseline-t1" / "outcome.json").is_file()


def test_fresh_and_retired_trial_directories(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    d = store.fresh_trial_dir("c/trial-003")
    (d / "stdout.log").write_text("partial")
    assert list(store.fresh_trial_dir("c/trial-003").iterdir()) == []  # afresh
    (d / "stdout.log").write_text("partial")
    assert store.retire_trial("c/trial-003") == tmp_path / "trials" / "c" / "trial-003.interrupted-1"
    assert store.retire_trial("c/trial-003") is None


def test_a_held_lock_is_refused_in_the_layouts_words(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from aorta_tui.store.run_store import RunStore; s = RunStore(Path(sys.argv[1])); "
         "s.acquire(); print('held', flush=True); time.sleep(30)", str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirError) as sweep_refusal:
            RunStore(tmp_path).acquire()
        assert f"pid {holder.pid}" in sweep_refusal.value.message
        assert "attach" in (sweep_refusal.value.hint or "")
        with pytest.raises(RunDirError) as policy_refusal:
            RunStore(tmp_path, POLICY_LAYOUT).acquire()
        assert policy_refusal.value.message.startswith("another process is running the sweep")
        assert f"pid {holder.pid}" in policy_refusal.value.message
    finally:
        holder.kill()
        holder.wait()
    with RunStore(tmp_path):  # the kernel dropped the dead holder's lock
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=64),
                      st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
                                   lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                          st.dictionaries(st.sampled_from(
                                                              ["status", "verdict", "trial_id", "x"]),
                                                              kids, max_size=3)),
                                   max_leaves=6).map(lambda v: json.dumps(v).encode())))
def test_a_damaged_result_file_is_no_result_never_a_crash(tmp_path: Path, data: bytes,
                                                          attack_tally) -> None:
    failures = 0
    for layout, tid in ((StoreLayout(), "c/trial-000"), (POLICY_LAYOUT, "001-p-t1"), (FLAT, "001-p-t1")):
        store = RunStore(tmp_path, layout)
        path = store.result_path(tid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        got = store.read_result(tid)
        if got is not None and not isinstance(got, dict):
            failures += 1
        if layout is POLICY_LAYOUT and got is not None and got.get("status") not in ("ok", "failed", "timed_out"):
            failures += 1
        os.unlink(path)
    attack_tally.record("run store result reader", cases=3, failures=failures,
                        promise="a damaged result file is no result, never a crash")
    assert failures == 0
