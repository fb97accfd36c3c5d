"""One large GEMM per stream per iteration: the compute-bound baseline."""

from __future__ import annotations

from functools import partial

from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, QueueWorkloadContext, gemm_flops
from aorta_tui.registry.workload import ConfigField


class LargeGemmOnly(QueueWorkload):
    name = "large_gemm_only"
    category = "latency_sensitive"
    description = "Large GEMMs only (compute-bound baseline)"
    min_streams, max_streams, recommended_streams = 1, 16, 4
    switch_latency_sensitivity = "low"
    independent_streams = True
    work_unit, throughput_unit, throughput_scale = "FLOP", "TFLOP/s", 1e12
    config_schema = (
        ConfigField("gemm_m", "int", 8192, min=0),
        ConfigField("gemm_n", "int", 8192, min=0),
        ConfigField("gemm_k", "int", 8192, min=0),
        ConfigField("gemms_per_stream", "int", 1, min=0),
    )
    tiny = {"gemm_m": 64, "gemm_n": 64, "gemm_k": 64}

    def setup(self, ctx: QueueWorkloadContext) -> None:
        self._torch = ctx.torch
        m, n, k = self.params["gemm_m"], self.params["gemm_n"], self.params["gemm_k"]
        self.mats = [(ctx.randn(m, k, stream=s), ctx.randn(k, n, stream=s), ctx.zeros(m, n, stream=s))
                     for s in range(ctx.streams)]

    def iteration(self, index: int) -> list[Launch]:
        mm = self._torch.mm
        return [
            Launch(s, "gemm", partial(mm, a, b, out=c), kernels=1)
            for _ in range(self.params["gemms_per_stream"])
            for s, (a, b, c) in enumerate(self.mats)
        ]

    def work_per_iteration(self) -> float:
        p = self.params
        return gemm_flops(p["gemm_m"], p["gemm_n"], p["gemm_k"]) * p["gemms_per_stream"] * len(self.mats)
