"""Activation checkpointing: forward keeps every k-th activation, backward recomputes the
segments on side streams while the main stream runs the gradient GEMMs."""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, QueueWorkloadContext
from aorta_tui.registry.workload import ConfigField


class ActivationCheckpointing(QueueWorkload):
    name = "activation_ckpt"
    category = "distributed"
    description = "Activation checkpointing with recomputation overlap"
    min_streams, max_streams, recommended_streams = 4, 12, 6
    switch_latency_sensitivity = "medium"
    work_unit, throughput_unit = "sample", "samples/s"
    config_schema = (
        ConfigField("batch", "int", 32, min=0),
        ConfigField("hidden", "int", 2048, min=0),
        ConfigField("layers", "int", 8, min=0),
        ConfigField("ckpt_every", "int", 2, min=0),
    )
    tiny = {"batch": 4, "hidden": 32, "layers": 4}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        self._torch = ctx.torch
        p = self.params
        b, h, n = p["batch"], p["hidden"], p["layers"]
        self.ws = [ctx.randn(h, h, stream=0) * (h ** -0.5) for _ in range(n)]
        self.acts = [ctx.randn(b, h, stream=0)] + [ctx.zeros(b, h, stream=0) for _ in range(n)]
        self.recompute_streams = list(range(1, ctx.streams))
        # each recompute stream has its own scratch activations, so segments can overlap
        self.scratch = {s: [ctx.zeros(b, h, stream=s) for _ in range(p["ckpt_every"])]
                        for s in self.recompute_streams}
        self.grad = ctx.randn(b, h, stream=0)
        self.wgrads = [ctx.zeros(h, h, stream=0) for _ in range(n)]

    def iteration(self, index: int) -> list[Launch]:
        torch = self._torch
        k, n = self.params["ckpt_every"], self.params["layers"]
        out: list[Launch] = []
        for i in range(n):  # forward on the main stream
            out.append(Launch(0, "forward", lambda i=i: torch.mm(self.acts[i], self.ws[i],
                                                                 out=self.acts[i + 1]).relu_()))
        fwd_done = len(out) - 1
        segments = list(range(0, n, k))[::-1]
        for j, start in enumerate(segments):  # backward, last segment first
            s = self.recompute_streams[j % len(self.recompute_streams)]
            rid = len(out)
            out.append(Launch(s, "recompute", lambda s=s, start=start: self._recompute(s, start),
                              waits=(fwd_done,)))
            for i in reversed(range(start, min(start + k, n))):
                out.append(Launch(0, "backward",
                                  lambda i=i: torch.mm(self.acts[i].t(), self.grad, out=self.wgrads[i]),
                                  waits=(rid,)))
        return out

    def _recompute(self, s: int, start: int) -> None:
        torch = self._torch
        x = self.acts[start]
        for j, i in enumerate(range(start, min(start + self.params["ckpt_every"], len(self.ws)))):
            x = torch.mm(x, self.ws[i], out=self.scratch[s][j]).relu_()

    def work_per_iteration(self) -> float:
        return float(self.params["batch"])
