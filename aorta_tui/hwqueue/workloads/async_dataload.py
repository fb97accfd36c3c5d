"""Asynchronous data loading: host-to-device copies on copy streams, on-device preprocessing
on preprocessing streams and the model step on the compute stream, overlapped per batch."""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import (
    Launch,
    QueueWorkload,
    QueueWorkloadContext,
    split_roles,
)
from aorta_tui.registry.workload import ConfigField


class AsyncDataload(QueueWorkload):
    name = "async_dataload"
    category = "pipeline"
    description = "Async data loading with GPU preprocessing overlap"
    min_streams, max_streams, recommended_streams = 4, 12, 6
    switch_latency_sensitivity = "medium"
    work_unit, throughput_unit = "image", "images/s"
    graph_unsupported = (
        'copies between host and device memory each iteration (a pageable host buffer '
        'synchronises the host, which stream capture forbids, and a replay would reuse the '
        'captured host buffers)')
    config_schema = (
        ConfigField("batches", "int", 4, min=0),
        ConfigField("batch", "int", 32, min=0),
        ConfigField("image", "int", 224, min=0),
        ConfigField("channels", "int", 3, min=0),
        ConfigField("hidden", "int", 1024, min=0),
    )
    tiny = {"batches": 2, "batch": 2, "image": 8, "hidden": 16}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        torch = self._torch = ctx.torch
        p = self.params
        self.copy, self.prep, self.compute = split_roles(ctx.streams, 3)
        pin = ctx.backend != "cpu"
        shape = (p["batch"], p["channels"], p["image"], p["image"])
        feat = p["channels"] * p["image"] * p["image"]
        self.host = [torch.randn(*shape, dtype=ctx.dtype).pin_memory() if pin else
                     torch.randn(*shape, dtype=ctx.dtype) for _ in range(p["batches"])]
        self.dev = [ctx.zeros(*shape, stream=0) for _ in range(p["batches"])]
        self.mean = ctx.randn(1, p["channels"], 1, 1, stream=0)
        self.w = ctx.randn(feat, p["hidden"], stream=0) * (feat ** -0.5)
        self.out = [ctx.zeros(p["batch"], p["hidden"], stream=0) for _ in range(p["batches"])]

    def iteration(self, index: int) -> list[Launch]:
        torch = self._torch
        out: list[Launch] = []
        for b in range(self.params["batches"]):
            c = len(out)
            out.append(Launch(self.copy[b % len(self.copy)], "h2d_copy",
                              lambda b=b: self.dev[b].copy_(self.host[b], non_blocking=True)))
            pidx = len(out)
            out.append(Launch(self.prep[b % len(self.prep)], "preprocess",
                              lambda b=b: self.dev[b].sub_(self.mean).mul_(0.5), waits=(c,)))
            out.append(Launch(self.compute[b % len(self.compute)], "model",
                              lambda b=b: torch.mm(self.dev[b].flatten(1), self.w, out=self.out[b]),
                              waits=(pidx,)))
        return out

    def work_per_iteration(self) -> float:
        return float(self.params["batches"] * self.params["batch"])
