"""Continuous batching: prefill requests (compute-bound) and decode steps against a KV cache
(memory-bound) run on separate streams; KV-cache writes wait for both."""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import (
    Launch,
    QueueWorkload,
    QueueWorkloadContext,
    split_roles,
)
from aorta_tui.registry.workload import ConfigField


class ContinuousBatch(QueueWorkload):
    name = "continuous_batch"
    category = "inference"
    description = "Prefill/decode overlap in continuous batching"
    min_streams, max_streams, recommended_streams = 4, 16, 8
    switch_latency_sensitivity = "high"
    work_unit, throughput_unit = "token", "tokens/s"
    latency_critical_role = "the decode streams (per-token latency), not prefill or KV-cache writes"
    config_schema = (
        ConfigField("hidden", "int", 1024, min=0),
        ConfigField("layers", "int", 8, min=0),
        ConfigField("heads", "int", 8, min=0),
        ConfigField("prefill_batch", "int", 2, min=0),
        ConfigField("prefill_seq", "int", 512, min=0),
        ConfigField("decode_batch", "int", 16, min=0),
        ConfigField("context", "int", 1024, min=0),
    )
    tiny = {"hidden": 32, "layers": 2, "heads": 2, "prefill_batch": 2, "prefill_seq": 8,
            "decode_batch": 4, "context": 16}

    def latency_critical_streams(self, streams: int) -> tuple[int, ...]:
        return tuple(split_roles(streams, 3)[1])  # the decode role, as in setup

    def setup(self, ctx: QueueWorkloadContext) -> None:
        self._torch = ctx.torch
        p = self.params
        h, nh = p["hidden"], p["heads"]
        self.prefill, self.decode, self.cache = split_roles(ctx.streams, 3)
        self.wqkv = [ctx.randn(h, 3 * h, stream=0) * (h ** -0.5) for _ in range(p["layers"])]
        self.wo = [ctx.randn(h, h, stream=0) * (h ** -0.5) for _ in range(p["layers"])]
        self.requests = [(self.prefill[i % len(self.prefill)], ctx.randn(1, p["prefill_seq"], h, stream=0))
                         for i in range(p["prefill_batch"])]
        chunks = min(len(self.decode), p["decode_batch"])
        per = p["decode_batch"] // chunks
        self.decodes = []
        for c in range(chunks):
            n = per + (p["decode_batch"] - per * chunks if c == chunks - 1 else 0)
            self.decodes.append((self.decode[c], ctx.randn(n, 1, h, stream=0),
                                 ctx.randn(n, nh, p["context"], h // nh, stream=0),
                                 ctx.randn(n, nh, p["context"], h // nh, stream=0)))
        self.kv_slots = [ctx.zeros(p["decode_batch"] + p["prefill_batch"], h, stream=0) for _ in self.cache]

    def _block(self, x, layer: int, k_cache=None, v_cache=None):
        torch = self._torch
        F = torch.nn.functional
        b, s, h = x.shape
        nh = self.params["heads"]
        q, k, v = (x @ self.wqkv[layer]).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, nh, h // nh).transpose(1, 2) for t in (q, k, v))
        if k_cache is not None:
            k, v = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
            attn = F.scaled_dot_product_attention(q, k, v)
        else:
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + attn.transpose(1, 2).reshape(b, s, h) @ self.wo[layer]

    def _prefill(self, x) -> None:
        for layer in range(self.params["layers"]):
            x = self._block(x, layer)

    def _decode(self, x, kc, vc) -> None:
        for layer in range(self.params["layers"]):
            x = self._block(x, layer, kc, vc)

    def iteration(self, index: int) -> list[Launch]:
        out: list[Launch] = []
        for s, x in self.requests:
            out.append(Launch(s, "prefill", lambda x=x: self._prefill(x)))
        for s, x, kc, vc in self.decodes:
            out.append(Launch(s, "decode", lambda x=x, kc=kc, vc=vc: self._decode(x, kc, vc)))
        done = tuple(range(len(out)))
        for s, slot in zip(self.cache, self.kv_slots, strict=True):
            out.append(Launch(s, "kv_cache_write", lambda slot=slot: slot.mul_(0.99).add_(0.01),
                              waits=done))
        return out

    def work_per_iteration(self) -> float:
        p = self.params
        return float(p["prefill_batch"] * p["prefill_seq"] + p["decode_batch"])
