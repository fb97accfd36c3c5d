"""Only tiny elementwise kernels, issued round-robin over all streams.

Kernel time is negligible, so what is measured is launch and queue-switch cost.
"""

from __future__ import annotations

from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, WorkloadContext


class TinyKernelStress(QueueWorkload):
    name = "tiny_kernel_stress"
    category = "latency_sensitive"
    description = "Tiny kernels only (isolates queue switch overhead)"
    min_streams, max_streams, recommended_streams = 1, 64, 16
    switch_latency_sensitivity = "critical"
    independent_streams = True
    work_unit, throughput_unit, throughput_scale = "FLOP", "GFLOP/s", 1e9
    defaults = {"tensor_size": 256, "ops_per_stream": 100}
    tiny = {"tensor_size": 64, "ops_per_stream": 4}

    def setup(self, ctx: WorkloadContext) -> None:
        self._torch = ctx.torch
        size = self.params["tensor_size"]
        self.bufs = [(ctx.randn(size, stream=s), ctx.zeros(size, stream=s)) for s in range(ctx.streams)]

    def iteration(self, index: int) -> list[Launch]:
        torch = self._torch
        out = []
        for _ in range(self.params["ops_per_stream"]):
            for s, (t, o) in enumerate(self.bufs):
                out.append(Launch(s, "add", lambda t=t, o=o: torch.add(t, 1.0, out=o)))
        return out

    def work_per_iteration(self) -> float:
        return float(self.params["tensor_size"] * self.params["ops_per_stream"] * len(self.bufs))
