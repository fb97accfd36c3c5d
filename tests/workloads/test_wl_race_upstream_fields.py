"""race: upstream AORTA's race config fields act here (issue 14 item 1; CPU emulation)."""

from __future__ import annotations

import pytest
from wl_helpers import run_workload

from aorta_tui.registry.workload import validate_config
from aorta_tui.workloads.race import Race

SMALL = {"alltoall_tensor_size": 256, "allreduce_tensor_size": 256, "fsdp_shard_size": 256,
         "warmup_iterations": 0}
TRANSFORMER = {"simulate_compute": True, "compute_type": "transformer", "model_dim": 32,
               "num_layers": 3, "num_heads": 0, "seq_len": 8, "include_backward_compute": True}


def test_every_upstream_field_is_a_setting() -> None:
    upstream = {  # aorta.race.config.ReproducerConfig 0.3.0's 37 fields
        "mode", "warmup_iterations", "verify_iterations", "stop_on_first_corruption",
        "log_interval", "h2d_tensor_size", "alltoall_tensor_size", "allreduce_tensor_size",
        "fsdp_shard_size", "dtype", "simulate_compute", "compute_type", "gemm_size",
        "gemm_layers", "model_dim", "num_layers", "num_heads", "ffn_size", "seq_len",
        "batch_size", "include_backward_compute", "real_backward", "shared_layer_weights",
        "optimizer", "optimizer_lr", "optimizer_weight_decay", "optimizer_betas",
        "optimizer_eps", "deterministic", "deterministic_seed", "ddp_bucketed",
        "reuse_buffers", "pin_memory", "h2d_prefetch", "same_stream_mode",
        "gpu_max_hw_queues", "expected_local_world_size"}
    assert len(upstream) == 37
    assert upstream <= {f.name for f in Race.config_schema}


@pytest.mark.parametrize("mode", ["default", "ddp", "fsdp"])
def test_shared_weight_transformer_with_real_backward_verifies_every_layer(tmp_path, mode):
    cfg = {**SMALL, **TRANSFORMER, "mode": mode, "shared_layer_weights": True,
           "real_backward": True, "optimizer": "adamw", "log_interval": 1}
    r = run_workload(Race, cfg, 2, tmp_path)
    assert r.passed, r.failures
    assert r.metrics["compute_type"] == "transformer"
    assert r.metrics["layers_verified"] == 2 * 2  # 2 iterations x (3 layers - layer 0)


def test_a_diverging_layer_is_a_layer_checksum_corruption(tmp_path, monkeypatch):
    from aorta_tui.workloads import race as race_mod

    real = race_mod._Transformer.forward

    def corrupt_last(self):  # a fault in one layer's compute path
        outs = real(self)
        outs[-1] = outs[-1] + 1
        return outs

    monkeypatch.setattr(race_mod._Transformer, "forward", corrupt_last)
    r = run_workload(Race, {**SMALL, **TRANSFORMER, "shared_layer_weights": True}, 2, tmp_path)
    assert not r.passed
    assert r.failures[0].details["buffer"] == "layer_checksum"


def test_h2d_payload_is_copied_and_verified_with_and_without_prefetch(tmp_path):
    for prefetch in (False, True):
        r = run_workload(Race, {**SMALL, "h2d_tensor_size": 1000, "h2d_prefetch": prefetch},
                         4, tmp_path / str(prefetch))
        assert r.passed, r.failures
        assert "h2d_payload" in r.metrics["buffers_verified_per_iteration"]
    # a dropped h2d wait now also shows in the payload (the collective does not read it, the
    # verifier does: it waits on h2d, so the payload stays clean while a2a_output corrupts)
    r = run_workload(Race, {**SMALL, "h2d_tensor_size": 1000, "drop_wait": "h2d"}, 2, tmp_path / "d")
    assert not r.passed and r.failures[0].details["buffer"] == "a2a_output"


@pytest.mark.parametrize("extra", [{"reuse_buffers": False}, {"same_stream_mode": True},
                                   {"ddp_bucketed": True, "mode": "ddp"},
                                   {"deterministic": True, "simulate_compute": True}])
def test_stream_and_buffer_fields_run_clean(tmp_path, extra):
    r = run_workload(Race, {**SMALL, **extra}, 3, tmp_path)
    assert r.passed, r.failures


def test_same_stream_mode_orders_a_dropped_h2d_wait(tmp_path):
    """On one stream the collective follows the copy even without the wait (upstream's
    'definitive proof' mode): the dropped wait no longer corrupts."""
    r = run_workload(Race, {**SMALL, "same_stream_mode": True, "drop_wait": "h2d"}, 2, tmp_path)
    assert r.passed, r.failures


def test_fsdp_refusals_as_upstream_and_notes() -> None:
    for key, value in (("reuse_buffers", False), ("same_stream_mode", True)):
        cfg = validate_config(Race.config_schema, {"mode": "fsdp", key: value})
        assert [p[0] for p in Race.config_problems(cfg)] == [key]
    cfg = validate_config(Race.config_schema, {"gpu_max_hw_queues": 4, "optimizer": "sgd"})
    notes = dict(Race.config_notes(cfg))
    assert "gpu_max_hw_queues_N mitigation" in notes["gpu_max_hw_queues"]
    assert "real_backward" in notes["optimizer"]


def test_shampoo_and_bad_heads_are_located_errors(tmp_path):
    from aorta_tui.recipe import load_recipe
    from aorta_tui.sweep.workload_check import workload_issues

    p = tmp_path / "r.yaml"
    p.write_text("schema_version: 1\ntrials: 1\nsteps: 2\nworkload: race\nworkload_config:\n  optimizer: shampoo\n"
                 "cells:\n  - name: a\n    mitigations: [none]\n")
    issues, _ = workload_issues(load_recipe(p))
    assert issues and issues[0].line == 6 and "none, adamw, sgd" in issues[0].message
    p.write_text("schema_version: 1\ntrials: 1\nsteps: 2\nworkload: race\nworkload_config:\n  compute_type: "
                 "transformer\n  model_dim: 100\n  num_heads: 3\n"
                 "cells:\n  - name: a\n    mitigations: [none]\n")
    issues, _ = workload_issues(load_recipe(p))
    assert [(i.line, i.path) for i in issues] == [(8, "workload_config.num_heads")]
    p.write_text("schema_version: 1\ntrials: 1\nsteps: 2\nworkload: race\nworkload_config:\n  gpu_max_hw_queues: 4\n"
                 "cells:\n  - name: a\n    mitigations: [none]\n")
    issues, notes = workload_issues(load_recipe(p))
    assert not issues and notes and ":6:" in notes[0] and "gpu_max_hw_queues" in notes[0]


class _OnlyProblems:
    """A plugin workload with one of the two optional hooks."""

    config_schema = Race.config_schema

    @classmethod
    def config_problems(cls, cfg):
        return [("optimizer", "not with this plugin", "pick another")]


class _OnlyNotes:
    config_schema = Race.config_schema

    @classmethod
    def config_notes(cls, cfg):
        return [("optimizer", "does less here")]


def test_each_config_hook_works_without_the_other(tmp_path):
    """A plugin with config_problems alone crashed asking for config_notes (exit 70), and one
    with config_notes alone was never asked for its notes."""
    from aorta_tui.recipe import load_recipe
    from aorta_tui.sweep.workload_check import _config_hooks

    p = tmp_path / "r.yaml"
    p.write_text("schema_version: 1\ntrials: 1\nsteps: 2\nworkload: race\nworkload_config:\n"
                 "  optimizer: sgd\ncells:\n  - name: a\n    mitigations: [none]\n")
    recipe = load_recipe(p)
    issues: list = []
    assert _config_hooks(recipe, _OnlyProblems, issues) == []
    assert [(i.path, i.line) for i in issues] == [("workload_config.optimizer", 6)]
    assert _config_hooks(recipe, _OnlyNotes, []) == [
        f"{p}:6:14: workload_config.optimizer: does less here"]
