"""Speculative decoding: small draft models propose k tokens per sequence on draft streams;
the large target model verifies all proposals at once on the verify stream."""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, QueueWorkloadContext
from aorta_tui.registry.workload import ConfigField


class SpeculativeDecode(QueueWorkload):
    name = "speculative_decode"
    category = "inference"
    description = "Draft + verify speculative decoding (throughput counts verified tokens)"
    min_streams, max_streams, recommended_streams = 4, 12, 6
    switch_latency_sensitivity = "high"
    work_unit, throughput_unit = "verified token", "tokens/s"
    latency_critical_role = "the draft streams (verify waits for every draft), not the verify stream"
    config_schema = (
        ConfigField("sequences", "int", 8, min=0),
        ConfigField("draft_tokens", "int", 4, min=0),
        ConfigField("draft_hidden", "int", 512, min=0),
        ConfigField("target_hidden", "int", 2048, min=0),
        ConfigField("target_layers", "int", 4, min=0),
    )
    tiny = {"sequences": 4, "draft_tokens": 2, "draft_hidden": 16, "target_hidden": 32,
            "target_layers": 2}

    def latency_critical_streams(self, streams: int) -> tuple[int, ...]:
        return tuple(_draft_streams(streams))

    def setup(self, ctx: QueueWorkloadContext) -> None:
        self._torch = ctx.torch
        p = self.params
        dh, th = p["draft_hidden"], p["target_hidden"]
        self.draft_streams = _draft_streams(ctx.streams)
        self.wd = ctx.randn(dh, dh, stream=0) * (dh ** -0.5)
        self.seqs = [(self.draft_streams[i % len(self.draft_streams)], ctx.randn(1, dh, stream=0))
                     for i in range(p["sequences"])]
        self.proj = ctx.randn(dh, th, stream=0) * (dh ** -0.5)
        self.wt = [ctx.randn(th, th, stream=0) * (th ** -0.5) for _ in range(p["target_layers"])]

    def _draft(self, x):
        torch = self._torch
        toks = []
        for _ in range(self.params["draft_tokens"]):
            x = torch.tanh(x @ self.wd)
            toks.append(x)
        return torch.cat(toks)

    def iteration(self, index: int) -> list[Launch]:
        proposals: list = []
        out: list[Launch] = []
        for s, x in self.seqs:
            out.append(Launch(s, "draft", lambda x=x: proposals.append(self._draft(x))))
        out.append(Launch(0, "verify", lambda: self._verify(proposals), waits=tuple(range(len(out)))))
        return out

    def _verify(self, proposals: list) -> None:
        torch = self._torch
        h = torch.cat(proposals) @ self.proj
        for w in self.wt:
            h = torch.relu(h @ w)
        h.argmax(dim=-1)

    def work_per_iteration(self) -> float:
        return float(self.params["sequences"] * self.params["draft_tokens"])


def _draft_streams(streams: int) -> list[int]:
    """Stream 0 verifies; every other stream drafts."""
    return list(range(1, streams))
