"""A Slurm run's slurm/jobs.json as a typed value (executor/slurm_jobs_doc.py): files the untyped
writer wrote read back to the same bytes; the executor writes, and its resume and the TUI's grid
read, the type; a damaged map is a located UsageError (exit 2), which each reader tolerates as it
did before the type (no map: none; a damaged entry: left out, the others kept). No Slurm here:
the executor's store is driven directly (tests/executor/test_slurm_executor.py runs real jobs)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, load_json_input
from aorta_tui.executor import slurm
from aorta_tui.executor.slurm import SlurmExecutor, TrialJob, _Jobs
from aorta_tui.executor.slurm_jobs_doc import (
    WHAT,
    BatchRecord,
    JobPlace,
    SlurmJobs,
    TrialRecord,
)
from aorta_tui.recipe.model import ExecutorSpec
from aorta_tui.tui.matrix_state import parse_placement, read_placement_file
from tests.engine_support import set_at_path

FIXTURES = Path(__file__).parent / "fixtures" / "old-writer-jobs"
WRITTEN = sorted(FIXTURES.glob("*.json"))
CTRL_C = FIXTURES / "ctrl-c-array-max-2.json"


@pytest.mark.parametrize("path", WRITTEN, ids=[p.name for p in WRITTEN])
def test_maps_the_untyped_writer_wrote_read_back_to_the_same_bytes(path: Path) -> None:
    jobs = SlurmJobs.from_dict(json.loads(path.read_bytes()), where=str(path))
    assert json_bytes(jobs.to_json()) == path.read_bytes()
    assert jobs.left_out == ()


@pytest.mark.parametrize("path", WRITTEN, ids=[p.name for p in WRITTEN])
def test_the_executor_loads_and_saves_a_map_to_its_own_bytes(path: Path, tmp_path: Path) -> None:
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "jobs.json").write_bytes(path.read_bytes())
    _Jobs.load(tmp_path).save()
    assert (tmp_path / "slurm" / "jobs.json").read_bytes() == path.read_bytes()


def test_the_typed_value_holds_what_the_executor_recorded() -> None:
    jobs = SlurmJobs.from_dict(json.loads(CTRL_C.read_text()))
    b0, b1 = jobs.batches.values()
    assert (b0.job_id, b0.session, b0.tasks, b1.tasks) == ("1037", 1, 2, 1)
    assert b0.gate == "gate-s1-4e42cd151de556c6" and b0.submitted_at == 1796431316.939659
    first = jobs.trials["none-none/trial-000"]
    assert first.place == JobPlace("RUNNING", "vm") and first.cancelled_by_orchestrator
    assert jobs.trials["cuda_launch_blocking-none/trial-000"].place is None
    assert jobs.job_id("cuda_launch_blocking-none/trial-000") == "1038_0"
    assert jobs.job_id("no/such-trial") is None
    old = SlurmJobs.from_dict(json.loads((FIXTURES / "before-the-gate.json").read_text()))
    assert {b.gate for b in old.batches.values()} == {None}


# -- the executor writes it as the untyped writer did ----------------------------------------


def _executor(run_dir: Path) -> SlurmExecutor:
    ex = SlurmExecutor(SimpleNamespace(executor=ExecutorSpec(kind="slurm")))
    ex._open_store(run_dir)
    return ex


def _job(tid: str, batch: str, task: int) -> TrialJob:
    return TrialJob(tid, batch, task, Path("/nowhere") / tid, 0.0)


def test_the_executors_changes_write_what_the_untyped_map_held(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Ctrl-C fixture's life, replayed through the executor's own changes (what
    _submit_batch records, a trial placed, every job cancelled): the same bytes."""
    want = json.loads(CTRL_C.read_text())
    ex = _executor(tmp_path)
    assert ex.store is not None
    for name, batch in want["batches"].items():
        ex.store.batches[name] = BatchRecord(job_id=None, session=batch["session"],
                                             submitted_at=0.5, tasks=batch["tasks"],
                                             gate=batch["gate"])
    for tid, rec in want["trials"].items():
        ex.store.trials[tid] = TrialRecord(batch=rec["batch"], task=rec["task"])
    ex.store.save()
    assert json.loads((tmp_path / "slurm" / "jobs.json").read_text())["batches"][
        next(iter(want["batches"]))] == {"job_id": None, "session": 1, "submitted_at": 0.5,
                                          "tasks": 2, "gate": "gate-s1-4e42cd151de556c6"}
    # the ids, found by the batches' names (as a resume finds those of a killed sweep)
    listed = {name: {f"{b['job_id']}_0": None} for name, b in want["batches"].items()}
    monkeypatch.setattr(slurm.sc, "squeue_by_name", listed.get)
    slurm._find_batch_ids(ex.store.batches)
    for name, batch in want["batches"].items():  # as _submit_batch writes the id's answer
        ex.store.batches[name] = replace(ex.store.batches[name],
                                         submitted_at=batch["submitted_at"])
    first = next(iter(want["trials"]))
    ex._place(_job(first, want["trials"][first]["batch"], 0), "RUNNING", "vm")
    ex._place(_job(first, "x", 0), "RUNNING", "vm")  # unchanged: not dirty again
    ex._save_placement()
    ex._mark_cancelled([*want["trials"], "not/a-trial"])
    assert (tmp_path / "slurm" / "jobs.json").read_bytes() == CTRL_C.read_bytes()


# -- its readers -------------------------------------------------------------------------------


def test_the_grid_reads_the_typed_map(tmp_path: Path) -> None:
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "jobs.json").write_bytes(CTRL_C.read_bytes())
    read = read_placement_file(tmp_path, None)
    assert read is not None
    stamp, placement = read
    assert placement == {"none-none/trial-000": ("vm", "CANCELLED"),
                         "cuda_module_loading_eager-none/trial-000": (None, "CANCELLED"),
                         "cuda_launch_blocking-none/trial-000": (None, "CANCELLED")}
    assert read_placement_file(tmp_path, stamp) is None  # unchanged: not read again


def _damaged(path: tuple[Any, ...], value: object) -> dict[str, Any]:
    doc = json.loads(CTRL_C.read_text())
    set_at_path(doc, path, value)
    return doc


def test_a_damaged_entry_is_left_out_by_both_readers_and_the_others_kept(tmp_path: Path) -> None:
    doc = _damaged(("trials", "none-none/trial-000", "task"), "0")
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "jobs.json").write_text(json.dumps(doc))
    store = _Jobs.load(tmp_path)
    assert sorted(store.trials) == ["cuda_launch_blocking-none/trial-000",
                                    "cuda_module_loading_eager-none/trial-000"]
    assert store.read.left_out == (f"{tmp_path}/slurm/jobs.json: trials.none-none/trial-000."
                                   "task: expected an integer, found a string '0'",)
    assert set(parse_placement(doc)) == set(store.trials)


def test_a_wrong_version_is_noted_and_the_map_still_read(tmp_path: Path) -> None:
    """No reader looked at schema_version before the type: the map is read as it was."""
    doc = _damaged(("schema_version",), "1")
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "jobs.json").write_text(json.dumps(doc))
    store = _Jobs.load(tmp_path)
    assert len(store.trials) == 3 and store.read.schema_version == 1
    assert store.read.left_out == (f"{tmp_path}/slurm/jobs.json: schema_version: expected an "
                                   "integer, found a string '1'",)
    assert len(parse_placement(doc)) == 3


@pytest.mark.parametrize("doc", [[1], {"trials": {}}, {"batches": [], "trials": {}}])
def test_a_file_that_is_no_job_map_is_none_to_both_readers(tmp_path: Path, doc: object) -> None:
    """As before the type: the executor starts from an empty map, the grid shows nothing."""
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "jobs.json").write_text(json.dumps(doc))
    store = _Jobs.load(tmp_path)
    assert store.batches == {} and store.trials == {} and store.data["batches"] == {}
    read = read_placement_file(tmp_path, None)
    assert read is not None and read[1] == {}


DAMAGED_FILES = {"not JSON": b"{\"batches\": {", "a list": b"[1]", "batches a list":
                 b'{"batches": [], "trials": {}}', "empty": b"", "not UTF-8": b"\xff\xfe{}"}


@pytest.mark.parametrize("data", DAMAGED_FILES.values(), ids=DAMAGED_FILES)
def test_a_resume_refuses_a_map_it_cannot_read_and_leaves_it_as_it_was(tmp_path: Path,
                                                                       data: bytes) -> None:
    """Forgetting the map would resubmit trials whose jobs may still run, and the resume's save
    wrote the damaged file over with an empty one (it did, silently, before). Both ways in (the
    Slurm executor's adopt, another executor's check) stop first: exit 2, the file named, a way
    on; no Slurm is asked, nothing is written."""
    (tmp_path / "slurm").mkdir()
    path = tmp_path / "slurm" / "jobs.json"
    path.write_bytes(data)
    ex = SlurmExecutor(SimpleNamespace(executor=SimpleNamespace(kind="slurm")))
    for attempt in (lambda: ex.adopt(tmp_path, {"none-none/trial-000"}),
                    lambda: SlurmExecutor.refuse_unsettled(tmp_path, {"none-none/trial-000"}, "local")):
        with pytest.raises(UsageError) as caught:
            attempt()
        err = caught.value
        assert err.exit_code == ExitCode.USAGE and err.message.startswith(f"{path}:")
        assert "cannot tell which of the run's Slurm jobs still run" in err.message
        assert f"grep aorta-{tmp_path.name}-" in (err.hint or "") and "scancel" in (err.hint or "")
        assert path.read_bytes() == data
    assert _Jobs.load(tmp_path).trials == {}  # elsewhere (the first run, the grid): no map, as before


def test_a_resume_says_which_damaged_entries_it_left_out(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _damaged(("trials", "none-none/trial-000", "task"), "0")
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "jobs.json").write_text(json.dumps(doc))
    monkeypatch.setattr(SlurmExecutor, "_query_ids", lambda self, ids: {})  # no Slurm here
    monkeypatch.setattr(SlurmExecutor, "_open_adopted_gates", lambda self, run_dir, batches: None)
    ex = SlurmExecutor(SimpleNamespace(executor=SimpleNamespace(kind="slurm")))
    ex.adopt(tmp_path, {"none-none/trial-000"})
    assert ex.warnings == [f"1 damaged entry of {tmp_path}/slurm/jobs.json left out: a job they "
                           "name is not adopted, and its trial runs again "
                           f"({tmp_path}/slurm/jobs.json: trials.none-none/trial-000.task: "
                           "expected an integer, found a string '0')"]


def test_an_oversize_map_is_refused_without_being_read(tmp_path: Path) -> None:
    (tmp_path / "slurm").mkdir()
    path = tmp_path / "slurm" / "jobs.json"
    with path.open("wb") as fh:
        fh.truncate(INPUT_LIMITS[WHAT] + 1)  # sparse: no disk, and never read
    with pytest.raises(UsageError, match=rf"^{path}: the Slurm job map is .*, over the 64.0 MiB limit"):
        load_json_input(path, what=WHAT, limit=INPUT_LIMITS[WHAT])
    assert read_placement_file(tmp_path, None) is None  # unreadable now: read again next time
    assert _Jobs.load(tmp_path).trials == {}


# -- damaged documents: a located error ----------------------------------------------------

DAMAGED: list[tuple[tuple[Any, ...], object, str]] = [
    (("schema_version",), 1.5, "schema_version: expected"),
    (("batches",), [], "batches: expected"),
    (("trials",), None, "trials: expected"),
    (("batches", "aorta-20261205-004156-8ac4-s1-b0"), "1037",
     "batches.aorta-20261205-004156-8ac4-s1-b0: expected"),
    (("batches", "aorta-20261205-004156-8ac4-s1-b0", "job_id"), 1037,
     "batches.aorta-20261205-004156-8ac4-s1-b0.job_id: expected"),
    (("batches", "aorta-20261205-004156-8ac4-s1-b1", "session"), None,
     "batches.aorta-20261205-004156-8ac4-s1-b1.session: expected"),
    (("batches", "aorta-20261205-004156-8ac4-s1-b1", "submitted_at"), None,
     "batches.aorta-20261205-004156-8ac4-s1-b1.submitted_at: expected"),
    (("batches", "aorta-20261205-004156-8ac4-s1-b1", "gate"), ["g"],
     "batches.aorta-20261205-004156-8ac4-s1-b1.gate: expected"),
    (("trials", "none-none/trial-000"), [], "trials.none-none/trial-000: expected"),
    (("trials", "none-none/trial-000", "batch"), 3, "trials.none-none/trial-000.batch: expected"),
    (("trials", "none-none/trial-000", "task"), 0.5, "trials.none-none/trial-000.task: expected"),
    (("trials", "none-none/trial-000", "node"), 7, "trials.none-none/trial-000.node: expected"),
    (("trials", "none-none/trial-000", "cancelled_by_orchestrator"), "yes",
     "trials.none-none/trial-000.cancelled_by_orchestrator: expected"),
]


@pytest.mark.parametrize(("path", "value", "field"), DAMAGED, ids=[m for _p, _v, m in DAMAGED])
def test_a_wrongly_typed_field_is_named_with_the_file(path: tuple[Any, ...], value: object,
                                                      field: str) -> None:
    with pytest.raises(UsageError) as caught:
        SlurmJobs.from_dict(_damaged(path, value), where="run/slurm/jobs.json")
    assert caught.value.message.startswith(f"run/slurm/jobs.json: {field}")
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint


@pytest.mark.parametrize("key", ["batches", "trials"])
def test_a_missing_part_is_refused(key: str) -> None:
    doc = json.loads(CTRL_C.read_text())
    del doc[key]
    with pytest.raises(UsageError, match=rf"jobs\.json: {key}: missing"):
        SlurmJobs.from_dict(doc)


def test_a_trial_without_its_batch_is_refused() -> None:
    doc = _damaged(("trials", "none-none/trial-000"), {"task": 0})
    with pytest.raises(UsageError, match=r"trials\.none-none/trial-000\.batch: missing"):
        SlurmJobs.from_dict(doc)
    assert "none-none/trial-000" not in SlurmJobs.from_dict(doc, leave_out_damaged=True).trials


def test_a_torn_file_is_located(tmp_path: Path) -> None:
    torn = tmp_path / "jobs.json"
    torn.write_bytes(CTRL_C.read_bytes()[:100])
    with pytest.raises(UsageError, match=f"^{torn}:"):
        load_json_input(torn, what=WHAT, limit=INPUT_LIMITS[WHAT])


# -- properties ----------------------------------------------------------------------------

_text = st.text(max_size=8)
_opt_text = st.none() | _text
_json = st.recursive(st.none() | st.booleans() | st.integers(-9, 9) | _text,
                     lambda inner: st.lists(inner, max_size=2)
                     | st.dictionaries(_text, inner, max_size=2), max_leaves=4)
_batches = st.builds(
    BatchRecord, job_id=_opt_text, session=st.none() | st.integers(0, 2**31),
    submitted_at=st.none() | st.floats(0, 2e9) | st.integers(0, 2**31),
    tasks=st.none() | st.integers(0, 1000), gate=_opt_text,
    extra=st.dictionaries(st.sampled_from(["x_new", "y_new"]), _json, max_size=2))
_trials = st.builds(
    TrialRecord, batch=_text, task=st.none() | st.integers(0, 1000),
    place=st.none() | st.builds(JobPlace, _opt_text, _opt_text),
    cancelled_by_orchestrator=st.booleans(),
    extra=st.dictionaries(st.sampled_from(["x_new", "y_new"]), _json, max_size=2))
_maps = st.builds(SlurmJobs, batches=st.dictionaries(_text, _batches, max_size=3),
                  trials=st.dictionaries(_text, _trials, max_size=4),
                  schema_version=st.integers(1, 3),
                  extra=st.dictionaries(st.sampled_from(["x_new", "y_new"]), _json, max_size=2))


@given(_maps)
def test_any_map_reads_back_to_itself_and_its_bytes(jobs: SlurmJobs) -> None:
    written = json_bytes(jobs.to_json())
    again = SlurmJobs.from_dict(json.loads(written))
    assert again == jobs
    assert json_bytes(again.to_json()) == written


@given(_maps)
def test_the_grid_places_every_trial_of_any_map(jobs: SlurmJobs) -> None:
    placement = parse_placement(jobs.to_json())
    assert set(placement) == set(jobs.trials)
    for tid, (node, state) in placement.items():
        rec = jobs.trials[tid]
        assert node == (rec.place.node if rec.place else None) or node is None
        if rec.cancelled_by_orchestrator and state not in ("CANCELLED", None):
            assert rec.place is not None and state == rec.place.state


@given(_maps, st.data())
def test_a_damaged_entry_of_any_map_is_all_that_is_left_out(jobs: SlurmJobs,
                                                            data: st.DataObject) -> None:
    doc = jobs.to_json()
    section = data.draw(st.sampled_from(["batches", "trials"]))
    entries = doc[section]
    assert isinstance(entries, dict)
    if not entries:
        return
    key = data.draw(st.sampled_from(sorted(entries)))
    wrong = {"job_id": 2} if section == "batches" else {"batch": 1}
    entries[key] = data.draw(st.sampled_from([[], "junk", 3, wrong]))
    with pytest.raises(UsageError, match="^" + re.escape(f"slurm/jobs.json: {section}.{key}")):
        SlurmJobs.from_dict(doc)
    kept = SlurmJobs.from_dict(doc, leave_out_damaged=True)
    want = {k: v for k, v in getattr(jobs, section).items() if k != key}
    assert getattr(kept, section) == want and len(kept.left_out) == 1
