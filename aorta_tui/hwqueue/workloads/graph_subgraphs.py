"""Independent subgraphs (small MLP chains), one per stream, run in parallel."""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, QueueWorkloadContext
from aorta_tui.registry.workload import ConfigField


class GraphSubgraphs(QueueWorkload):
    name = "graph_subgraphs"
    category = "latency_sensitive"
    description = "Independent subgraph parallel execution"
    min_streams, max_streams, recommended_streams = 4, 32, 8
    switch_latency_sensitivity = "high"
    independent_streams = True
    work_unit, throughput_unit = "sample", "samples/s"
    config_schema = (
        ConfigField("batch", "int", 64, min=0),
        ConfigField("hidden", "int", 1024, min=0),
        ConfigField("layers", "int", 4, min=0),
    )
    tiny = {"batch": 4, "hidden": 32, "layers": 2}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        self._torch = ctx.torch
        b, h = self.params["batch"], self.params["hidden"]
        self.graphs = []
        for s in range(ctx.streams):
            ws = [ctx.randn(h, h, stream=s) * (h ** -0.5) for _ in range(self.params["layers"])]
            acts = [ctx.randn(b, h, stream=s)] + [ctx.zeros(b, h, stream=s) for _ in ws]
            self.graphs.append((ws, acts))

    def iteration(self, index: int) -> list[Launch]:
        torch = self._torch
        out = []
        for layer in range(self.params["layers"]):
            for s, (ws, acts) in enumerate(self.graphs):
                x, w, y = acts[layer], ws[layer], acts[layer + 1]
                out.append(Launch(s, f"layer{layer}",
                                  lambda x=x, w=w, y=y: torch.mm(x, w, out=y).relu_()))
        return out

    def work_per_iteration(self) -> float:
        return float(self.params["batch"] * len(self.graphs))
