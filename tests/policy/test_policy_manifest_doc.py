"""A policy sweep's sweep.json as a typed value (policy/manifest_doc.py): manifests the
untyped writer wrote read back to the same bytes; the evaluator writes it and the report and
the resume read it; a damaged one is a located error (UsageError from the reader, a RunDirError
naming the file and the field from ``load_manifest``, exit 2 both), never a traceback."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, RunDirError, UsageError
from aorta_tui.policy.manifest_doc import (
    OrderEntry,
    PolicyRecord,
    RecordedRequest,
    SweepManifest,
)
from aorta_tui.policy.presets import GpuControlSettings, Policy
from aorta_tui.policy.report import load_manifest
from tests.engine_support import set_at_path

FIXTURES = Path(__file__).parent / "fixtures"
WRITTEN = [FIXTURES / "golden-run" / "sweep.json",
           FIXTURES / "old-writer-manifests" / "sweep-gpu-control.json",
           FIXTURES / "old-writer-manifests" / "sweep-real.json"]


@pytest.mark.parametrize("path", WRITTEN, ids=[p.name for p in WRITTEN])
def test_manifests_the_untyped_writer_wrote_read_back_to_the_same_bytes(path: Path) -> None:
    manifest = SweepManifest.from_dict(json.loads(path.read_bytes()), where=str(path))
    assert json_bytes(manifest.to_json()) == path.read_bytes()


def test_the_typed_value_holds_what_the_sweep_recorded() -> None:
    m = load_manifest(FIXTURES / "golden-run")
    assert m.request.workload == "tiny_kernel_stress" and m.request.seed == 7
    assert m.request.queue_args == ("--size", "tiny") and m.request.timeout_s == 900.0
    assert [p.policy.name for p in m.policies] == ["baseline", "cuda_max_connections_1",
                                                   "stream_priority_lc", "priority_lc"]
    assert m.policies[3].policy.gpu_control.clock_level == 7
    assert m.skipped["priority_lc"].startswith("not run")
    assert m.order[0] == OrderEntry(0, "cuda_max_connections_1", 1, "001-cuda_max_connections_1-t1")
    gpu = SweepManifest.from_dict(json.loads(WRITTEN[1].read_text()))
    assert gpu.request.allow_gpu_control and gpu.notes["gpu"][0].startswith("gpu control (fake)")


def test_a_sweep_writes_it_and_a_resume_reads_it(tmp_path: Path) -> None:
    import sys

    from aorta_tui.policy.evaluator import PolicySweepRequest, resume_policy_sweep, run_policy_sweep

    child = tmp_path / "child.py"
    child.write_text("import sys\nsys.exit(1)\n")

    def command(req: PolicySweepRequest, policy: Policy, result: Path) -> list[str]:
        return [sys.executable, str(child)]

    policy = Policy(name="odd", env={"X": "1"}, harness_args=("--sync-mode", "per_iteration"))
    req = PolicySweepRequest(workload="tiny_kernel_stress", policies=(policy,), streams=2,
                             output_dir=tmp_path / "run", trials=2, seed=9, timeout_s=30,
                             queue_args=("--size", "tiny"), python=sys.executable)
    run_policy_sweep(req, trial_command=command)
    path = tmp_path / "run" / "sweep.json"
    manifest = load_manifest(tmp_path / "run")
    assert json_bytes(manifest.to_json()) == path.read_bytes()
    # the reference was added in front of the sweep's own policy
    assert manifest.request == dataclasses.replace(req.record(), policies=("baseline", "odd"))
    assert manifest.policies[1] == PolicyRecord(policy)
    (tmp_path / "run" / "trials" / manifest.order[3].dir / "outcome.json").unlink()
    again = resume_policy_sweep(tmp_path / "run", trial_command=command)
    assert path.read_bytes() == json_bytes(manifest.to_json())  # a resume does not rewrite it
    assert again.report.run_id == manifest.run_id and again.report.failed_trials == 4


def test_a_hand_made_manifest_reports_but_does_not_resume(tmp_path: Path) -> None:
    """Only the parts a report needs are required; what a resume also needs it checks."""
    from aorta_tui.policy.evaluator import resume_policy_sweep

    run = tmp_path / "run"
    (run / "trials").mkdir(parents=True)
    (run / "sweep.json").write_text(json.dumps({
        "kind": "aorta-tui/policy-sweep", "request": {"seed": 0}, "policies": [{"name": "baseline"}],
        "order": [{"position": 0, "policy": "baseline", "trial": 1, "dir": "001-baseline-t1"}]}))
    manifest = load_manifest(run)
    assert manifest.request.workload is None and manifest.run_id is None
    assert manifest.request.timeout_s == 900.0 and manifest.reference == "baseline"
    with pytest.raises(RunDirError, match=r"is incomplete \(no request\.workload, "
                                          r"request\.streams, request\.trials\)"):
        resume_policy_sweep(run)


# -- damaged documents: a located error ----------------------------------------------------

DAMAGED: list[tuple[tuple[Any, ...], object, str]] = [
    (("request",), [], "request: expected"),
    (("request", "workload"), 3, "request.workload: expected"),
    (("request", "streams"), "2", "request.streams: expected"),
    (("request", "seed"), "7", "request.seed: expected"),
    (("request", "timeout_s"), -1, "request.timeout_s: not a number of seconds above 0"),
    (("request", "queue_args", 0), 1, "request.queue_args[0]: expected"),
    (("policies", 1, "env", "CUDA_DEVICE_MAX_CONNECTIONS"), 1,
     "policies[1].env.CUDA_DEVICE_MAX_CONNECTIONS: expected"),
    (("policies", 3, "gpu_control", "clock_level"), "7", "policies[3].gpu_control.clock_level"),
    (("notes", "baseline"), "x", "notes.baseline: expected"),
    (("skipped", "priority_lc"), None, "skipped.priority_lc: expected"),
    (("order", 2, "trial"), "1", "order[2].trial: expected"),
    (("order", 2, "dir"), "../x", "order[2].dir: not a trial directory name"),
    # a resume runs each trial by its policy's definition: one naming none ended it with a KeyError
    (("order", 2, "policy"), "ghost", "order[2].policy: 'ghost' is not one of the sweep's policies"),
    (("reference_added",), "yes", "reference_added: expected"),
]


@pytest.mark.parametrize(("path", "value", "field"), DAMAGED, ids=[m for _p, _v, m in DAMAGED])
def test_a_damaged_manifest_is_a_run_dir_error_naming_the_field(
        tmp_path: Path, path: tuple[Any, ...], value: object, field: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    doc = json.loads((FIXTURES / "golden-run" / "sweep.json").read_text())
    set_at_path(doc, path, value)
    (run / "sweep.json").write_text(json.dumps(doc))
    with pytest.raises(RunDirError) as caught:
        load_manifest(run)
    assert caught.value.message.startswith(f"{run / 'sweep.json'} is damaged: {field}")
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint
    with pytest.raises(UsageError) as direct:
        SweepManifest.from_dict(doc)
    assert direct.value.message.startswith(f"sweep.json: {field}")


@pytest.mark.parametrize("key", ["request", "policies", "order", "order[0].dir"])
def test_missing_parts_and_another_kind(key: str) -> None:
    doc = json.loads((FIXTURES / "golden-run" / "sweep.json").read_text())
    if "[" not in key:
        del doc[key]
        with pytest.raises(UsageError, match=f"{key}: missing"):
            SweepManifest.from_dict(doc)
    else:
        del doc["order"][0]["dir"]
        with pytest.raises(UsageError, match=r"order\[0\]\.dir: missing"):
            SweepManifest.from_dict(doc)
    with pytest.raises(UsageError, match="is not a policy sweep manifest"):
        SweepManifest.from_dict({**doc, "kind": "aorta-tui/policy-report"})


# -- properties ----------------------------------------------------------------------------

_text = st.text(max_size=8)
_name = st.text("abc_", min_size=1, max_size=6)
_json = st.recursive(st.none() | st.booleans() | st.integers(-9, 9) | _text,
                     lambda inner: st.lists(inner, max_size=2)
                     | st.dictionaries(_text, inner, max_size=2), max_leaves=4)
_opt_int = st.none() | st.integers(0, 2**31)
_policies = st.builds(
    Policy, name=_name, description=_text, kind=_text, vendor=_text,
    env=st.dictionaries(_text, _text, max_size=2), harness_args=st.lists(_text, max_size=2).map(tuple),
    gpu_control=st.builds(GpuControlSettings, _opt_int, _opt_int), source=_text)
_requests = st.builds(
    RecordedRequest, workload=st.none() | _text, output_dir=_text, policies=st.lists(_name, max_size=3).map(tuple),
    streams=st.none() | st.integers(1, 64), trials=st.none() | st.integers(1, 9),
    iterations=_opt_int, warmup=_opt_int,
    device=st.none() | _text, seed=st.integers(0, 2**31), allow_gpu_control=st.booleans(),
    gpu_index=st.integers(0, 7), queue_args=st.lists(_text, max_size=3).map(tuple),
    timeout_s=st.floats(min_value=0.001, max_value=1e6) | st.integers(1, 10**6))
_records = st.lists(st.builds(PolicyRecord, _policies,
                              st.dictionaries(st.sampled_from(["x_extra", "origin"]), _json)),
                    max_size=3).map(tuple)


def _orders(records: tuple[PolicyRecord, ...]) -> st.SearchStrategy[tuple[OrderEntry, ...]]:
    """Planned trials, each of one of the sweep's policies (the reader refuses any other)."""
    if not records:
        return st.just(())
    names = st.sampled_from([r.policy.name for r in records])
    return st.lists(st.builds(OrderEntry, st.integers(0, 99), names, st.integers(1, 9), _name),
                    max_size=4).map(tuple)


_manifests = _records.flatmap(lambda records: st.builds(
    SweepManifest, run_id=st.none() | _text, created=st.none() | _text, request=_requests,
    reference=_name, reference_added=st.booleans(), policies=st.just(records),
    notes=st.dictionaries(_name, st.lists(_text, max_size=2).map(tuple), max_size=2),
    skipped=st.dictionaries(_name, _text, max_size=2), order=_orders(records)))


@given(_manifests)
def test_any_manifest_reads_back_to_itself_and_its_bytes(manifest: SweepManifest) -> None:
    written = json_bytes(manifest.to_json())
    again = SweepManifest.from_dict(json.loads(written))
    assert again == manifest
    assert json_bytes(again.to_json()) == written


# -- the dry run's plan --------------------------------------------------------------------


def test_the_dry_run_plan_prints_what_the_untyped_plan_printed(tmp_path: Path) -> None:
    """The same request as the fixture's command line (its python and output directory are
    what the plan's argv names), planned in process: the same JSON, byte for byte."""
    from aorta_tui.policy.evaluator import PolicyEvaluator, PolicySweepRequest
    from aorta_tui.policy.gpu_control import FakeBackend
    from aorta_tui.policy.presets import BUILTIN_BY_NAME

    fixture = FIXTURES / "old-writer-manifests" / "dry-run-gpu-control.json"
    python = json.loads(fixture.read_text())["policies"][0]["argv"][0]
    req = PolicySweepRequest(
        workload="tiny_kernel_stress", streams=2, output_dir=Path("/tmp/pd/dry2"), trials=2,
        policies=(BUILTIN_BY_NAME["cuda_max_connections_1"], BUILTIN_BY_NAME["priority_lc"]),
        device="cpu", seed=3, allow_gpu_control=True, queue_args=("--size", "tiny"),
        python=python)
    plan = PolicyEvaluator(req, gpu_backend=FakeBackend(tmp_path / "gpu.json"),
                           base_env={}).dry_run()
    assert json.dumps(plan.to_json(), indent=2) + "\n" == fixture.read_text()
    assert plan.trials_total == 6 and plan.request.allow_gpu_control
    assert [p.policy.name for p in plan.policies] == ["baseline", "cuda_max_connections_1",
                                                      "priority_lc"]
    assert plan.gpu_control_plans["priority_lc"].startswith("apply:")
    assert plan.policies[2].notes[0].startswith("gpu control (fake)")
    assert not (tmp_path / "gpu.json").exists()  # planning read the (fake) GPU, changed nothing
