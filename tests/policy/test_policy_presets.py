"""Presets, name resolution, the interleaved order and each trial's environment."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from aorta_tui.core.errors import UsageError
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.policy.evaluator import (
    PolicySweepRequest,
    plan_order,
    queue_child_argv,
    trial_environment,
    trial_queue_config,
    with_reference,
)
from aorta_tui.policy.presets import BUILTIN_BY_NAME, Policy, resolve_policies

UPSTREAM_SEVEN = ["baseline", "priority_lc", "priority_be", "multi_tenant_fair", "high_queue",
                  "default_uvm", "xnack_off"]


def test_upstream_presets_keep_their_meaning() -> None:
    assert set(UPSTREAM_SEVEN) <= set(BUILTIN_BY_NAME)
    assert BUILTIN_BY_NAME["multi_tenant_fair"].env == {"GPU_MAX_HW_QUEUES": "2"}
    assert BUILTIN_BY_NAME["high_queue"].env == {"GPU_MAX_HW_QUEUES": "8"}
    assert BUILTIN_BY_NAME["default_uvm"].env == {"HSA_XNACK": "1"}
    assert BUILTIN_BY_NAME["xnack_off"].env == {"HSA_XNACK": "0"}
    assert BUILTIN_BY_NAME["priority_lc"].gpu_control.clock_level == 7
    be = BUILTIN_BY_NAME["priority_be"].gpu_control
    assert (be.clock_level, be.power_limit_w) == (2, 150)
    for n in (1, 8, 32):
        assert BUILTIN_BY_NAME[f"cuda_max_connections_{n}"].env == {
            "CUDA_DEVICE_MAX_CONNECTIONS": str(n)}
    assert BUILTIN_BY_NAME["cuda_launch_blocking"].env == {"CUDA_LAUNCH_BLOCKING": "1"}
    assert BUILTIN_BY_NAME["stream_priority_lc"].harness_args
    assert BUILTIN_BY_NAME["cuda_module_loading_lazy"].env == {"CUDA_MODULE_LOADING": "LAZY"}


def test_unknown_policy_suggests_the_near_name() -> None:
    with pytest.raises(UsageError) as info:
        resolve_policies(["baseline", "cuda_max_conections_1"])
    assert "did you mean cuda_max_connections_1" in info.value.render()
    with pytest.raises(UsageError, match="twice"):
        resolve_policies(["baseline", "baseline"])
    mine = Policy(name="mine", env={"A": "1"})
    assert [p.name for p in resolve_policies(["mine", "xnack_off"], [mine])] == ["mine",
                                                                                  "xnack_off"]


def test_reference_is_added_first() -> None:
    pols, added = with_reference([BUILTIN_BY_NAME["xnack_off"]])
    assert added and [p.name for p in pols] == ["baseline", "xnack_off"]
    pols, added = with_reference([BUILTIN_BY_NAME["xnack_off"], BUILTIN_BY_NAME["baseline"]])
    assert not added and [p.name for p in pols] == ["baseline", "xnack_off"]


def test_order_is_interleaved_seeded_and_complete() -> None:
    names = ["baseline", "a", "b", "c"]
    plan = plan_order(names, trials=5, seed=3)
    assert plan == plan_order(names, trials=5, seed=3)
    assert [t.policy for t in plan] != [t.policy for t in plan_order(names, trials=5, seed=4)]
    assert Counter(t.policy for t in plan) == {n: 5 for n in names}
    # Every round runs every policy once before any policy runs again.
    for r in range(5):
        block = plan[r * 4:(r + 1) * 4]
        assert sorted(t.policy for t in block) == sorted(names)
        assert {t.trial for t in block} == {r + 1}
    # Rounds are shuffled: the same policy is not always first.
    assert len({plan[r * 4].policy for r in range(5)}) > 1
    assert [t.position for t in plan] == list(range(20))
    assert len({t.dir_name for t in plan}) == 20


def test_trial_environment_removes_every_controlled_variable() -> None:
    pols = [BUILTIN_BY_NAME["baseline"], BUILTIN_BY_NAME["cuda_max_connections_1"],
            BUILTIN_BY_NAME["xnack_off"]]
    parent = {"PATH": "/bin", "CUDA_DEVICE_MAX_CONNECTIONS": "32", "HSA_XNACK": "1", "X": "y"}
    env, removed = trial_environment(parent, pols[0], pols)
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in env and "HSA_XNACK" not in env
    assert env["PATH"] == "/bin" and env["X"] == "y"
    assert removed == ["CUDA_DEVICE_MAX_CONNECTIONS", "HSA_XNACK"]
    env, _ = trial_environment(parent, pols[1], pols)
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1" and "HSA_XNACK" not in env
    assert parent["CUDA_DEVICE_MAX_CONNECTIONS"] == "32"  # the parent is untouched


def test_a_trial_is_the_queue_engine_reading_the_policys_config(tmp_path: Path) -> None:
    req = PolicySweepRequest(workload="tiny_kernel_stress", policies=(), streams=16,
                       output_dir=tmp_path, iterations=7, device="cuda",
                       queue_args=("--size", "tiny"), python="py")
    lc = BUILTIN_BY_NAME["stream_priority_lc"]
    argv = queue_child_argv(req, lc, tmp_path / "r.json")
    assert argv == ["py", "-m", "aorta_tui.hwqueue.child", str(tmp_path / "queue-config.json"),
                    str(tmp_path / "r.json")]  # the engine's entry point, never the CLI
    cfg = trial_queue_config(req, lc)
    assert (cfg.workload, cfg.streams, cfg.iterations, cfg.device, cfg.size) == (
        "tiny_kernel_stress", 16, 7, "cuda", "tiny")
    assert cfg.stream_priority == "lc"  # the policy's harness_args
    assert cfg.warmup == QueueRunConfig("w", 1).warmup  # the harness default when not given


