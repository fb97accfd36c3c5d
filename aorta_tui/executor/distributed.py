"""A distributed trial's shape (nodes x GPUs per node) and its torchrun launcher, for every
executor: the local one runs torchrun on this machine, the Slurm one on each node. A module of
its own so that the executors import it without importing the package's factory, which
imports them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aorta_tui.recipe.model import ExecutorSpec, Recipe


def distributed_shape(spec: ExecutorSpec) -> tuple[int, int] | None:
    """``(nodes, ranks per node)`` of a Slurm executor asked for a distributed trial, else None
    (``nodes`` alone: one rank per node; ``gpus_per_node`` alone: one node)."""
    if spec.kind != "slurm":
        return None
    nodes, per_node = spec.nodes, spec.gpus_per_node
    if nodes is None and per_node is None:
        return None
    return int(nodes or 1), int(per_node or 1)


def torchrun_argv(recipe: Recipe, world: int, worker: list[str]) -> list[str] | None:
    """The launcher of a torchrun workload's trial (``worker``: ``-m MODULE ARGS``), or None
    where one rank needs none (``workloads/_dist.py``).

    Locally (and on Slurm without ``nodes``/``gpus_per_node``): ``torchrun --standalone`` with
    ``world`` ranks in the trial's one process tree. With them: ``srun torchrun`` across the
    job's nodes (:mod:`.slurm_launch`, which finds the rendezvous host and port in the job).
    """
    import sys

    shape = distributed_shape(recipe.executor)
    if shape is not None:
        nodes, per_node = shape
        return [sys.executable, "-m", "aorta_tui.executor.slurm_launch", f"--nodes={nodes}",
                f"--nproc-per-node={per_node}", "--", *worker]
    if world <= 1:
        return None
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={world}", *worker]


def with_distributed(recipe: Recipe, nodes: int | None, gpus_per_node: int | None) -> Recipe:
    """``--nodes N --gpus-per-node K`` of ``sweep run``: the recipe's executor with them set
    (Slurm only; checked like the recipe's keys, exit 2)."""
    from aorta_tui.core.errors import UsageError

    if nodes is None and gpus_per_node is None:
        return recipe
    for flag, value in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} {value}: a trial needs at least 1",
                             hint=f"give {flag} a whole number of 1 or more")
    spec = recipe.executor
    if spec.kind != "slurm":
        raise UsageError("--nodes and --gpus-per-node spread a trial over Slurm nodes, and the "
                         "executor is local", hint="add --executor slurm (or executor: slurm in "
                         "the recipe), or drop them")
    if gpus_per_node is not None and spec.gres is not None:
        raise UsageError(f"--gpus-per-node and the recipe's executor.gres {spec.gres!r} both say "
                         "how many GPUs a node gives the trial",
                         hint="keep one: --gpus-per-node K asks for --gres=gpu:K on every node")
    from aorta_tui.recipe.keys import SLURM_DISTRIBUTED_OPTIONS

    clash = [o for o in spec.extra_sbatch if o.split("=", 1)[0] in SLURM_DISTRIBUTED_OPTIONS]
    if clash:
        raise UsageError(f"--nodes / --gpus-per-node and the recipe's executor.extra_sbatch "
                         f"{clash[0]!r} both shape the job", hint=f"remove {clash[0]} from extra_sbatch")
    spec = dataclasses.replace(spec, nodes=spec.nodes if nodes is None else nodes,
                               gpus_per_node=spec.gpus_per_node if gpus_per_node is None
                               else gpus_per_node)
    return dataclasses.replace(recipe, executor=spec)

