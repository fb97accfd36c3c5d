"""The one checked reader of a ProcessOutcome's JSON form (trial/process_outcome_doc.py): any
outcome reads back to itself, a damaged field is a located UsageError at the caller's own
field path, and the Slurm executor hands the classifier the node's kernel log as the typed
outcome read it (placement())."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.classify.dmesg import KernelEvent
from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import FieldReader
from aorta_tui.executor.slurm import SlurmExecutor, TrialJob
from aorta_tui.executor.slurm_outcome_doc import NodeKernelLog, SlurmOutcome
from aorta_tui.recipe.model import ExecutorSpec
from aorta_tui.trial.hang import HangReport
from aorta_tui.trial.process_outcome_doc import read_process_outcome
from aorta_tui.trial.supervisor import ProcessOutcome

_text = st.text(max_size=6)
_num = st.floats(-1e9, 1e9, allow_nan=False) | st.integers(-(2**40), 2**40)
_ints = st.integers(-(2**40), 2**40)
_outcomes = st.builds(
    ProcessOutcome, pid=st.none() | _ints, exit_code=st.none() | _ints,
    signal=st.none() | st.integers(0, 80), core_dumped=st.booleans(), timed_out=st.booleans(),
    cancelled=st.booleans(),
    hang=st.none() | st.builds(HangReport, signals=st.dictionaries(_text, st.none() | _num,
                                                                    max_size=2)),
    exec_error=st.none() | _text, wall_s=_num, started_at=_num, ended_at=_num,
    peak_rss_kb=st.none() | _ints, gpu_peak_mem_bytes=st.none() | _ints,
    gpu_mem_reason=st.none() | _text, stdout_bytes=_ints, stderr_bytes=_ints,
    truncated=st.booleans(), survivors=st.none() | st.lists(_ints, max_size=2),
    marks=st.dictionaries(_text, _ints, max_size=2),
    gpu_counters_delta=st.none() | st.dictionaries(_text, st.dictionaries(_text, _ints,
                                                                          max_size=2), max_size=2))


@settings(max_examples=60, deadline=None)
@given(_outcomes)
def test_any_outcome_reads_back_to_itself(outcome: ProcessOutcome) -> None:
    data = json.loads(json.dumps(outcome.to_dict()))
    assert read_process_outcome(FieldReader("f.json", "thing"), data, "p") == outcome


@pytest.mark.parametrize(("key", "value", "words"), [
    ("pid", "7", "at.process.pid: expected an integer or null"),
    ("wall_s", None, "at.process.wall_s: expected a finite number"),
    ("hang", {"signals": {"x": "1"}}, "at.process.hang.signals.x: expected"),
    ("survivors", [1.5], "at.process.survivors[0]: expected"),
])
def test_damage_is_named_at_the_callers_path(key: str, value: object, words: str) -> None:
    data = ProcessOutcome(pid=1, exit_code=0, signal=None, core_dumped=False, timed_out=False,
                          cancelled=False, hang=None, exec_error=None, wall_s=1.0,
                          started_at=0.0, ended_at=1.0, peak_rss_kb=None,
                          gpu_peak_mem_bytes=None, gpu_mem_reason=None, stdout_bytes=0,
                          stderr_bytes=0, truncated=False).to_dict()
    data[key] = value
    with pytest.raises(UsageError) as got:
        read_process_outcome(FieldReader("f.json", "thing"), data, "at.process")
    assert str(got.value).startswith(f"f.json: {words}")
    assert got.value.hint == "this thing is damaged or was not written by aorta-tui"
    del data["truncated"]
    data[key] = None if key != "wall_s" else 1.0
    with pytest.raises(UsageError, match=r"^f\.json: at\.process\.truncated: missing$"):
        read_process_outcome(FieldReader("f.json", "thing"), data, "at.process")


def test_placement_takes_the_node_kernel_log_as_read(tmp_path: Path) -> None:
    ex = SlurmExecutor(SimpleNamespace(executor=ExecutorSpec(kind="slurm")))
    job = TrialJob("c/trial-000", "b", 0, tmp_path, 0.0, job_id="9_0")
    event = KernelEvent(line="NVRM: Xid 79", tier3_id="nvidia_xid", time=2.0,
                        captures={"xid": "79"}, seq=4)
    process = ProcessOutcome(pid=7, exit_code=0, signal=None, core_dumped=False,
                             timed_out=False, cancelled=False, hang=None, exec_error=None,
                             wall_s=1.0, started_at=0.0, ended_at=1.0, peak_rss_kb=None,
                             gpu_peak_mem_bytes=None, gpu_mem_reason=None, stdout_bytes=0,
                             stderr_bytes=0, truncated=False)
    path = tmp_path / "slurm-outcome.json"
    path.write_text(json.dumps(SlurmOutcome(process=process, kernel_log=NodeKernelLog(
        (event,), "partly")).to_json()))
    outcome = ex._outcome_from_file(job, None, SlurmOutcome.read(path))
    place = ex.placement(outcome)
    assert place is not None and place.kernel_events == (event,)
    assert place.kernel_unavailable == "partly" and place.job_id == "9_0"
    assert "kernel_log" not in outcome.to_dict()["executor"]  # the record's facts: without it
    place = ex.placement(outcome)  # taken once: a second reading has none
    assert place is not None and place.kernel_events is None and place.kernel_unavailable is None
