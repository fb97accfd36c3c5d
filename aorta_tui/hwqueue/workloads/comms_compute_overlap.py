"""GEMMs on compute streams overlapping collectives on communication streams.

By default the collective is simulated on the device (a reduction-shaped read-read-write of
the message buffer). With ``collectives=real`` under torchrun it is a real
``torch.distributed.all_reduce`` (gloo on CPU, NCCL/RCCL on GPUs) issued on the comm stream.
"""

from __future__ import annotations

import os

from aorta_tui.core.errors import EnvironmentProblem
from aorta_tui.hwqueue.workloads.base import (
    Launch,
    QueueWorkload,
    QueueWorkloadContext,
    gemm_flops,
    split_roles,
)
from aorta_tui.registry.workload import ConfigField


class CommsComputeOverlap(QueueWorkload):
    name = "comms_compute_overlap"
    category = "distributed"
    description = "Comm-compute overlap with GEMMs and (simulated or real) all-reduce"
    min_streams, max_streams, recommended_streams = 1, 32, 4
    switch_latency_sensitivity = "high"
    work_unit, throughput_unit, throughput_scale = "FLOP", "TFLOP/s", 1e12
    config_schema = (
        ConfigField("gemm_m", "int", 4096, min=0),
        ConfigField("gemm_n", "int", 4096, min=0),
        ConfigField("gemm_k", "int", 4096, min=0),
        ConfigField("gemms_per_stream", "int", 2, min=0),
        ConfigField("collectives_per_iteration", "int", 2, min=0),
        ConfigField("comm_elements", "int", 16 * 1024 * 1024, min=0),
        ConfigField("collectives", "str", "simulated", choices=("simulated", "real")),
    )
    tiny = {"gemm_m": 64, "gemm_n": 64, "gemm_k": 64, "gemms_per_stream": 1,
            "collectives_per_iteration": 1, "comm_elements": 4096}

    def graph_unsupported_reason(self) -> str | None:
        if self.params["collectives"] == "real":
            return ("collectives=real issues torch.distributed all-reduces, which a graph can "
                    "hold only when captured on the communicator's own stream (NCCL graph "
                    "support); use collectives=simulated with --graph")
        return None

    def setup(self, ctx: QueueWorkloadContext) -> None:
        torch = self._torch = ctx.torch
        p = self.params
        self.compute, self.comm = split_roles(ctx.streams, 2) if ctx.streams > 1 else ([0], [0])
        m, n, k = p["gemm_m"], p["gemm_n"], p["gemm_k"]
        self.mats = {s: (ctx.randn(m, k, stream=s), ctx.randn(k, n, stream=s), ctx.zeros(m, n, stream=s))
                     for s in self.compute}
        self.bufs = {s: (ctx.randn(p["comm_elements"], stream=s), ctx.randn(p["comm_elements"], stream=s))
                     for s in self.comm}
        self.dist = None
        if p["collectives"] == "real":
            self.dist = _init_distributed(torch, ctx)

    def iteration(self, index: int) -> list[Launch]:
        torch = self._torch
        out: list[Launch] = []
        ncoll = self.params["collectives_per_iteration"]
        for g in range(max(self.params["gemms_per_stream"], ncoll)):
            if g < self.params["gemms_per_stream"]:
                for s, (a, b, c) in self.mats.items():
                    out.append(Launch(s, "gemm", lambda a=a, b=b, c=c: torch.mm(a, b, out=c)))
            if g < ncoll:
                for s, (send, recv) in self.bufs.items():
                    out.append(Launch(s, "all_reduce", lambda send=send, recv=recv: self._collective(send, recv)))
        return out

    def _collective(self, send, recv) -> None:
        if self.dist is not None:
            self.dist.all_reduce(send)
        else:
            self._torch.add(send, recv, out=recv)

    def work_per_iteration(self) -> float:
        p = self.params
        return gemm_flops(p["gemm_m"], p["gemm_n"], p["gemm_k"]) * p["gemms_per_stream"] * len(self.mats)

    def throughput_unavailable(self) -> str | None:
        if self.params["gemms_per_stream"] == 0:
            return ("no GEMMs (gemms_per_stream=0): TFLOP/s counts GEMM FLOPs only; a comms-only "
                    "run is measured by its iteration latency (all-reduce bytes / latency)")
        return super().throughput_unavailable()


def _init_distributed(torch, ctx: QueueWorkloadContext):
    import torch.distributed as dist

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise EnvironmentProblem(
            "collectives=real needs a torch.distributed launch (RANK/WORLD_SIZE are not set)",
            hint="start it with `torchrun --nproc_per_node=N -m aorta_tui queue run "
                 "comms_compute_overlap --param collectives=real ...`, or use the default "
                 "collectives=simulated")
    if not dist.is_initialized():
        backend = "gloo" if ctx.backend == "cpu" else "nccl"
        if backend == "nccl":
            torch.cuda.set_device(ctx.device(0))
        dist.init_process_group(backend=backend)
    return dist
