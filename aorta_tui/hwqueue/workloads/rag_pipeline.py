"""Retrieval-augmented generation as a four-stage pipeline: embed -> retrieve (similarity +
top-k) -> rerank -> generate; each stage on its own stream group, queries in flight at once."""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import (
    Launch,
    QueueWorkload,
    QueueWorkloadContext,
    split_roles,
)
from aorta_tui.registry.workload import ConfigField


class RagPipeline(QueueWorkload):
    name = "rag_pipeline"
    category = "inference"
    description = "Multi-model RAG pipeline (embed, retrieve, rerank, generate)"
    min_streams, max_streams, recommended_streams = 4, 12, 8
    switch_latency_sensitivity = "medium"
    work_unit, throughput_unit = "query", "queries/s"
    config_schema = (
        ConfigField("queries", "int", 8, min=0),
        ConfigField("query_len", "int", 64, min=0),
        ConfigField("hidden", "int", 1024, min=0),
        ConfigField("documents", "int", 65536, min=0),
        ConfigField("top_k", "int", 16, min=0),
        ConfigField("gen_layers", "int", 4, min=0),
        ConfigField("gen_tokens", "int", 32, min=0),
    )
    tiny = {"queries": 4, "query_len": 4, "hidden": 32, "documents": 256, "top_k": 4,
            "gen_layers": 2, "gen_tokens": 2}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        self._torch = ctx.torch
        p = self.params
        h = p["hidden"]
        self.stages = split_roles(ctx.streams, 4)
        self.w_embed = ctx.randn(h, h, stream=0) * (h ** -0.5)
        self.docs = ctx.randn(p["documents"], h, stream=0)
        self.w_rerank = ctx.randn(h, h, stream=0) * (h ** -0.5)
        self.w_gen = [ctx.randn(h, h, stream=0) * (h ** -0.5) for _ in range(p["gen_layers"])]
        self.inputs = [ctx.randn(p["query_len"], h, stream=0) for _ in range(p["queries"])]

    def iteration(self, index: int) -> list[Launch]:
        torch = self._torch
        out: list[Launch] = []
        for q, x in enumerate(self.inputs):
            st = [group[q % len(group)] for group in self.stages]
            state: dict = {}
            e = len(out)
            out.append(Launch(st[0], "embed", lambda x=x, st_=state: st_.update(
                e=torch.nn.functional.normalize((x @ self.w_embed).mean(0, keepdim=True), dim=-1))))
            r = len(out)
            out.append(Launch(st[1], "retrieve", lambda st_=state: st_.update(
                idx=(st_["e"] @ self.docs.t()).topk(self.params["top_k"], dim=-1).indices[0]),
                waits=(e,)))
            k = len(out)
            out.append(Launch(st[2], "rerank", lambda st_=state: st_.update(
                ctx=self.docs.index_select(0, st_["idx"]) @ self.w_rerank), waits=(r,)))
            out.append(Launch(st[3], "generate", lambda st_=state: self._generate(st_["ctx"]),
                              waits=(k,)))
        return out

    def _generate(self, h) -> None:
        torch = self._torch
        for _ in range(self.params["gen_tokens"]):
            for w in self.w_gen:
                h = torch.relu(h @ w)

    def work_per_iteration(self) -> float:
        return float(self.params["queries"])
