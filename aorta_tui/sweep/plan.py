"""Recipe -> ordered list of trials.

Trials of one cell are never run back to back by default: slow drift of a machine (thermal,
clocks, a neighbour's load) would otherwise masquerade as a mitigation effect. The default
``interleaved`` order runs trial k of every cell before trial k+1 of any, shuffling the cells
within each round with a seeded RNG so a fixed cell order cannot bias the result either.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import Json
from aorta_tui.core.secrets import mask_env, masked_names
from aorta_tui.recipe.checks import docker_image_problem, mitigation_env
from aorta_tui.registry.registry import Registry, merged_env
from aorta_tui.store.plan_doc import PlanDoc, PlannedCell, PlannedTrial

if TYPE_CHECKING:
    from aorta_tui.recipe import Recipe
    from aorta_tui.recipe.model import CellSpec

Order = Literal["interleaved", "sequential", "random"]
ORDERS: tuple[str, ...] = ("interleaved", "sequential", "random")


@dataclass(frozen=True)
class CellPlan:
    name: str
    mitigations: tuple[str, ...]
    environment: str
    docker: str | None
    env: dict[str, str]  # what the cell adds to the inherited environment
    switches: tuple[str, ...]
    trials: int
    steps: int | None
    workload_config: dict[str, Any] | None


@dataclass(frozen=True)
class TrialSpec:
    trial_id: str  # "<cell>/trial-<NNN>", also the trial's directory under trials/
    cell: str
    trial: int  # index within the cell, from 0
    order: int  # position in the run


@dataclass(frozen=True)
class Plan:
    cells: tuple[CellPlan, ...]
    trials: tuple[TrialSpec, ...]
    order: str
    seed: int
    baseline_cell: str | None = None
    environments: dict[str, dict[str, str]] = field(default_factory=dict)

    def cell(self, name: str) -> CellPlan:
        for c in self.cells:
            if c.name == name:
                return c
        raise KeyError(name)

    def document(self) -> PlanDoc:
        """What plan.json records of this plan: its cells' variables masked (never a token,
        core/secrets.py), without what only the run needs (each cell's workload config, the
        environments' own variables)."""
        return PlanDoc(
            order=self.order, seed=self.seed, baseline_cell=self.baseline_cell,
            cells=tuple(PlannedCell(name=c.name, mitigations=c.mitigations,
                                    environment=c.environment, docker=c.docker,
                                    env=mask_env(c.env), switches=c.switches, trials=c.trials,
                                    steps=c.steps) for c in self.cells),
            trials=tuple(PlannedTrial(t.trial_id, t.cell, t.trial, t.order) for t in self.trials))

    def to_dict(self) -> dict[str, Json]:
        """The object plan.json holds (its one serializer: ``store/plan_doc.py``)."""
        return self.document().to_dict()


def trial_id(cell: str, index: int) -> str:
    return f"{cell}/trial-{index:03d}"


def build_plan(
    recipe: Recipe,
    registry: Registry,
    *,
    order: str | None = None,
    seed: int | None = None,
) -> Plan:
    """Resolve every cell's environment variables and lay the trials out in run order."""
    order = order or recipe.order or "interleaved"
    if order not in ORDERS:
        raise UsageError(f"unknown order {order!r}", hint=f"use one of {', '.join(ORDERS)}")
    seed = int(seed if seed is not None else (recipe.seed or 0))

    cells: list[CellPlan] = []
    environments: dict[str, dict[str, str]] = {}
    for i, spec in enumerate(recipe.cells):
        where = recipe.where(f"cells[{i}]")
        mits = [registry.mitigation(name) for name in spec.mitigations]
        env_obj = registry.environment(spec.environment)
        if env_obj.docker is not None and (bad := docker_image_problem(env_obj.docker)):
            # a plugin's environment was not checked by the recipe validator
            raise UsageError(f"{where}: environment {env_obj.name!r}: {bad[0]}", hint=bad[1])
        environments[env_obj.name] = dict(env_obj.env)
        env = merged_env(
            env_obj.env,
            mitigation_env(mits, where=where),
            recipe.extra_env or {},
            spec.extra_env or {},
        )
        if missing := masked_names(env):
            # recipe.resolved.yaml holds secrets masked: the real values were never written
            raise UsageError(
                f"{where}: the value of {', '.join(missing)} is masked in this recipe (aorta-tui "
                "does not write secrets to a run directory), so it cannot be run from it",
                hint="pass the original recipe: `--resume RUN_DIR --recipe ORIGINAL.yaml`")
        switches = tuple(s for m in mits for s in m.switches)
        cells.append(
            CellPlan(
                name=spec.name,
                mitigations=tuple(spec.mitigations),
                environment=env_obj.name,
                docker=env_obj.docker,
                env=env,
                switches=switches,
                trials=_cell_trials(recipe, spec),
                steps=spec.steps if spec.steps is not None else recipe.steps,
                workload_config=_merged_config(recipe.workload_config, spec.workload_config),
            )
        )
    baseline = recipe.confound.baseline_cell if recipe.confound else None
    return Plan(
        cells=tuple(cells),
        trials=tuple(_ordered_trials(cells, order, seed)),
        order=order,
        seed=seed,
        baseline_cell=baseline,
        environments=environments,
    )


def _cell_trials(recipe: Recipe, spec: CellSpec) -> int:
    """Trials planned for a cell. With ``stop_after`` (upstream's meaning) every cell runs up
    to ``max_trials`` - more than ``trials`` when the events do not come - and stops early
    once ``events`` trials had the event verdict (the sweep loop skips the rest)."""
    stop = recipe.stop_after
    if stop is not None:
        return int(stop.max_trials)
    return spec.trials if spec.trials is not None else recipe.trials


def _merged_config(base: dict[str, Any] | None, cell: dict[str, Any] | None) -> dict[str, Any] | None:
    if base is None and cell is None:
        return None
    out = _deep_merge(dict(base or {}), cell or {})
    return out


def _deep_merge(into: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            into[key] = _deep_merge(dict(into[key]), value)
        else:
            into[key] = value
    return into


def _ordered_trials(cells: list[CellPlan], order: str, seed: int) -> list[TrialSpec]:
    rng = random.Random(seed)
    pairs: list[tuple[str, int]]
    if order == "sequential":
        pairs = [(c.name, k) for c in cells for k in range(c.trials)]
    elif order == "random":
        pairs = [(c.name, k) for c in cells for k in range(c.trials)]
        rng.shuffle(pairs)
    else:
        pairs = []
        rounds = max((c.trials for c in cells), default=0)
        for k in range(rounds):
            names = [c.name for c in cells if k < c.trials]
            rng.shuffle(names)
            # Never start a round with the cell that ended the previous one.
            if pairs and len(names) > 1 and names[0] == pairs[-1][0]:
                names[0], names[-1] = names[-1], names[0]
            pairs.extend((name, k) for name in names)
    return [TrialSpec(trial_id(c, k), c, k, i) for i, (c, k) in enumerate(pairs)]
