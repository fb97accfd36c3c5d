"""A Slurm trial's documents as typed values: the job spec and the batch's manifest
(executor/slurm_spec_doc.py) and the outcome the task writes (executor/slurm_outcome_doc.py).
The new writers write the bytes the untyped ones did (their code copied below, verbatim); any
value reads back to itself; a damaged document is a located UsageError (exit 2); an oversize one
is refused unread; the orchestrator still takes a file that is no outcome for no result, and the
node's task refuses a damaged spec with its location, running nothing. No Slurm here
(tests/executor/test_slurm_executor.py runs real jobs)."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.classify.dmesg import KernelEvent
from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.core.process_record import ExecutorFacts
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.executor import slurm_job
from aorta_tui.executor.slurm import SlurmExecutor, TrialJob, _job_spec
from aorta_tui.executor.slurm_job import job_nodes
from aorta_tui.executor.slurm_outcome_doc import NodeFacts, NodeKernelLog, SlurmOutcome
from aorta_tui.executor.slurm_spec_doc import HangSpec, JobSpec, SpecManifest
from aorta_tui.recipe.model import ExecutorSpec
from aorta_tui.trial.hang import SIGNAL_NAMES, HangPolicy, HangReport
from aorta_tui.trial.supervisor import ProcessOutcome
from tests.engine_support import set_at_path

_text = st.text(max_size=8)
_opt_text = st.none() | _text
_num = st.floats(-1e12, 1e12, allow_nan=False) | st.integers(-(2**40), 2**40)
_opt_num = st.none() | _num
_json = st.recursive(st.none() | st.booleans() | st.integers(-9, 9) | _text,
                     lambda inner: st.lists(inner, max_size=2)
                     | st.dictionaries(_text, inner, max_size=2), max_leaves=4)
_json_obj = st.dictionaries(_text, _json, max_size=2)
_ints = st.integers(-(2**40), 2**40)

_hang_reports = st.builds(
    HangReport, signals=st.dictionaries(_text, _opt_num, max_size=2),
    unavailable=st.dictionaries(_text, _text, max_size=2), window_s=_num, grace_s=_num,
    elapsed_s=_num, cpu_s_in_window=_opt_num, io_scope=_opt_text)
_processes = st.builds(
    ProcessOutcome, pid=st.none() | _ints, exit_code=st.none() | _ints,
    signal=st.none() | st.integers(0, 80), core_dumped=st.booleans(), timed_out=st.booleans(),
    cancelled=st.booleans(), hang=st.none() | _hang_reports, exec_error=_opt_text, wall_s=_num,
    started_at=_num, ended_at=_num, peak_rss_kb=st.none() | _ints,
    gpu_peak_mem_bytes=st.none() | _ints, gpu_mem_reason=_opt_text, stdout_bytes=_ints,
    stderr_bytes=_ints, truncated=st.booleans(), gpu_mem_source=_opt_text,
    peak_rss_reason=_opt_text,
    gpu_counters_delta=st.none() | st.dictionaries(_text, st.dictionaries(_text, _ints, max_size=2),
                                                   max_size=2),
    gpu_counters_reason=_opt_text, killed_strays=st.booleans(), kill_escalated=st.booleans(),
    log_error=_opt_text, hang_note=_opt_text, containment=_opt_text,
    containment_reason=_opt_text, timeout_s=_opt_num, stopped_at_s=_opt_num,
    killed_count=_ints, survivors=st.none() | st.lists(_ints, max_size=3),
    survivors_reason=_opt_text, marks=st.dictionaries(_text, _ints, max_size=3),
    beside=_json_obj, executor=st.none() | st.builds(
        ExecutorFacts, kind=_text, job_id=_opt_text, task=st.none() | _ints, node=_opt_text,
        nodes=st.lists(_text, max_size=2).map(tuple),
        gpus=st.dictionaries(_text, _opt_text, max_size=2), submitted_at=_opt_num,
        slurm_times=st.none() | st.dictionaries(_text, _opt_num, max_size=2),
        adopted=st.booleans(), distributed=st.none() | st.dictionaries(_text, _ints, max_size=2),
        queue_wait_s=_opt_num, run_s=_opt_num,
        extra=st.dictionaries(st.sampled_from(["x_new"]), _json, max_size=1)))
_events = st.builds(KernelEvent, line=_text, tier3_id=_text, time=_opt_num, captures=_json_obj,
                    seq=st.none() | _ints)
_kernel_logs = st.builds(NodeKernelLog, events=st.lists(_events, max_size=2).map(tuple),
                         unavailable=_opt_text)
_env_keys = st.sampled_from(["SLURMD_NODENAME", "SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID",
                             "SLURM_ARRAY_TASK_ID", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES",
                             "ROCR_VISIBLE_DEVICES", "SLURM_JOB_PARTITION", "SLURM_JOB_NODELIST",
                             "SLURM_JOB_ACCOUNT", "HOME"])
# a node list without "[" or ",": job_nodes takes it as it is (no scontrol)
_environs = st.dictionaries(_env_keys, st.text("abc019-_.", max_size=6), max_size=8)
_node_facts = st.builds(
    NodeFacts, host=_opt_text, node=_opt_text, job_id=_opt_text, array_job_id=_opt_text,
    array_task_id=_opt_text, job_gpus=_opt_text, cuda_visible_devices=_opt_text,
    rocr_visible_devices=_opt_text, partition=_opt_text, nodelist=_opt_text,
    nodes=st.lists(_text, max_size=2).map(tuple), account=_opt_text,
    extra=st.dictionaries(st.sampled_from(["x_new"]), _json, max_size=1))
_outcomes = st.builds(
    SlurmOutcome, process=_processes, node=st.none() | _node_facts, signal=_opt_text,
    wrapper_started_at=_opt_num, wrapper_ended_at=_opt_num, gate_waited_s=_opt_num,
    kernel_log=st.none() | _kernel_logs, schema_version=st.integers(1, 3),
    extra=st.dictionaries(st.sampled_from(["x_new", "y_new"]), _json, max_size=2))


# -- the untyped writers, copied verbatim (slurm_job.py and slurm.py before the type) ---------

def old_node_facts(environ: dict[str, str]) -> dict[str, Any]:
    """Where this task runs: host, job ids, the GPUs Slurm allocated to it."""
    return {
        "host": socket.gethostname(),
        "node": environ.get("SLURMD_NODENAME") or socket.gethostname(),
        "job_id": environ.get("SLURM_JOB_ID"),
        "array_job_id": environ.get("SLURM_ARRAY_JOB_ID"),
        "array_task_id": environ.get("SLURM_ARRAY_TASK_ID"),
        "job_gpus": environ.get("SLURM_JOB_GPUS"),
        "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "rocr_visible_devices": environ.get("ROCR_VISIBLE_DEVICES"),
        "partition": environ.get("SLURM_JOB_PARTITION"),
        "nodelist": environ.get("SLURM_JOB_NODELIST"),
        "nodes": job_nodes(environ),
        "account": environ.get("SLURM_JOB_ACCOUNT"),
    }


def old_outcome(outcome: Any, environ: dict[str, str], got: list[str], started_at: float,
                ended_at: float, gate_waited_s: float | None, kernel: dict[str, Any]) -> dict:
    node_facts = old_node_facts
    return {  # run_trial's fs.atomic_write_json(trial_dir / OUTCOME, {...}), time.time() drawn
        "schema_version": 1,
        "process": outcome.to_dict(),
        "node": node_facts(dict(environ)),
        "signal": got[0] if got else None,  # what Slurm sent (scancel, time limit, preemption)
        "wrapper_started_at": started_at,
        "wrapper_ended_at": ended_at,
        "gate_waited_s": gate_waited_s,  # this task's wait for the orchestrator's go, before the trial
        "kernel_log": kernel,
    }


def old_job_spec(pspec: Any, cell: Any, trial_dir: Path, batch: str) -> dict[str, Any]:
    hang = pspec.hang
    return {
        # whose spec it is: a resume writes the same path again for the trial's new job, and a
        # task of the cancelled array that starts late must not take it (slurm_job.run_trial)
        "batch": batch,
        "argv": list(pspec.argv), "env": dict(pspec.env), "cell_keys": sorted(cell.env),
        "cwd": str(pspec.cwd), "stdout_path": str(pspec.stdout_path),
        "stderr_path": str(pspec.stderr_path), "timeout_s": pspec.timeout_s,
        "kill_grace_s": pspec.kill_grace_s, "trial_dir": str(trial_dir),
        "hang": None if hang is None else {"window_s": hang.window_s, "grace_s": hang.grace_s,
                                           "disabled": sorted(hang.disabled)},
    }


@settings(max_examples=60)
@given(_processes, _environs, st.lists(st.sampled_from(["SIGTERM", "SIGINT"]), max_size=2),
       _num, _num, _opt_num, _kernel_logs)
def test_the_task_writes_the_outcome_the_untyped_writer_wrote(
        process: ProcessOutcome, environ: dict[str, str], got: list[str], started: float,
        ended: float, waited: float | None, kernel: NodeKernelLog) -> None:
    old = old_outcome(process, environ, got, started, ended, waited,
                      {"events": [e.to_dict() for e in kernel.events],
                       "unavailable": kernel.unavailable})
    new = slurm_job.trial_outcome(process, environ, got, started, ended, waited, kernel)
    assert json_bytes(new.to_json()) == json_bytes(old)


_paths = st.text("/abcé_-.", min_size=1, max_size=10)
_pspecs = st.builds(
    SimpleNamespace, argv=st.lists(_text, max_size=3), env=st.dictionaries(_text, _text, max_size=3),
    cwd=_paths.map(Path), stdout_path=_paths.map(Path), stderr_path=_paths.map(Path),
    timeout_s=st.none() | st.floats(0.1, 1e6) | st.integers(1, 10**6),
    kill_grace_s=st.floats(0, 60) | st.integers(0, 60),
    hang=st.none() | st.builds(HangPolicy, window_s=st.floats(0.01, 1e4),
                               grace_s=st.floats(0, 1e4),
                               disabled=st.frozensets(st.sampled_from(sorted(SIGNAL_NAMES)))))


@given(_pspecs, st.dictionaries(_text, _text, max_size=3), _paths, _text)
def test_the_orchestrator_writes_the_spec_the_untyped_writer_wrote(
        pspec: SimpleNamespace, cell_env: dict[str, str], trial_dir: str, batch: str) -> None:
    cell = SimpleNamespace(env=cell_env)
    old = old_job_spec(pspec, cell, Path(trial_dir), batch)
    new = _job_spec(pspec, cell, Path(trial_dir), batch)
    assert json.dumps(new.to_json()).encode() == json.dumps(old).encode()  # as _submit_batch
    assert JobSpec.from_dict(json.loads(json.dumps(old))) == new


@given(st.lists(_paths, max_size=5))
def test_the_manifest_is_written_as_the_untyped_writer_wrote_it(specs: list[str]) -> None:
    assert json_bytes(SpecManifest(tuple(specs)).to_json()) == json_bytes({"specs": specs})


# -- round trips ---------------------------------------------------------------------------

@settings(max_examples=60)
@given(_outcomes)
def test_any_outcome_reads_back_to_itself_and_its_bytes(doc: SlurmOutcome) -> None:
    written = json_bytes(doc.to_json())
    again = SlurmOutcome.from_dict(json.loads(written))
    assert again == doc
    assert json_bytes(again.to_json()) == written


_specs = st.builds(
    JobSpec, batch=_opt_text,  # None: written without it argv=st.lists(_text, max_size=3).map(tuple),
    env=st.dictionaries(_text, _text, max_size=3), cwd=_text, stdout_path=_text,
    stderr_path=_text, trial_dir=_text, cell_keys=st.lists(_text, max_size=2).map(tuple),
    timeout_s=_opt_num, kill_grace_s=_num,
    hang=st.none() | st.builds(HangSpec, window_s=st.floats(0.01, 1e4) | st.integers(1, 9),
                               grace_s=st.floats(0, 1e4) | st.integers(0, 9),
                               disabled=st.lists(_text, max_size=2).map(tuple)),
    extra=st.dictionaries(st.sampled_from(["x_new"]), _json, max_size=1))


@given(_specs)
def test_any_spec_reads_back_to_itself_and_its_bytes(spec: JobSpec) -> None:
    written = json.dumps(spec.to_json()).encode()
    again = JobSpec.from_dict(json.loads(written))
    assert again == spec and json.dumps(again.to_json()).encode() == written


@given(st.lists(_text, max_size=4), st.dictionaries(st.sampled_from(["x_new"]), _json, max_size=1))
def test_any_manifest_reads_back_to_itself(specs: list[str], extra: dict[str, Any]) -> None:
    doc = SpecManifest(tuple(specs), extra=extra)
    assert SpecManifest.from_dict(json.loads(json_bytes(doc.to_json()))) == doc


def test_an_older_spec_keeps_the_tasks_old_tolerances() -> None:
    """Without batch (before a spec named its array), cell_keys, timeout_s, kill_grace_s;
    with an empty hang: any array's, none, none, 2 s, no hang detection."""
    spec = JobSpec.from_dict({"argv": ["true"], "env": {}, "cwd": "/r", "stdout_path": "/r/o",
                              "stderr_path": "/r/e", "trial_dir": "/r/t", "hang": {}})
    assert (spec.batch, spec.cell_keys, spec.timeout_s, spec.kill_grace_s, spec.hang) == (
        None, (), None, 2.0, None)
    assert "batch" not in spec.to_json()


# -- damaged documents: a located error ----------------------------------------------------

def _outcome_json() -> dict[str, Any]:
    process = ProcessOutcome(
        pid=7, exit_code=0, signal=None, core_dumped=False, timed_out=False, cancelled=False,
        hang=HangReport(signals={"output_silence": 31.0}), exec_error=None, wall_s=1.5,
        started_at=1.0, ended_at=2.5, peak_rss_kb=None, gpu_peak_mem_bytes=None,
        gpu_mem_reason=None, stdout_bytes=0, stderr_bytes=0, truncated=False,
        gpu_counters_delta={"0": {"xgmi": 1}}, survivors=[4], marks={"spawn": 5})
    kernel = NodeKernelLog((KernelEvent(line="l", tier3_id="xid", time=1.0),), None)
    return SlurmOutcome(process=process, node=NodeFacts(host="h", nodes=("n1",)),
                        kernel_log=kernel).to_json()


OUTCOME_DAMAGED: list[tuple[tuple[Any, ...], object, str]] = [
    (("process",), [], "process: expected"),
    (("process", "wall_s"), "1", "process.wall_s: expected"),
    (("process", "pid"), 1.5, "process.pid: expected"),
    (("process", "hang"), 3, "process.hang: expected"),
    (("process", "hang", "signals", "output_silence"), "x",
     "process.hang.signals.output_silence: expected"),
    (("process", "survivors"), ["4"], "process.survivors[0]: expected"),
    (("process", "gpu_counters_delta", "0"), [], "process.gpu_counters_delta.0: expected"),
    (("process", "marks", "spawn"), None, "process.marks.spawn: expected"),
    (("node",), "n1", "node: expected"),
    (("node", "array_task_id"), 0, "node.array_task_id: expected"),
    (("node", "nodes"), "n1", "node.nodes: expected"),
    (("signal",), 15, "signal: expected"),
    (("wrapper_started_at",), "now", "wrapper_started_at: expected"),
    (("kernel_log", "events"), {}, "kernel_log.events: expected"),
    (("kernel_log", "events", 0, "line"), None, "kernel_log.events[0].line: expected"),
    (("schema_version",), "1", "schema_version: expected"),
]


@pytest.mark.parametrize(("path", "value", "field"), OUTCOME_DAMAGED,
                         ids=[m for _p, _v, m in OUTCOME_DAMAGED])
def test_a_damaged_outcome_is_named_with_the_file_and_field(path: tuple[Any, ...], value: object,
                                                            field: str) -> None:
    doc = _outcome_json()
    set_at_path(doc, path, value)
    with pytest.raises(UsageError) as caught:
        SlurmOutcome.from_dict(doc, where="t/slurm-outcome.json")
    assert caught.value.message.startswith(f"t/slurm-outcome.json: {field}")
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint


@pytest.mark.parametrize("key", ["pid", "wall_s", "truncated"])
def test_a_process_without_a_required_field_is_refused(key: str) -> None:
    doc = _outcome_json()
    del doc["process"][key]  # type: ignore[union-attr]
    with pytest.raises(UsageError, match=rf"^slurm-outcome\.json: process\.{key}: missing"):
        SlurmOutcome.from_dict(doc)
    del doc["process"]
    with pytest.raises(UsageError, match=r"process: missing"):
        SlurmOutcome.from_dict(doc)


def _spec_json() -> dict[str, Any]:
    return JobSpec(batch="b", argv=("true",), env={"A": "1"}, cwd="/r", stdout_path="/r/o",
                   stderr_path="/r/e", trial_dir="/r/t", hang=HangSpec()).to_json()


SPEC_DAMAGED: list[tuple[tuple[Any, ...], object, str]] = [
    (("batch",), 3, "batch: expected"),
    (("batch",), None, "batch: expected"),
    (("argv",), "true", "argv: expected"),
    (("argv", 0), 1, "argv[0]: expected"),
    (("env",), [], "env: expected"),
    (("env", "A"), 1, "env.A: expected"),
    (("cwd",), None, "cwd: expected"),
    (("timeout_s",), "30", "timeout_s: expected"),
    (("kill_grace_s",), [], "kill_grace_s: expected"),
    (("hang", "window_s"), 0, "hang: window_s must be > 0"),
    (("hang", "disabled"), "io_idle", "hang.disabled: expected"),
    (("hang",), [1], "hang: expected"),
]


@pytest.mark.parametrize(("path", "value", "field"), SPEC_DAMAGED, ids=[m for _p, _v, m in SPEC_DAMAGED])
def test_a_damaged_spec_is_named_with_the_file_and_field(path: tuple[Any, ...], value: object,
                                                         field: str) -> None:
    doc = _spec_json()
    set_at_path(doc, path, value)
    with pytest.raises(UsageError) as caught:
        JobSpec.from_dict(doc, where="t/slurm-job.json")
    assert caught.value.message.startswith(f"t/slurm-job.json: {field}")
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint


@pytest.mark.parametrize("key", ["argv", "env", "cwd", "trial_dir", ("hang", "disabled")])
def test_a_spec_without_a_required_field_is_refused(key: str | tuple[str, str]) -> None:
    doc = _spec_json()
    if isinstance(key, tuple):
        del doc[key[0]][key[1]]  # type: ignore[union-attr]
        key = ".".join(key)
    else:
        del doc[key]
    with pytest.raises(UsageError, match=rf"^slurm-job\.json: {key}: missing"):
        JobSpec.from_dict(doc)


@pytest.mark.parametrize(("doc", "field"), [([], "(top level)"), ({}, "specs: missing"),
                                            ({"specs": "a"}, "specs: expected"),
                                            ({"specs": [1]}, "specs[0]: expected")])
def test_a_damaged_manifest_is_located(doc: object, field: str) -> None:
    with pytest.raises(UsageError, match=rf"^slurm/b\.json: {re.escape(field)}"):
        SpecManifest.from_dict(doc, where="slurm/b.json")


def test_a_task_the_manifest_does_not_list_is_located() -> None:
    manifest = SpecManifest(("a", "b"), where="slurm/b.json")
    assert manifest.spec_of(1) == "b"
    with pytest.raises(UsageError, match=r"^slurm/b\.json: specs\[2\]: missing \(the manifest "
                                         r"lists 2 task\(s\)\)"):
        manifest.spec_of(2)


# -- oversize: refused unread ----------------------------------------------------------------

def _sparse(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.truncate(size)  # no disk, and never read
    return path


def test_an_oversize_outcome_is_refused_unread(tmp_path: Path) -> None:
    path = _sparse(tmp_path / "slurm-outcome.json", INPUT_LIMITS["Slurm trial outcome"] + 1)
    with pytest.raises(UsageError, match=rf"^{path}: the Slurm trial outcome is .*, over the "
                                         r"16\.0 MiB limit"):
        SlurmOutcome.read(path)


@pytest.mark.parametrize(("kind", "name"), [(JobSpec, "slurm-job.json"), (SpecManifest, "b.json")])
def test_an_oversize_spec_or_manifest_is_refused_unread(tmp_path: Path, kind: Any, name: str) -> None:
    path = _sparse(tmp_path / "slurm" / name, 64 * 2**20 + 1)
    with RunDirFS(tmp_path) as fs, pytest.raises(UsageError, match=r"over the 64\.0 MiB limit"):
        kind.load(fs, path)


# -- their readers keep what they tolerated ------------------------------------------------

def _executor_waiting_on(trial_dir: Path, job_id: str) -> tuple[SlurmExecutor, TrialJob]:
    ex = SlurmExecutor(SimpleNamespace(executor=ExecutorSpec(kind="slurm")))
    ex._bus = None
    return ex, TrialJob("c/trial-000", "b", 0, trial_dir, 0.0, job_id=job_id)


def test_a_file_that_is_no_outcome_is_not_the_result_and_says_why(tmp_path: Path) -> None:
    """As before the type: the trial waits for its job's state. The reason is a warning."""
    ex, job = _executor_waiting_on(tmp_path, "9_0")
    path = tmp_path / "slurm-outcome.json"
    doc = _outcome_json()
    set_at_path(doc, ("process", "wall_s"), "1")
    for text in ("{torn", json.dumps([1]), json.dumps(doc)):
        path.write_text(text)
        assert ex._own_outcome(job, path) is None and job.foreign_outcome is None
    assert len(ex.warnings) == 3 and all(w.startswith(str(path)) for w in ex.warnings)
    assert ex.warnings[-1].endswith("process.wall_s: expected a finite number, found a string '1'; "
                                    "it is not the trial's result")
    os.unlink(path)
    os.symlink(tmp_path / "elsewhere.json", path)  # a link: never followed
    assert ex._own_outcome(job, path) is None


def test_another_tasks_outcome_is_not_the_result_and_its_own_is(tmp_path: Path) -> None:
    ex, job = _executor_waiting_on(tmp_path, "9_0")
    path = tmp_path / "slurm-outcome.json"
    doc = _outcome_json()
    doc["node"] = {"job_id": "old", "array_job_id": "8", "array_task_id": "0"}
    path.write_text(json.dumps(doc))
    assert ex._own_outcome(job, path) is None and job.foreign_outcome is not None
    doc["node"] = {"array_job_id": "9", "array_task_id": "0", "job_id": "12"}
    doc["signal"] = "SIGTERM"
    path.write_text(json.dumps(doc))  # a new file: looked at again
    own = ex._own_outcome(job, path)
    assert own is not None and own.node is not None and own.node.job_id == "12"
    outcome = ex._outcome_from_file(job, None, own)
    facts = outcome.executor
    assert not outcome.cancelled and own.process.executor is None  # the read value unchanged
    assert facts is not None and (facts.slurm_job_id, facts.signal, facts.nodes) == ("12", "SIGTERM", ())
    assert facts.run_s == 1.5 and "kernel_log" not in facts.to_dict()  # the typed log: placement's
    assert ex._node_logs["9_0"] == own.kernel_log
    del doc["node"]  # not written by an array task: taken, as it always was
    path.write_text(json.dumps(doc))
    assert ex._own_outcome(job, path) is not None


def test_the_task_refuses_a_damaged_spec_with_its_place_and_runs_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    trial = run / "trials" / "c" / "trial-000"
    trial.mkdir(parents=True)
    spec = _spec_json()
    spec.update(trial_dir=str(trial), argv=["touch", str(trial / "ran")], timeout_s="30")
    (trial / "slurm-job.json").write_text(json.dumps(spec))
    (run / "slurm").mkdir()
    manifest = run / "slurm" / "b.json"
    manifest.write_text(json.dumps({"specs": [str(trial / "slurm-job.json")]}))
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    assert slurm_job.main(["slurm_job", str(manifest)]) == 2
    err = capsys.readouterr().err
    assert f"error: {trial}/slurm-job.json: timeout_s: expected" in err
    assert not (trial / "ran").exists() and not (trial / "slurm-outcome.json").exists()
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    assert slurm_job.main(["slurm_job", str(manifest)]) == 2
    assert "specs[1]: missing" in capsys.readouterr().err

