"""Gradient accumulation: micro-batches run forward/backward on compute streams while their
gradients are accumulated early on reduction streams; a final reduce joins the partials."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from aorta_tui.hwqueue.workloads.base import (
    Launch,
    QueueWorkload,
    QueueWorkloadContext,
    split_roles,
)
from aorta_tui.registry.workload import ConfigField

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    from torch import Tensor


class _MicroBatch(TypedDict):
    """One micro-batch: the compute stream it runs on, its input, activations and gradient."""

    stream: int
    x: Tensor
    y: Tensor
    g: Tensor


class GradAccumulation(QueueWorkload):
    name = "grad_accum"
    category = "distributed"
    description = "Gradient accumulation with early reduction"
    min_streams, max_streams, recommended_streams = 2, 16, 6
    switch_latency_sensitivity = "medium"
    work_unit, throughput_unit = "sample", "samples/s"
    config_schema = (
        ConfigField("micro_batches", "int", 8, min=0),
        ConfigField("micro_batch", "int", 16, min=0),
        ConfigField("hidden", "int", 2048, min=0),
    )
    tiny = {"micro_batches": 4, "micro_batch": 2, "hidden": 32}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        self._torch = ctx.torch
        p = self.params
        mb, h = p["micro_batch"], p["hidden"]
        self.compute, self.reduce = split_roles(ctx.streams, 2)
        self.w = ctx.randn(h, h, stream=0) * (h ** -0.5)
        self.mbs: list[_MicroBatch] = []
        for m in range(p["micro_batches"]):
            s = self.compute[m % len(self.compute)]
            self.mbs.append({"stream": s, "x": ctx.randn(mb, h, stream=s), "y": ctx.zeros(mb, h, stream=s),
                             "g": ctx.zeros(h, h, stream=s)})
        self.partials = {s: ctx.zeros(h, h, stream=s) for s in self.reduce}
        self.total = ctx.zeros(h, h, stream=0)

    def iteration(self, index: int) -> list[Launch]:
        torch = self._torch
        out: list[Launch] = []
        acc_ids = []
        for m, mbd in enumerate(self.mbs):
            fid = len(out)
            out.append(Launch(mbd["stream"], "fwd_bwd", lambda d=mbd: self._fwd_bwd(d)))
            rs = self.reduce[m % len(self.reduce)]
            acc_ids.append(len(out))
            out.append(Launch(rs, "accumulate",
                              lambda rs=rs, d=mbd: self.partials[rs].add_(d["g"]), waits=(fid,)))
        out.append(Launch(0, "final_reduce", lambda: torch.sum(torch.stack(list(self.partials.values())), 0, out=self.total),
                          waits=tuple(acc_ids)))
        return out

    def _fwd_bwd(self, d: _MicroBatch) -> None:
        torch = self._torch
        torch.mm(d["x"], self.w, out=d["y"]).relu_()
        torch.mm(d["x"].t(), d["y"], out=d["g"])

    def work_per_iteration(self) -> float:
        return float(self.params["micro_batches"] * self.params["micro_batch"])
