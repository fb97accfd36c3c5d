"""A trial worker's workload_result.json as a typed value (core/worker_result.py): the typed
writers (the worker's, the in-process trial's) write the bytes the untyped ones wrote; files a
real worker wrote read back to their own bytes; a damaged file is a located error (file, field,
fix), never a traceback; an oversize one is refused; the orchestrator's fold of the ranks gives
what it gave, and a damaged rank file still gives the trial the verdict it gave."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.classify import classify
from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import AortaError, ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.core.rundir_fs import RunDirFS
from aorta_tui.core.trial_contract import workload_rank_files, workload_result_filename
from aorta_tui.core.worker_result import WHAT, WorkerResult, read_worker_result
from aorta_tui.registry.workload import Failure, WorkloadResult
from aorta_tui.sweep.orchestrator import _read_workload_results, _result_section


def _old_worker_writer(result: WorkloadResult, worker_wall_s: float, timeline: dict[str, Any]) -> bytes:
    """What trial/worker.py's main wrote before the type (its body, verbatim, as bytes)."""
    out = result.to_dict()
    out["worker_wall_s"] = worker_wall_s
    out["timeline"] = timeline
    return json_bytes(out)


def _old_inprocess_writer(result: WorkloadResult, timeline: dict[str, Any]) -> bytes:
    """What trial/inprocess.py wrote before the type: no worker_wall_s."""
    record = result.to_dict()
    record["timeline"] = timeline
    return json_bytes(record)


def _old_fold(fs: RunDirFS, trial_dir: Path) -> dict[str, Any] | None:
    """sweep/orchestrator.py's _read_workload_results before the type, verbatim."""
    result = fs.read_json_or_none(trial_dir / workload_result_filename(0))
    if not isinstance(result, dict):
        return None
    ranks = workload_rank_files(trial_dir)
    if ranks:
        result.setdefault("ranks", {})
        for p in ranks:
            other = fs.read_json_or_none(p)
            if not isinstance(other, dict):
                continue
            rank = p.stem.rsplit("rank", 1)[-1]
            result["ranks"][rank] = {"passed": other.get("passed"), "metrics": other.get("metrics", {})}
            for f in other.get("failures", []):
                result["failures"].append({**f, "message": f"rank {rank}: {f.get('message', '')}"})
        result["passed"] = not result["failures"]
    return result


# -- the bytes -----------------------------------------------------------------------------

_text = st.text(max_size=10)  # lone surrogates included: a message with an undecodable byte
# what a workload puts in its metrics and failure details: any JSON (NaN and infinities too:
# a nonfinite loss is reported with its value)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.floats() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8)
_objects = st.dictionaries(_text, _json, max_size=4)
_failures = st.lists(st.builds(Failure, _text, _text, _objects), max_size=3)
_results = st.builds(
    WorkloadResult, step_times_s=st.lists(st.floats(0, 1e4), max_size=5), metrics=_objects,
    failures=_failures, device=_text, emulated=st.booleans(),
    applied_switches=st.lists(_text, max_size=3), notes=st.lists(_text, max_size=3))
# trial/timeline.ChildMarks.finish()'s shape: marks, info, unavailable (any JSON object here)
_timelines = st.fixed_dictionaries({"marks": st.dictionaries(_text, st.integers(0, 2**63), max_size=4),
                                    "info": _objects})


@given(_results, st.floats(0, 1e5), _timelines)
def test_the_workers_typed_writer_writes_the_untyped_writers_bytes(
        result: WorkloadResult, wall: float, timeline: dict[str, Any]) -> None:
    old = _old_worker_writer(result, wall, timeline)
    doc = WorkerResult.of(result.to_dict(), worker_wall_s=wall, timeline=timeline)
    assert json_bytes(doc.to_json()) == old
    assert doc.file_bytes(where="f") == old  # what the worker writes: checked, the same bytes
    # and what it wrote reads back to the same bytes (NaN != NaN: the bytes are compared)
    assert json_bytes(WorkerResult.from_dict(json.loads(old), where="f").to_json()) == old


@given(_results, _timelines)
def test_the_in_process_typed_writer_writes_the_untyped_writers_bytes(
        result: WorkloadResult, timeline: dict[str, Any]) -> None:
    old = _old_inprocess_writer(result, timeline)
    doc = WorkerResult.of(result.to_dict(), timeline=timeline)
    assert json_bytes(doc.to_json()) == old
    assert doc.file_bytes(where="f") == old
    again = WorkerResult.from_dict(json.loads(old), where="f")
    assert again.worker_wall_s is None and json_bytes(again.to_json()) == old


def test_a_path_or_a_set_in_the_metrics_is_written_as_before() -> None:
    """The workload's values go out as it gave them: json_bytes writes what JSON lacks its way."""
    result = WorkloadResult(metrics={"ckpt": Path("/tmp/x"), "ids": {3, 1}},
                            failures=[Failure("f", "m", {"where": Path("/a")})])
    old = _old_worker_writer(result, 1.5, {"marks": {}})
    assert json_bytes(WorkerResult.of(result.to_dict(), worker_wall_s=1.5,
                                      timeline={"marks": {}}).to_json()) == old


def test_a_non_finite_step_time_is_written_and_read_as_before() -> None:
    result = WorkloadResult(step_times_s=[float("nan"), float("inf"), 1])
    old = _old_worker_writer(result, 1.0, {})
    doc = WorkerResult.of(result.to_dict(), worker_wall_s=1.0, timeline={})
    assert doc.file_bytes(where="f") == old and b"NaN" in old
    assert json_bytes(WorkerResult.from_dict(json.loads(old), where="f").to_json()) == old


# A workload that broke WorkloadResult's types: the untyped writer wrote it as it was, and the
# typed reader would refuse it (a failing trial read as one without a result).
_BROKEN = [
    (WorkloadResult(failures=[Failure("boom", None)]), "failures[0].message"),  # type: ignore[arg-type]
    (WorkloadResult(failures=[Failure(7, "m")]), "failures[0].code"),  # type: ignore[arg-type]
    (WorkloadResult(device=None), "device"),  # type: ignore[arg-type]
    (WorkloadResult(step_times_s=["0.1"]), "step_times_s[0]"),  # type: ignore[list-item]
]


@pytest.mark.parametrize(("result", "field"), _BROKEN, ids=[f for _, f in _BROKEN])
def test_a_result_that_breaks_the_types_is_written_as_a_located_failure(result: WorkloadResult,
                                                                        field: str) -> None:
    """Refused now: the trial fails with ``invalid_result`` naming the field, rather than
    leaving a file that reads as no result (a failure lost, the trial a pass on its exit code)."""
    doc = WorkerResult.of(result.to_dict(), worker_wall_s=2.0, timeline={"marks": {"x": 1}})
    written = WorkerResult.from_dict(json.loads(doc.file_bytes(where="/t/workload_result.json")),
                                     where="f")
    assert not written.passed and [f.code for f in written.failures] == ["invalid_result"]
    message = written.failures[0].message
    assert message.startswith("the workload returned a result aorta-tui cannot record: "
                              f"/t/workload_result.json: {field}"), message
    assert written.worker_wall_s == 2.0 and written.timeline == {"marks": {"x": 1}}


def test_a_result_over_the_size_limit_is_written_as_a_located_failure(monkeypatch) -> None:
    monkeypatch.setitem(INPUT_LIMITS, "worker result", 512)
    doc = WorkerResult.of(WorkloadResult(notes=["x" * 600]).to_dict(), timeline={})
    written = json.loads(doc.file_bytes(where="w.json"))
    assert [f["code"] for f in written["failures"]] == ["invalid_result"]
    assert "w.json: " in written["failures"][0]["message"] and "over the 512" in written["failures"][0]["message"]


def test_a_key_a_newer_writer_added_is_kept_after_the_known_ones() -> None:
    data = {**WorkerResult(worker_wall_s=1.0, timeline={}).to_json(), "gpu": {"n": 2}}
    data["failures"] = [{"code": "c", "message": "m", "details": {}, "since": 3}]
    doc = WorkerResult.from_dict(data, where="f")
    assert doc.extra == {"gpu": {"n": 2}} and doc.failures[0].extra == {"since": 3}
    assert doc.to_json() == data and list(doc.to_json()) == list(data)


# -- files a real worker wrote ---------------------------------------------------------------

_SPEC = {"workload": "gpu_smoke", "workload_ref": None, "steps": 2, "config": {}, "seed": 0,
         "switches": []}


def test_the_file_a_worker_process_wrote_reads_back_to_its_bytes(tmp_path: Path) -> None:
    spec = tmp_path / "trial_spec.json"
    spec.write_text(json.dumps({**_SPEC, "trial_dir": str(tmp_path)}))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-m", "aorta_tui.trial.worker", str(spec)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    path = tmp_path / "workload_result.json"
    with RunDirFS(tmp_path) as fs:
        doc = read_worker_result(fs, path)
    assert json_bytes(doc.to_json()) == path.read_bytes()
    assert doc.passed and len(doc.step_times_s) == 2 and doc.worker_wall_s is not None
    assert doc.timeline is not None and "result_write" in doc.timeline["marks"]


def test_the_file_an_in_process_trial_wrote_reads_back_to_its_bytes(tmp_path: Path) -> None:
    from aorta_tui.trial.inprocess import run_in_process

    with RunDirFS(tmp_path) as fs:
        outcome = run_in_process({**_SPEC, "trial_dir": str(tmp_path)},
                                 {"CUDA_VISIBLE_DEVICES": ""}, tmp_path, fs)
        doc = read_worker_result(fs, tmp_path / "workload_result.json")
    assert outcome.exit_code == 0
    assert json_bytes(doc.to_json()) == (tmp_path / "workload_result.json").read_bytes()
    assert doc.worker_wall_s is None and doc.timeline is not None and doc.passed


# -- damage ----------------------------------------------------------------------------------

_GOOD = WorkerResult(step_times_s=(0.5,), metrics={"loss": 1.0},
                     failures=(), worker_wall_s=2.0, timeline={"marks": {}}).to_json()
_HINT = f"this {WHAT} is damaged or was not written by aorta-tui"
_GOOD_FAILURE = {"code": "nonfinite_loss", "message": "loss is nan", "details": {"step": 3}}

# (what, the file's text, the words the message must hold)
_DAMAGE: list[tuple[str, str, str]] = [
    ("truncated", json.dumps(_GOOD)[:40], "not valid JSON"),
    ("empty", "", "not valid JSON"),
    ("an array", "[1, 2]", "(top level): expected an object"),
    ("passed missing", json.dumps({k: v for k, v in _GOOD.items() if k != "passed"}), "passed: missing"),
    ("passed a string", json.dumps({**_GOOD, "passed": "yes"}), "passed: expected true or false"),
    ("failures an object", json.dumps({**_GOOD, "failures": {}}), "failures: expected an array"),
    ("a failure a string", json.dumps({**_GOOD, "failures": ["boom"]}), "failures[0]: expected an object"),
    ("a failure without a code", json.dumps({**_GOOD, "failures": [{"message": "m", "details": {}}]}),
     "failures[0].code: missing"),
    ("a code a number", json.dumps({**_GOOD, "failures": [{**_GOOD_FAILURE, "code": 7}]}),
     "failures[0].code: expected a string"),
    ("details a list", json.dumps({**_GOOD, "failures": [{**_GOOD_FAILURE, "details": []}]}),
     "failures[0].details: expected an object"),
    ("a step time a string", json.dumps({**_GOOD, "step_times_s": ["0.5"]}), "step_times_s[0]: expected"),
    ("metrics a list", json.dumps({**_GOOD, "metrics": []}), "metrics: expected an object"),
    ("notes a string", json.dumps({**_GOOD, "notes": "n"}), "notes: expected an array"),
    ("worker_wall_s null", json.dumps({**_GOOD, "worker_wall_s": None}), "worker_wall_s: expected"),
    ("timeline a list", json.dumps({**_GOOD, "timeline": []}), "timeline: expected an object"),
    ("not UTF-8", '{"device": "\udcff"}', "UTF-8"),
]


def test_a_damaged_file_is_a_located_error_never_a_traceback(tmp_path: Path, attack_tally) -> None:
    path = tmp_path / "workload_result.json"
    cases = failures = 0
    with RunDirFS(tmp_path) as fs:
        for what, text, words in _DAMAGE:
            path.write_bytes(text.encode("utf-8", "surrogateescape"))
            cases += 1
            try:
                read_worker_result(fs, path)
                failures += 1
                print(f"{what}: read")
            except UsageError as exc:
                ok = (str(path) in exc.message and words in exc.message
                      and exc.exit_code == ExitCode.USAGE and exc.hint == _HINT)
                failures += not ok
                if not ok:
                    print(f"{what}: {exc.message} / {exc.hint}")
    attack_tally.record("workload result damage", cases=cases, failures=failures,
                        promise="a located UsageError (file, field), never a traceback")
    assert failures == 0


def test_a_field_error_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "workload_result.json"
    path.write_text(json.dumps({**_GOOD, "passed": "yes"}))
    with RunDirFS(tmp_path) as fs, pytest.raises(UsageError) as exc:
        read_worker_result(fs, path)
    assert exc.value.message.startswith(f"{path}: passed: expected true or false")
    assert exc.value.hint == _HINT


def test_an_oversize_file_is_refused_before_it_is_read(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "workload_result.json"
    path.write_text(json.dumps(_GOOD))
    monkeypatch.setitem(INPUT_LIMITS, "worker result", 64)
    with RunDirFS(tmp_path) as fs, pytest.raises(UsageError) as exc:
        read_worker_result(fs, path)
    assert str(path) in exc.value.message and "64" in exc.value.message


def test_a_fifo_in_its_place_is_refused_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "workload_result.json")
    with RunDirFS(tmp_path) as fs, pytest.raises(AortaError):
        read_worker_result(fs, tmp_path / "workload_result.json")


# -- the orchestrator's fold of the ranks ----------------------------------------------------

_docs = st.builds(lambda r, w, t: WorkerResult.of(r.to_dict(), worker_wall_s=w, timeline=t),
                  _results, st.floats(0, 1e5), _timelines)


def _write(trial_dir: Path, rank: int, doc: WorkerResult | str) -> None:
    data = doc if isinstance(doc, str) else json_bytes(doc.to_json()).decode("utf-8", "surrogatepass")
    (trial_dir / workload_result_filename(rank)).write_bytes(data.encode("utf-8", "surrogatepass"))


def _both(trial_dir: Path) -> tuple[Any, Any]:
    """The untyped fold's dict and the typed fold's, each as the sweep used it (the timeline
    taken out for the trial's timeline, the rest result.json's workload_result)."""
    with RunDirFS(trial_dir) as fs:
        old, new = _old_fold(fs, trial_dir), _read_workload_results(fs, trial_dir)
    if old is not None:
        old.pop("timeline", None)  # what the old Sweep._timeline did to it
    return old, _result_section(new)


@settings(max_examples=40)
@given(st.lists(_docs, min_size=1, max_size=3))
def test_the_fold_of_the_ranks_gives_what_the_untyped_reader_gave(tmp_path_factory, docs) -> None:
    trial_dir = tmp_path_factory.mktemp("trial")
    for rank, doc in enumerate(docs):
        _write(trial_dir, rank, doc)
    with RunDirFS(trial_dir) as fs:
        old, new = _old_fold(fs, trial_dir), _read_workload_results(fs, trial_dir)
    assert new is not None and old is not None
    assert json_bytes(new.timeline) == json_bytes(old.pop("timeline"))  # the trial's timeline
    assert json_bytes(_result_section(new)) == json_bytes(old)  # key order too (NaN: as bytes)
    assert new.step_times_s == tuple(docs[0].step_times_s)  # the step times the sweep keeps


# A damaged file the old reader took without a traceback, and what the trial's verdict was.
_RANK_DAMAGE = [
    ("rank 0 truncated", {0: json.dumps(_GOOD)[:30]}),
    ("rank 0 an array", {0: "[]"}),
    ("rank 0 missing, rank 1 there", {1: json.dumps(_GOOD)}),
    ("rank 1 truncated", {0: json.dumps(_GOOD), 1: "{"}),
    ("rank 1 a string", {0: json.dumps({**_GOOD, "failures": [_GOOD_FAILURE]}), 1: '"x"'}),
]


@pytest.mark.parametrize("files", [f for _, f in _RANK_DAMAGE], ids=[w for w, _ in _RANK_DAMAGE])
def test_a_damaged_rank_file_gives_the_trial_the_verdict_it_gave(tmp_path: Path, files) -> None:
    """Lenient, as it was: rank 0's unreadable file is no workload result (the verdict is the
    process's and the logs': here a clean exit, so pass), another rank's is left out of the
    fold (rank 0's failures still fail the trial)."""
    for rank, text in files.items():
        _write(tmp_path, rank, text)
    old, new = _both(tmp_path)
    assert new == old
    (tmp_path / "out.log").write_text("")
    verdicts = [classify(None, stdout_path=tmp_path / "out.log", stderr_path=tmp_path / "out.log",
                         workload_result=r).verdict for r in (old, new)]
    assert verdicts[0] == verdicts[1] == ("fail" if files.get(0, "").count("nonfinite") else "pass")


def test_a_rank_file_that_parses_but_is_no_result_is_left_out_not_a_traceback(tmp_path: Path) -> None:
    """Refused now (commented in the orchestrator): the untyped fold stopped the sweep with a
    TypeError on a rank whose failures were no list; the typed one leaves that rank out, as it
    leaves out a rank file that is no JSON."""
    _write(tmp_path, 0, json.dumps(_GOOD))
    _write(tmp_path, 1, json.dumps({**_GOOD, "failures": 3}))
    with RunDirFS(tmp_path) as fs:
        with pytest.raises(TypeError):
            _old_fold(fs, tmp_path)
        new = _result_section(_read_workload_results(fs, tmp_path))
    assert new is not None and new["ranks"] == {} and new["passed"] is True
