"""Plan ordering and environment layering."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.core.errors import UsageError
from aorta_tui.registry.registry import Registry
from aorta_tui.sweep.plan import build_plan


def fake_recipe(cells: list[tuple[str, list[str], int | None]], *, trials: int = 3, extra_env=None,
                cell_env=None) -> SimpleNamespace:
    specs = [
        SimpleNamespace(name=n, mitigations=tuple(m), environment="local",
                        extra_env=(cell_env or {}).get(n, {}), trials=t, steps=None, workload_config=None)
        for n, m, t in cells
    ]
    return SimpleNamespace(cells=specs, trials=trials, steps=5, extra_env=extra_env or {},
                           workload_config=None, confound=SimpleNamespace(baseline_cell=specs[0].name),
                           order=None, seed=None, stop_after=None,
                           where=lambda path: f"recipe.yaml: {path}")


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry()


def test_interleaved_never_runs_one_cell_back_to_back(registry):
    recipe = fake_recipe([("a", ["none"], None), ("b", ["xnack"], None), ("c", ["tf32_off"], None)], trials=5)
    plan = build_plan(recipe, registry, seed=7)
    cells = [t.cell for t in plan.trials]
    assert len(cells) == 15
    assert all(x != y for x, y in zip(cells, cells[1:], strict=False))
    # every round k holds trial k of each cell
    for k in range(5):
        assert sorted(t.cell for t in plan.trials[3 * k: 3 * k + 3]) == ["a", "b", "c"]
        assert {t.trial for t in plan.trials[3 * k: 3 * k + 3]} == {k}


def test_order_is_seeded_and_seed_matters(registry):
    recipe = fake_recipe([(f"c{i}", ["none"], None) for i in range(6)], trials=4)
    a = [t.trial_id for t in build_plan(recipe, registry, seed=1).trials]
    b = [t.trial_id for t in build_plan(recipe, registry, seed=1).trials]
    c = [t.trial_id for t in build_plan(recipe, registry, seed=2).trials]
    assert a == b
    assert a != c


def test_sequential_and_random(registry):
    recipe = fake_recipe([("a", ["none"], None), ("b", ["none"], 2)], trials=3)
    seq = build_plan(recipe, registry, order="sequential")
    assert [t.trial_id for t in seq.trials] == [
        "a/trial-000", "a/trial-001", "a/trial-002", "b/trial-000", "b/trial-001"]
    rnd = build_plan(recipe, registry, order="random", seed=3)
    assert sorted(t.trial_id for t in rnd.trials) == sorted(t.trial_id for t in seq.trials)
    with pytest.raises(UsageError, match="unknown order"):
        build_plan(recipe, registry, order="backwards")


def test_env_layers_later_wins(registry):
    recipe = fake_recipe([("a", ["gpu_max_hw_queues_2"], None)], extra_env={"GPU_MAX_HW_QUEUES": "4", "X": "1"},
                         cell_env={"a": {"X": "2"}})
    cell = build_plan(recipe, registry).cells[0]
    assert cell.env == {"GPU_MAX_HW_QUEUES": "4", "X": "2"}


def test_conflicting_mitigations_are_an_error(registry):
    recipe = fake_recipe([("a", ["cuda_device_max_connections_1", "cuda_device_max_connections_32"], None)])
    with pytest.raises(UsageError, match="CUDA_DEVICE_MAX_CONNECTIONS"):
        build_plan(recipe, registry)


def test_switches_follow_mitigations(registry):
    recipe = fake_recipe([("a", ["tf32_off", "deterministic"], None)])
    cell = build_plan(recipe, registry).cells[0]
    assert cell.switches == ("torch.tf32_off", "torch.deterministic")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@given(
    counts=st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=6),
    seed=st.integers(min_value=0, max_value=2**31),
    order=st.sampled_from(["interleaved", "sequential", "random"]),
)
def test_every_trial_planned_exactly_once(counts, seed, order):
    recipe = fake_recipe([(f"c{i}", ["none"], n) for i, n in enumerate(counts)])
    plan = build_plan(recipe, Registry(), order=order, seed=seed)
    got = Counter(t.cell for t in plan.trials)
    assert got == Counter({f"c{i}": n for i, n in enumerate(counts) if n})
    assert len({t.trial_id for t in plan.trials}) == sum(counts)
    assert [t.order for t in plan.trials] == list(range(sum(counts)))
