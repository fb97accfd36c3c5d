"""FSDP + tensor parallelism on one device: parameter all-gathers, column-parallel GEMMs and
gradient reduce-scatters overlap on separate streams (collectives simulated as copies)."""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import (
    Launch,
    QueueWorkload,
    QueueWorkloadContext,
    split_roles,
)
from aorta_tui.registry.workload import ConfigField


class FsdpTp(QueueWorkload):
    name = "fsdp_tp"
    category = "distributed"
    description = "FSDP + tensor parallelism with overlapped comm/compute"
    min_streams, max_streams, recommended_streams = 4, 16, 10
    switch_latency_sensitivity = "high"
    work_unit, throughput_unit = "sample", "samples/s"
    config_schema = (
        ConfigField("batch", "int", 32, min=0),
        ConfigField("hidden", "int", 2048, min=0),
        ConfigField("layers", "int", 4, min=0),
        ConfigField("shards", "int", 4, min=0),
    )
    tiny = {"batch": 4, "hidden": 32, "layers": 2, "shards": 2}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        self._torch = ctx.torch
        p = self.params
        h, b, shards = p["hidden"], p["batch"], p["shards"]
        self.gather, self.tp, self.reduce = split_roles(ctx.streams, 3)
        rows = h // shards
        self.layers = []
        for layer in range(p["layers"]):
            gs = self.gather[layer % len(self.gather)]
            shard_list = [ctx.randn(rows, h, stream=gs) * (h ** -0.5) for _ in range(shards)]
            full = ctx.zeros(rows * shards, h, stream=gs)
            self.layers.append((shard_list, full))
        cols = h // len(self.tp)
        self.x = ctx.randn(b, h, stream=self.tp[0])
        self.parts = [ctx.zeros(b, cols, stream=s) for s in self.tp]
        self.grads = [ctx.zeros(rows * shards, h, stream=s) for s in self.reduce]
        self.cols = cols

    def iteration(self, index: int) -> list[Launch]:
        torch = self._torch
        out: list[Launch] = []
        for layer, (shard_list, full) in enumerate(self.layers):
            gs = self.gather[layer % len(self.gather)]
            gi = len(out)
            out.append(Launch(gs, "all_gather",
                              lambda sl=shard_list, f=full: torch.cat(sl, out=f)))
            tp_ids = []
            for t, s in enumerate(self.tp):
                w = full[:, t * self.cols:(t + 1) * self.cols]
                tp_ids.append(len(out))
                out.append(Launch(s, "tp_gemm",
                                  lambda w=w, o=self.parts[t]: torch.mm(self.x, w, out=o),
                                  waits=(gi,)))
            rs = self.reduce[layer % len(self.reduce)]
            g = self.grads[layer % len(self.grads)]
            out.append(Launch(rs, "reduce_scatter",
                              lambda g=g, f=full: g.copy_(f).mul_(1.0 / len(self.tp)),
                              waits=tuple(tp_ids)))
        return out

    def work_per_iteration(self) -> float:
        return float(self.params["batch"])
