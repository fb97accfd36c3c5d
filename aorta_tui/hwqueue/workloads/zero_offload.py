"""ZeRO-offload traffic: parameter shards are uploaded from pinned host memory, used by the
compute streams, and their gradients are offloaded back to the host on a separate stream."""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import (
    Launch,
    QueueWorkload,
    QueueWorkloadContext,
    split_roles,
)
from aorta_tui.registry.workload import ConfigField


class ZeroOffload(QueueWorkload):
    name = "zero_offload"
    category = "pipeline"
    description = "ZeRO-offload memory management patterns (upload, compute, offload)"
    min_streams, max_streams, recommended_streams = 4, 12, 6
    switch_latency_sensitivity = "low"
    work_unit, throughput_unit = "sample", "samples/s"
    graph_unsupported = (
        'uploads and offloads between host and device memory (a pageable host buffer '
        'synchronises the host, which stream capture forbids, and a replay would reuse the '
        'captured host buffers)')
    config_schema = (
        ConfigField("shards", "int", 4, min=0),
        ConfigField("batch", "int", 32, min=0),
        ConfigField("hidden", "int", 2048, min=0),
    )
    tiny = {"shards": 2, "batch": 2, "hidden": 32}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        torch = self._torch = ctx.torch
        p = self.params
        h = p["hidden"]
        self.upload, self.compute, self.offload = split_roles(ctx.streams, 3)
        pin = ctx.backend != "cpu"

        def host(*shape: int):
            t = torch.randn(*shape, dtype=ctx.dtype) * (h ** -0.5)
            return t.pin_memory() if pin else t

        self.host_params = [host(h, h) for _ in range(p["shards"])]
        self.host_grads = [host(h, h) for _ in range(p["shards"])]
        self.dev_params = [ctx.zeros(h, h, stream=0) for _ in range(p["shards"])]
        self.dev_grads = [ctx.zeros(h, h, stream=0) for _ in range(p["shards"])]
        self.x = ctx.randn(p["batch"], h, stream=0)
        self.y = [ctx.zeros(p["batch"], h, stream=0) for _ in range(p["shards"])]

    def iteration(self, index: int) -> list[Launch]:
        out: list[Launch] = []
        for i in range(self.params["shards"]):
            u = len(out)
            out.append(Launch(self.upload[i % len(self.upload)], "h2d_params",
                              lambda i=i: self.dev_params[i].copy_(self.host_params[i], non_blocking=True)))
            c = len(out)
            out.append(Launch(self.compute[i % len(self.compute)], "fwd_bwd",
                              lambda i=i: self._fwd_bwd(i), waits=(u,)))
            out.append(Launch(self.offload[i % len(self.offload)], "d2h_grads",
                              lambda i=i: self.host_grads[i].copy_(self.dev_grads[i], non_blocking=True),
                              waits=(c,)))
        return out

    def _fwd_bwd(self, i: int) -> None:
        torch = self._torch
        torch.mm(self.x, self.dev_params[i], out=self.y[i])
        torch.mm(self.x.t(), self.y[i], out=self.dev_grads[i])

    def work_per_iteration(self) -> float:
        return float(self.params["batch"])
