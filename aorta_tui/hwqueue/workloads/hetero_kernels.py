"""Large GEMMs on half the streams, bursts of tiny elementwise kernels on the other half.

Probes the convoy effect: do tiny kernels wait behind big GEMMs when queues are shared?
Kernel by kernel: one ``mm(a, b, out=c)`` per GEMM stream, then ``small_per_large`` tiny ops
(``mul(t, 2, out=o)``, ``o.add_(1)``: two kernels) spread over the tiny-kernel streams, as
upstream issues them (upstream allocates each tiny op's two results; here they are written in
place). Launches are bound once in ``setup``; the plan is the same every iteration.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING

from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, QueueWorkloadContext, gemm_flops
from aorta_tui.registry.workload import ConfigField

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch


class HeteroKernels(QueueWorkload):
    name = "hetero_kernels"
    category = "latency_sensitive"
    description = "Mixed tiny and large kernels (convoy effect)"
    min_streams, max_streams, recommended_streams = 2, 64, 8
    switch_latency_sensitivity = "critical"
    independent_streams = True
    latency_critical_role = "the tiny-kernel streams (the convoy's victims), not the GEMM streams"
    work_unit, throughput_unit, throughput_scale = "FLOP", "TFLOP/s", 1e12
    config_schema = (
        ConfigField("gemm_m", "int", 4096, min=0),
        ConfigField("gemm_n", "int", 4096, min=0),
        ConfigField("gemm_k", "int", 4096, min=0),
        ConfigField("small_size", "int", 1024, min=0),
        ConfigField("small_per_large", "int", 10, min=0),
    )
    tiny = {"gemm_m": 64, "gemm_n": 64, "gemm_k": 64, "small_size": 256, "small_per_large": 2}

    def latency_critical_streams(self, streams: int) -> tuple[int, ...]:
        return tuple(_small_streams(streams))

    def setup(self, ctx: QueueWorkloadContext) -> None:
        torch, p = ctx.torch, self.params
        self.n_large = _large_count(ctx.streams)
        small_streams = _small_streams(ctx.streams)
        self.small_streams = small_streams
        m, n, k = p["gemm_m"], p["gemm_n"], p["gemm_k"]
        self.large = [
            (ctx.randn(m, k, stream=s), ctx.randn(k, n, stream=s), ctx.zeros(m, n, stream=s))
            for s in range(self.n_large)
        ]
        self.small = {s: (ctx.randn(p["small_size"], stream=s), ctx.zeros(p["small_size"], stream=s))
                      for s in small_streams}
        self.plan = self._plan(torch)

    def _plan(self, torch: ModuleType) -> list[Launch]:
        out: list[Launch] = []
        for i, (a, b, c) in enumerate(self.large):
            out.append(Launch(i, "gemm", partial(torch.mm, a, b, out=c), kernels=1))
            for j in range(self.params["small_per_large"]):
                s = self.small_streams[j % len(self.small_streams)]
                t, o = self.small[s]
                out.append(Launch(s, "tiny", partial(_scale_shift, torch.mul, t, o), kernels=2))
        return out

    def iteration(self, index: int) -> list[Launch]:
        return self.plan  # the same launches every iteration; the harness never mutates it

    def work_per_iteration(self) -> float:
        p = self.params
        large = gemm_flops(p["gemm_m"], p["gemm_n"], p["gemm_k"]) * self.n_large
        small = 2.0 * p["small_size"] * p["small_per_large"] * self.n_large
        return large + small


def _large_count(streams: int) -> int:
    return max(1, streams // 2)


def _small_streams(streams: int) -> list[int]:
    """The tiny-kernel streams: the upper half (all of them when there is only one stream)."""
    n_large = _large_count(streams)
    return list(range(n_large, streams)) or list(range(n_large))


def _scale_shift(mul: Callable[..., torch.Tensor], t: torch.Tensor, o: torch.Tensor) -> None:
    # ``mul`` is torch.mul, resolved once in setup
    mul(t, 2.0, out=o)
    o.add_(1.0)
