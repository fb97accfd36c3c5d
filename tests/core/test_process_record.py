"""result.json's ``process`` section as a typed value (core/process_record.py, issue 36).

One serializer: ``ProcessOutcome.to_dict`` goes through ``ProcessRecord.to_dict`` and writes the
bytes the old writer (``asdict`` + the hang report + ``signal_name``, copied below) wrote, for
drawn outcomes and drawn Slurm facts (the old ``SlurmExecutor._facts``, copied below). One
reader: the result files the old writer made read back to their own bytes, older shapes too;
a damaged field is a located error strictly and a field read as not recorded leniently (the run
directory's reading), never a traceback."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import UsageError
from aorta_tui.core.process_record import ProcessRecord, read_process_record
from aorta_tui.core.trial_contract import TrialResult
from aorta_tui.executor import slurm_cmd as sc
from aorta_tui.executor.distributed import distributed_shape
from aorta_tui.executor.placement import placement_text
from aorta_tui.executor.slurm import SlurmExecutor, TrialJob, _vanished_reason
from aorta_tui.executor.slurm_outcome_doc import NodeFacts, SlurmOutcome
from aorta_tui.recipe.model import ExecutorSpec
from aorta_tui.trial.hang import HangReport
from aorta_tui.trial.supervisor import ProcessOutcome, ProcessSpec

FIXTURES = Path(__file__).parent / "fixtures" / "old-writer-results"


# -- the old writers, as they were (main at 4f6d99f) ----------------------------------------

def old_to_dict(outcome: ProcessOutcome, executor: dict[str, Any] | None) -> dict[str, Any]:
    """``ProcessOutcome.to_dict`` before the record: ``asdict`` (executor a dict then), the hang
    report's dict, ``signal_name`` last."""
    out = {f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome)}
    out = json.loads(json.dumps({**out, "hang": None, "executor": executor}))
    out["hang"] = outcome.hang.to_dict() if outcome.hang else None
    out["signal_name"] = outcome.signal_name
    return out


def old_facts(spec: ExecutorSpec, job: TrialJob, data: SlurmOutcome | None) -> dict[str, Any]:
    """``SlurmExecutor._facts`` before ExecutorFacts, line for line."""
    info = job.info
    node = (data.node if data is not None else None) or NodeFacts()
    started = data.wrapper_started_at if data is not None else None
    state = job.orchestrator_state or (info.state if info else "LOST")
    if data is not None and not data.signal and (info is None or info.alive):
        state = "COMPLETED"
    first_node = node.node or (info.node if info else None)
    ended = data.wrapper_ended_at if data is not None else None
    facts: dict[str, Any] = {
        "kind": "slurm", "job_id": job.job_id, "batch": job.batch, "task": job.task,
        "slurm_job_id": node.job_id,
        "state": state, "node": first_node,
        "nodes": list(node.nodes) or ([first_node] if first_node else []),
        "gpus": {"SLURM_JOB_GPUS": node.job_gpus,
                 "CUDA_VISIBLE_DEVICES": node.cuda_visible_devices,
                 "ROCR_VISIBLE_DEVICES": node.rocr_visible_devices},
        "submitted_at": job.submitted_at,
        "started_at": started if started is not None else (info.start if info else None),
        "ended_at": ended or (info.end if info else None),
        "slurm_times": {"submit": info.submit, "start": info.start, "end": info.end} if info else None,
        "reason": _vanished_reason(job) or (info.reason if info else None),
        "signal": data.signal if data is not None else None,
        "adopted": job.adopted,
        "gate_waited_s": data.gate_waited_s if data is not None else None,
    }
    shape = distributed_shape(spec)
    if shape is not None:
        facts["distributed"] = {"nodes": shape[0], "ranks_per_node": shape[1],
                                "world_size": shape[0] * shape[1]}
    if isinstance(started, (int, float)):
        facts["queue_wait_s"] = round(max(0.0, started - job.submitted_at), 3)
    elif info is not None and info.start and info.submit and info.node:
        facts["queue_wait_s"] = max(0.0, info.start - info.submit)
    else:
        facts["queue_wait_s"] = None
    return facts


# -- drawn outcomes and jobs ----------------------------------------------------------------

_text = st.text(max_size=6)
_opt_text = st.none() | _text
_num = st.floats(-1e9, 1e9, allow_nan=False) | st.integers(-(2**40), 2**40)
_time = st.none() | st.floats(0, 2e9, allow_nan=False) | st.integers(0, 2**31)
_ints = st.integers(-(2**40), 2**40)
_outcomes = st.builds(
    ProcessOutcome, pid=st.none() | _ints, exit_code=st.none() | _ints,
    signal=st.none() | st.integers(0, 80), core_dumped=st.booleans(), timed_out=st.booleans(),
    cancelled=st.booleans(),
    hang=st.none() | st.builds(HangReport, signals=st.dictionaries(_text, st.none() | _num,
                                                                    max_size=2),
                               unavailable=st.dictionaries(_text, _text, max_size=1),
                               cpu_s_in_window=st.none() | _num, io_scope=_opt_text),
    exec_error=_opt_text, wall_s=_num, started_at=_num, ended_at=_num,
    peak_rss_kb=st.none() | _ints, gpu_peak_mem_bytes=st.none() | _ints,
    gpu_mem_reason=_opt_text, stdout_bytes=_ints, stderr_bytes=_ints, truncated=st.booleans(),
    gpu_mem_source=_opt_text, peak_rss_reason=_opt_text,
    gpu_counters_delta=st.none() | st.dictionaries(_text, st.dictionaries(_text, _ints,
                                                                          max_size=2), max_size=2),
    gpu_counters_reason=_opt_text, killed_strays=st.booleans(), kill_escalated=st.booleans(),
    log_error=_opt_text, hang_note=_opt_text, containment=_opt_text,
    containment_reason=_opt_text, timeout_s=st.none() | _num, stopped_at_s=st.none() | _num,
    killed_count=st.integers(0, 9), survivors=st.none() | st.lists(_ints, max_size=2),
    survivors_reason=_opt_text, marks=st.dictionaries(_text, _ints, max_size=2),
    beside=st.dictionaries(_text, st.dictionaries(_text, _num | _text | st.booleans(),
                                                  max_size=2), max_size=2))
_infos = st.none() | st.builds(
    sc.JobInfo, job_id=st.just("7_1"), state=st.sampled_from(["COMPLETED", "RUNNING", "NODE_FAIL",
                                                              "TIMEOUT", "PENDING"]),
    node=_opt_text, submit=_time, start=_time, end=_time, reason=_opt_text, name=_opt_text)
_jobs = st.builds(
    TrialJob, trial_id=st.just("c/trial-000"), batch=_text, task=st.integers(0, 99),
    trial_dir=st.just(Path("/nonexistent")), submitted_at=st.floats(0, 2e9) | st.integers(0, 9),
    job_id=_opt_text, adopted=st.booleans(), info=_infos,
    orchestrator_state=st.sampled_from([None, "TIMEOUT", "LOST"]),
    vanished_from=st.sampled_from([None, "PENDING", "RUNNING"]))
_node_facts = st.builds(NodeFacts, node=_opt_text, job_id=_opt_text, job_gpus=_opt_text,
                        cuda_visible_devices=_opt_text, rocr_visible_devices=_opt_text,
                        nodes=st.lists(_text, max_size=2).map(tuple))
_slurm_data = st.none() | st.builds(
    SlurmOutcome, process=_outcomes, node=st.none() | _node_facts, signal=_opt_text,
    wrapper_started_at=_time, wrapper_ended_at=_time, gate_waited_s=st.none() | _num)
_specs = st.builds(ExecutorSpec, kind=st.just("slurm"), nodes=st.none() | st.integers(1, 4),
                   gpus_per_node=st.none() | st.integers(1, 8))


def _executor(spec: ExecutorSpec) -> SlurmExecutor:
    ex = SlurmExecutor(SimpleNamespace(executor=spec))
    ex._bus = None
    return ex


@settings(max_examples=150, deadline=None)
@given(_outcomes)
def test_a_local_outcome_serializes_to_the_old_writers_bytes(outcome: ProcessOutcome) -> None:
    assert json_bytes(outcome.to_dict()) == json_bytes(old_to_dict(outcome, None))
    record = outcome.to_record()
    back = read_process_record(json.loads(json_bytes(record.to_dict())), where="r.json")
    assert back == record and json_bytes(back.to_dict()) == json_bytes(record.to_dict())


@settings(max_examples=150, deadline=None)
@given(spec=_specs, job=_jobs, data=_slurm_data, outcome=_outcomes)
def test_slurm_facts_serialize_to_the_old_writers_bytes(
        spec: ExecutorSpec, job: TrialJob, data: SlurmOutcome | None, outcome: ProcessOutcome,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    ex = _executor(spec)
    old = old_facts(spec, job, data)
    new = ex._facts(job, data)
    # run_s is the caller's (the task's wall time, the job's, or none for a cancelled one)
    assert json_bytes({k: v for k, v in new.to_dict().items() if k != "run_s"}) == json_bytes(old)
    # the three outcomes the executor makes, as their result.json sections
    if data is not None:  # the task wrote its outcome: run_s is its process's wall time
        got = ex._outcome_from_file(job, None, data)  # type: ignore[arg-type]  # pspec unused
        want = old_to_dict(dataclasses.replace(data.process, cancelled=False),
                           {**old, "run_s": data.process.wall_s})
        assert json_bytes(got.to_dict()) == json_bytes(want)
        assert ex.placement(got) is not None  # its node's kernel log taken out, as before
    cancelled = ex._cancelled_outcome(job, None)  # type: ignore[arg-type]
    old_none = old_facts(spec, job, None)
    assert json_bytes(cancelled.to_dict()) == json_bytes(old_to_dict(cancelled, old_none))
    outcome = dataclasses.replace(outcome, executor=new)
    back = read_process_record(json.loads(json_bytes(outcome.to_dict())), where="r.json")
    assert back == outcome.to_record()


def test_a_job_that_wrote_no_outcome_serializes_as_before(tmp_path: Path) -> None:
    ex = _executor(ExecutorSpec(kind="slurm"))
    pspec = ProcessSpec(argv=["x"], env={}, cwd=tmp_path, stdout_path=tmp_path / "o",
                        stderr_path=tmp_path / "e", timeout_s=30.0)
    info = sc.JobInfo("7_1", "NODE_FAIL", "n3", 10.0, 12.0, 15.0, "NodeDown", "b")
    job = TrialJob("c/trial-000", "b", 1, tmp_path, 9.5, job_id="7_1", info=info)
    got = ex._outcome_from_state(job, pspec, info)
    old = {**old_facts(ex.spec, job, None), "run_s": 3.0}
    assert json_bytes(got.to_dict()) == json_bytes(old_to_dict(got, old))


# -- the old writer's files -----------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.json")))
@pytest.mark.parametrize("strict", [True, False])
def test_a_result_the_old_writer_made_reads_back_to_its_bytes(name: str, strict: bool) -> None:
    path = FIXTURES / name
    result = TrialResult.from_json(path, strict=strict)
    assert isinstance(result.process, ProcessRecord) and not result.process.extra
    assert json_bytes(result.to_dict()) == path.read_bytes()


def test_the_old_files_read_as_typed_values() -> None:
    sigsegv = TrialResult.from_json(FIXTURES / "local-sigsegv.json").process
    assert (sigsegv.signal, sigsegv.signal_name, sigsegv.executor) == (11, "SIGSEGV", None)
    assert sigsegv.marks["spawn"] < sigsegv.marks["reaped"] and sigsegv.survivors is None
    hang = TrialResult.from_json(FIXTURES / "local-hang.json").process
    assert hang.hang is not None and hang.hang.window_s == 1.0 and hang.timeout_s == 3.0
    assert hang.hang.summary().startswith("hang after ")  # core's type: said in words
    facts = TrialResult.from_json(FIXTURES / "slurm-from-file.json").process.executor
    assert facts is not None and (facts.kind, facts.node, facts.nodes) == ("slurm", "gpu07",
                                                                          ("gpu07", "gpu08"))
    assert facts.distributed == {"nodes": 2, "ranks_per_node": 4, "world_size": 8}
    assert (facts.signal, facts.queue_wait_s, facts.gpus["CUDA_VISIBLE_DEVICES"]) == (
        "SIGTERM", 1.5, "0,1")
    lost = TrialResult.from_json(FIXTURES / "slurm-lost.json").process.executor
    assert lost is not None and (lost.job_id, lost.state, lost.distributed) == (None, "LOST", None)


def test_an_older_shape_without_the_newer_keys_reads_back_to_its_bytes(tmp_path: Path) -> None:
    """Files from before marks, survivors, the executor (and, in the facts, before the gate,
    the task's own job id and the node list) lack those keys: they stay out when written."""
    data = json.loads((FIXTURES / "slurm-node-fail.json").read_text())
    for key in ("survivors", "survivors_reason", "marks", "beside", "gpu_counters_delta"):
        del data["process"][key]
    for key in ("gate_waited_s", "slurm_job_id", "nodes"):
        del data["process"]["executor"][key]
    path = tmp_path / "result.json"
    path.write_bytes(json_bytes(data))
    process = TrialResult.from_json(path).process
    assert {"marks", "survivors"} <= process.absent and process.executor is not None
    assert process.executor.nodes == () and "nodes" in process.executor.absent
    assert json_bytes(TrialResult.from_json(path).to_dict()) == path.read_bytes()
    assert ProcessRecord.empty().to_dict() == {}
    assert TrialResult("a/trial-000", "a", 0, "pass").to_dict()["process"] == {}


# -- damaged files --------------------------------------------------------------------------

_DAMAGE = [
    (("wall_s",), "1.5", "process.wall_s: expected a finite number, found a string"),
    (("peak_rss_kb",), "lots", "process.peak_rss_kb: expected an integer or null"),
    (("marks", "spawn"), 1.5, "process.marks.spawn: expected an integer"),
    (("survivors",), [1, "2"], "process.survivors[1]: expected an integer"),
    (("executor", "node"), 7, "process.executor.node: expected a string or null"),
    (("executor", "gpus"), ["0"], "process.executor.gpus: expected an object"),
    (("executor", "distributed"), None, "process.executor.distributed: expected an object"),
]


def _damaged(tmp_path: Path, at: tuple[str, ...], value: object) -> Path:
    data = json.loads((FIXTURES / "slurm-from-file.json").read_text())
    holder = data["process"]
    for key in at[:-1]:
        holder = holder[key]
    holder[at[-1]] = value
    path = tmp_path / "result.json"
    path.write_bytes(json_bytes(data))
    return path


@pytest.mark.parametrize(("at", "value", "words"), _DAMAGE)
def test_a_damaged_process_field_is_located_when_strict(tmp_path: Path, at: tuple[str, ...],
                                                        value: object, words: str) -> None:
    """Refused now: the contract took any process object unchecked before (a damaged file)."""
    path = _damaged(tmp_path, at, value)
    with pytest.raises(UsageError) as got:
        TrialResult.from_json(path)
    assert str(got.value).startswith(f"{path}: {words}")
    assert got.value.hint == "this trial result is damaged or was not written by aorta-tui"


@pytest.mark.parametrize(("at", "value", "words"), _DAMAGE)
def test_a_damaged_process_field_reads_as_not_recorded_in_the_run_directory(
        tmp_path: Path, at: tuple[str, ...], value: object, words: str) -> None:
    """The run directory's reading never stops the sweep: the field reads as not recorded, its
    value is kept (written after the known keys), and the rest is read."""
    path = _damaged(tmp_path, at, value)
    result = TrialResult.from_json(path, strict=False)
    raw = json.loads(path.read_text())["process"]
    holder: Any = result.process
    if at[0] == "executor":
        holder, raw, at = holder.executor, raw["executor"], at[1:]
    assert holder.extra == {at[0]: raw[at[0]]}  # kept as it was
    assert getattr(holder, at[0]) == getattr(type(holder)(), at[0])  # its not-recorded value
    assert result.process.signal_name == "SIGSEGV" and result.verdict == "fail"  # the rest
    assert json.loads(json_bytes(result.to_dict()))["process"] == json.loads(path.read_text())[
        "process"]  # nothing lost (the damaged key written after the known ones)


def test_a_process_section_that_is_no_object(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "local-pass.json").read_text())
    data["process"] = [1]
    path = tmp_path / "result.json"
    path.write_bytes(json_bytes(data))
    with pytest.raises(UsageError, match=r"process: expected an object, found an array"):
        TrialResult.from_json(path)
    lenient = TrialResult.from_json(path, strict=False)  # as the run directory always read it
    assert lenient.process == ProcessRecord.empty() and lenient.wall_s is None
    with pytest.raises(UsageError, match=r"^r\.json: process: expected an object"):
        read_process_record("x", where="r.json")
    assert read_process_record("x", where="r.json", strict=False) == ProcessRecord.empty()


# -- its readers read attributes, and a damaged field is no traceback ------------------------

def test_the_readers_take_a_damaged_field_as_not_recorded() -> None:
    """Before the type, ``gpus`` as a list was an AttributeError in the batch output's trial line
    and a non-number ``peak_rss_kb`` a ValueError in the TUI's trial screen."""
    from aorta_tui.tui.matrix_state import TrialView
    from aorta_tui.tui.screens.trial import trial_facts

    facts = {"kind": "slurm", "job_id": "9_0", "node": "n1", "state": "TIMEOUT",
             "queue_wait_s": 0.5, "gpus": ["0"]}
    assert placement_text({"process": {"executor": facts}}) == " [job 9_0 on n1, TIMEOUT, queued 0.5 s]"
    result = {"verdict": "fail", "process": {"peak_rss_kb": "lots", "timed_out": True,
                                             "timeout_s": 3.0, "executor": facts}}
    text = "\n".join(trial_facts(TrialView("c/trial-000", "c", 0), result))
    assert "timed out after 3.0 s" in text and "peak RSS" not in text
    assert "ran as job 9_0 on n1, TIMEOUT, queued 0.5 s" in text


def test_wall_s_is_the_records() -> None:
    assert TrialResult("a/trial-000", "a", 0, "pass", process=ProcessRecord(wall_s=2)).wall_s == 2.0
    assert TrialResult("a/trial-000", "a", 0, "pass").wall_s is None
