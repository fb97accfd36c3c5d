"""torch.distributed set-up for the reproducers: gloo on CPU, NCCL/RCCL on GPUs.

Under torchrun the process group comes from the environment (``env://``). A one-rank trial
runs without a launcher (the engine starts torchrun only for ``world_size > 1``); there a
workload that calls collectives or shards (``need_group=True``: race, llm_determinism, FSDP)
gets a real one-rank group over an in-memory store, so its collectives run the same code
path, and one that does not (``need_group=False``: DDP training over one rank, which is the
identity) gets no group at all: no NCCL/RCCL communicator to build (a second or more per GPU
trial), nothing to tear down.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import EnvironmentProblem

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch


@dataclass
class DistHandle:
    rank: int
    world_size: int
    backend: str
    owned: bool  # we created the group, so we destroy it
    grouped: bool = True  # a process group exists (False: one rank that needs none)

    def close(self) -> None:
        import torch.distributed as dist

        if self.owned and dist.is_initialized():
            dist.destroy_process_group()


NO_GROUP = "none (one rank, no process group)"


def init_distributed(rank: int, world_size: int, device: torch.device, trial_dir: Path, *,
                     need_group: bool = True) -> DistHandle:
    launched = "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ
    if world_size == 1 and not need_group and not launched:
        return DistHandle(0, 1, NO_GROUP, False, grouped=False)
    import torch.distributed as dist

    if not dist.is_available():
        raise EnvironmentProblem(
            "this torch build has no torch.distributed support",
            hint="install a torch build with distributed support (the default PyPI wheels have it)",
        )
    backend = "nccl" if device.type == "cuda" else "gloo"
    if dist.is_initialized():
        return DistHandle(dist.get_rank(), dist.get_world_size(), dist.get_backend(), False)
    kwargs: dict[str, Any] = {}
    if device.type == "cuda":
        kwargs["device_id"] = device
    if launched:
        dist.init_process_group(backend, rank=rank, world_size=world_size, **kwargs)
    elif world_size == 1:
        # one rank has nobody to meet: an in-memory store, no file, no port
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, **kwargs)
    else:
        raise EnvironmentProblem(
            f"world_size {world_size} needs a launcher: MASTER_ADDR/MASTER_PORT are not set",
            hint="run it through the engine (it starts torchrun) or under "
            "`torchrun --standalone --nproc_per_node=N`",
        )
    return DistHandle(dist.get_rank(), dist.get_world_size(), backend, True)


def all_true(flag: bool, device: torch.device) -> bool:
    """True when ``flag`` holds on every rank (one tiny all-reduce; none without a group)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return flag

    t = torch.tensor([0 if flag else 1], dtype=torch.int32, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item()) == 0
