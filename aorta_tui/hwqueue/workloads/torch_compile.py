"""Compiled regions: the same torch.compile'd MLP block runs on every stream in parallel."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, QueueWorkloadContext
from aorta_tui.registry.workload import ConfigField

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch


class TorchCompileRegions(QueueWorkload):
    name = "torch_compile"
    category = "pipeline"
    description = "Multi-region torch.compile'd execution"
    min_streams, max_streams, recommended_streams = 4, 12, 8
    switch_latency_sensitivity = "medium"
    independent_streams = True
    work_unit, throughput_unit = "sample", "samples/s"
    graph_unsupported = (
        "torch.compile'd regions check guards on the host at every call and may recompile; "
        "compile with mode='reduce-overhead' to let inductor capture its own CUDA graphs")
    # backend: any torch.compile backend; 'inductor' generates fused kernels (needs a compiler
    # on CPU, Triton on GPU), 'eager' only traces with dynamo
    config_schema = (
        ConfigField("batch", "int", 64, min=0),
        ConfigField("hidden", "int", 1024, min=0),
        ConfigField("backend", "str", "inductor"),
    )
    tiny = {"batch": 4, "hidden": 32, "backend": "eager"}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        torch = self._torch = ctx.torch
        h, b = self.params["hidden"], self.params["batch"]
        self.fn = torch.compile(_block, backend=self.params["backend"], dynamic=False)
        self.regions = [(ctx.randn(b, h, stream=s), ctx.randn(h, 4 * h, stream=s) * (h ** -0.5),
                         ctx.randn(4 * h, h, stream=s) * ((4 * h) ** -0.5)) for s in range(ctx.streams)]
        for x, w1, w2 in self.regions:  # compile (and check guards) outside the timed loop
            self.fn(x, w1, w2)

    def iteration(self, index: int) -> list[Launch]:
        return [Launch(s, "compiled_region", lambda r=r: self.fn(*r)) for s, r in enumerate(self.regions)]

    def work_per_iteration(self) -> float:
        return float(self.params["batch"] * len(self.regions))


def _block(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    return x + F.gelu(x @ w1) @ w2
