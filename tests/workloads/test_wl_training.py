"""training: a real DDP/FSDP loop that passes clean and fails on an injected NaN."""

from __future__ import annotations

import math

import pytest
from wl_helpers import run_workload

from aorta_tui.core.errors import UsageError
from aorta_tui.registry.workload import validate_config
from aorta_tui.workloads.training import Training


@pytest.mark.parametrize(("parallelism", "kind"), [("ddp", "transformer"), ("fsdp", "moe_transformer"),
                                                   ("ddp", "mlp")])
def test_clean_run_passes_and_the_loss_falls(tmp_path, parallelism, kind):
    r = run_workload(Training, {"parallelism": parallelism, "model": {"kind": kind}}, 4, tmp_path)
    assert r.passed, r.failures
    losses = r.metrics["loss_trajectory"]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]  # the optimizer really steps
    assert len(r.step_times_s) == 4 and all(t > 0 for t in r.step_times_s)
    # one rank: DDP would be the identity, so no process group is built for it (_dist.py)
    expected = ("none (one rank: DistributedDataParallel over one rank is the identity)"
                if parallelism == "ddp" else "fully_shard (FSDP2)")
    assert r.metrics["parallelism"] == expected
    backend = "none (one rank, no process group)" if parallelism == "ddp" else "gloo"
    assert r.metrics["backend"] == backend and r.device == "cpu"


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_kinds_build_different_models(tmp_path):
    seen = {kind: run_workload(Training, {"model": {"kind": kind}}, 1, tmp_path / kind)
            for kind in ("mlp", "transformer", "moe_transformer")}
    params = {k: r.metrics["parameters"] for k, r in seen.items()}
    assert len(set(params.values())) == 3, params


def test_injected_nan_fails_at_that_step_naming_the_fault(tmp_path):
    r = run_workload(Training, {"inject_nan_at_step": 2}, 4, tmp_path)
    assert not r.passed
    codes = [f.code for f in r.failures]
    assert codes[0] == "nonfinite_output"
    assert {"nonfinite_loss", "nonfinite_grad"} <= set(codes)
    first = r.failures[0]
    assert first.details["step"] == 2 and first.details["injected"] is True
    assert "inject_nan_at_step=2" in first.message
    # the run stops at the bad step; the NaN loss is recorded as null, not NaN
    assert r.metrics["loss_trajectory"][1] is None and len(r.metrics["loss_trajectory"]) == 2


def test_grad_check_can_be_turned_off(tmp_path):
    r = run_workload(Training, {"inject_nan_at_step": 1, "checks": {"fail_on_nan_grad": False}},
                     2, tmp_path)
    assert "nonfinite_grad" not in {f.code for f in r.failures}
    assert "nonfinite_output" in {f.code for f in r.failures}


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_mitigation_switches_are_applied_and_recorded(tmp_path):
    r = run_workload(Training, {}, 1, tmp_path, switches=("torch.tf32_off",))
    assert r.applied_switches and r.applied_switches[0].startswith("torch.tf32_off")


def test_unknown_nested_key_names_its_path():
    with pytest.raises(UsageError) as e:
        validate_config(Training.config_schema, {"model": {"kindd": "mlp"}})
    assert "workload_config.model.kindd" in e.value.message and "kind" in (e.value.hint or "")
    with pytest.raises(UsageError):
        validate_config(Training.config_schema, {"model": {"kind": "resnet"}})


def test_heads_that_do_not_divide_the_width_are_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="not divisible by num_heads 5"):
        run_workload(Training, {"model": {"hidden_size": 64, "num_heads": 5}}, 1, tmp_path)
