"""Only tiny elementwise kernels on every stream.

Each op is a chain of four elementwise kernels (mul, add, abs, clamp) on a small tensor, so
kernel time is negligible and what is measured is launch and queue-switch cost. ``order``
issues the ops ``round_robin`` over the streams (stresses switching) or ``per_stream``
(all ops of stream 0, then stream 1, ...).
"""

from __future__ import annotations

from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.hwqueue.workloads.base import Launch, QueueWorkload, WorkloadContext

FLOP_PER_ELEMENT = 5  # mul, add, abs, clamp (min and max)


class TinyKernelStress(QueueWorkload):
    name = "tiny_kernel_stress"
    category = "latency_sensitive"
    description = "Tiny kernels only (isolates queue switch overhead)"
    min_streams, max_streams, recommended_streams = 1, 64, 16
    switch_latency_sensitivity = "critical"
    independent_streams = True
    work_unit, throughput_unit, throughput_scale = "FLOP", "GFLOP/s", 1e9
    defaults = {"tensor_size": 256, "ops_per_stream": 100, "order": "round_robin"}
    tiny = {"tensor_size": 64, "ops_per_stream": 4}

    def setup(self, ctx: WorkloadContext) -> None:
        if self.params["order"] not in ("round_robin", "per_stream"):
            raise UsageError(f"order={self.params['order']!r}", hint="use round_robin or per_stream")
        self._torch = ctx.torch
        size = self.params["tensor_size"]
        self.bufs = [(ctx.randn(size, stream=s), ctx.zeros(size, stream=s)) for s in range(ctx.streams)]

    def iteration(self, index: int) -> list[Launch]:
        torch = self._torch
        ops = range(self.params["ops_per_stream"])
        streams = list(enumerate(self.bufs))
        if self.params["order"] == "per_stream":
            pairs = [(s, b) for s, b in streams for _ in ops]
        else:
            pairs = [(s, b) for _ in ops for s, b in streams]
        return [Launch(s, "tiny_chain", lambda t=t, o=o: _chain(torch, t, o)) for s, (t, o) in pairs]

    def work_per_iteration(self) -> float:
        p = self.params
        return float(FLOP_PER_ELEMENT * p["tensor_size"] * p["ops_per_stream"] * len(self.bufs))


def _chain(torch: Any, t: Any, o: Any) -> Any:
    torch.mul(t, 1.5, out=o)
    return o.add_(0.5).abs_().clamp_(0.0, 10.0)
