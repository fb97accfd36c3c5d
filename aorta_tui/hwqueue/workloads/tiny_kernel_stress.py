"""Only tiny elementwise kernels on every stream.

Each op is a chain of four elementwise kernels (mul, add, abs, clamp) on a small tensor, so
kernel time is negligible and what is measured is launch and queue-switch cost. ``order``
issues the ops ``round_robin`` over the streams (stresses switching) or ``per_stream``
(all ops of stream 0, then stream 1, ...: upstream amd-aorta's order).

Kernel by kernel, one op is ``mul(t, 1.5, out=o)``, ``o.add_(0.5)``, ``o.abs_()``,
``o.clamp_(0, 10)``: the same four kernels upstream issues, written into one buffer per stream
instead of four fresh tensors (no allocator call per kernel). The op is bound once in
``setup`` (``functools.partial`` of a module-level function with the torch functions resolved),
and the iteration's launch list is built once and returned every time, so a launch costs the
host one call and the four torch calls, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, QueueWorkloadContext
from aorta_tui.registry.workload import ConfigField

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch

FLOP_PER_ELEMENT = 5  # mul, add, abs, clamp (min and max)
KERNELS_PER_OP = 4  # mul, add_, abs_, clamp_


class TinyKernelStress(QueueWorkload):
    name = "tiny_kernel_stress"
    category = "latency_sensitive"
    description = "Tiny kernels only (isolates queue switch overhead)"
    min_streams, max_streams, recommended_streams = 1, 64, 16
    switch_latency_sensitivity = "critical"
    independent_streams = True
    work_unit, throughput_unit, throughput_scale = "FLOP", "GFLOP/s", 1e9
    config_schema = (
        ConfigField("tensor_size", "int", 256, min=0),
        ConfigField("ops_per_stream", "int", 100, min=0),
        ConfigField("order", "str", "round_robin", choices=("round_robin", "per_stream")),
    )
    tiny = {"tensor_size": 64, "ops_per_stream": 4}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        size = self.params["tensor_size"]
        self.bufs = [(ctx.randn(size, stream=s), ctx.zeros(size, stream=s)) for s in range(ctx.streams)]
        mul = ctx.torch.mul
        ops = [Launch(s, "tiny_chain", partial(_chain, mul, t, o), kernels=KERNELS_PER_OP)
               for s, (t, o) in enumerate(self.bufs)]
        n = range(self.params["ops_per_stream"])
        if self.params["order"] == "per_stream":
            self.plan = [op for op in ops for _ in n]
        else:
            self.plan = [op for _ in n for op in ops]

    def iteration(self, index: int) -> list[Launch]:
        return self.plan  # the same launches every iteration; the harness never mutates it

    def work_per_iteration(self) -> float:
        p = self.params
        return float(FLOP_PER_ELEMENT * p["tensor_size"] * p["ops_per_stream"] * len(self.bufs))


def _chain(mul: Callable[..., torch.Tensor], t: torch.Tensor, o: torch.Tensor) -> None:
    # ``mul`` is torch.mul, resolved once in setup
    mul(t, 1.5, out=o)
    o.add_(0.5).abs_().clamp_(0.0, 10.0)
