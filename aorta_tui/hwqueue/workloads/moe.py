"""Mixture of experts: a router on one stream, experts in parallel on the others, a combine
step that waits for all of them. Tokens are dispatched with a fixed capacity per expert."""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, QueueWorkloadContext
from aorta_tui.registry.workload import ConfigField


class MixtureOfExperts(QueueWorkload):
    name = "moe"
    category = "distributed"
    description = "Mixture of Experts with parallel expert execution"
    min_streams, max_streams, recommended_streams = 4, 32, 16
    switch_latency_sensitivity = "high"
    work_unit, throughput_unit = "token", "tokens/s"
    config_schema = (
        ConfigField("num_experts", "int", 8, min=0),
        ConfigField("hidden", "int", 1024, min=0),
        ConfigField("intermediate", "int", 4096, min=0),
        ConfigField("top_k", "int", 2, min=0),
        ConfigField("batch", "int", 4, min=0),
        ConfigField("seq", "int", 512, min=0),
    )
    tiny = {"num_experts": 4, "hidden": 32, "intermediate": 64, "batch": 2, "seq": 8}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        torch = self._torch = ctx.torch
        p = self.params
        tokens, h, e = p["batch"] * p["seq"], p["hidden"], p["num_experts"]
        self.tokens = tokens
        self.cap = max(1, tokens * p["top_k"] // e)
        self.x = ctx.randn(tokens, h, stream=0)
        self.gate = ctx.randn(h, e, stream=0) * (h ** -0.5)
        self.logits = ctx.zeros(tokens, e, stream=0)
        self.y = ctx.zeros(tokens, h, stream=0)
        expert_streams = list(range(1, ctx.streams))
        self.experts = []
        for i in range(e):
            s = expert_streams[i % len(expert_streams)]
            idx = torch.randint(0, tokens, (self.cap,), device=ctx.device(0))
            self.experts.append({
                "stream": s, "idx": idx,
                "xe": ctx.zeros(self.cap, h, stream=s), "he": ctx.zeros(self.cap, p["intermediate"], stream=s),
                "ye": ctx.zeros(self.cap, h, stream=s),
                "w1": ctx.randn(h, p["intermediate"], stream=s) * (h ** -0.5),
                "w2": ctx.randn(p["intermediate"], h, stream=s) * (p["intermediate"] ** -0.5),
            })

    def iteration(self, index: int) -> list[Launch]:
        out = [Launch(0, "router", self._route)]
        for ex in self.experts:
            out.append(Launch(ex["stream"], "expert", lambda ex=ex: self._expert(ex), waits=(0,)))
        out.append(Launch(0, "combine", self._combine, waits=tuple(range(1, len(out)))))
        return out

    def _route(self) -> None:
        torch = self._torch
        torch.mm(self.x, self.gate, out=self.logits)
        self.logits.softmax(dim=-1).topk(self.params["top_k"], dim=-1)

    def _expert(self, ex: dict) -> None:
        torch = self._torch
        torch.index_select(self.x, 0, ex["idx"], out=ex["xe"])
        torch.mm(ex["xe"], ex["w1"], out=ex["he"])
        torch.mm(torch.nn.functional.gelu(ex["he"]), ex["w2"], out=ex["ye"])

    def _combine(self) -> None:
        self.y.zero_()
        for ex in self.experts:
            self.y.index_add_(0, ex["idx"], ex["ye"])

    def work_per_iteration(self) -> float:
        return float(self.tokens)
