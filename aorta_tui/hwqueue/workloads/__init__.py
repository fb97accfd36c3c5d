"""The fifteen queue workloads, found by name (each in its own module, imported on demand)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from aorta_tui.core.errors import UsageError
from aorta_tui.core.suggest import did_you_mean
from aorta_tui.hwqueue.workloads.base import QueueWorkload, WorkloadInfo

# name -> (module, class); the module is imported only when the workload is used or listed
WORKLOADS: dict[str, tuple[str, str]] = {
    "hetero_kernels": ("hetero_kernels", "HeteroKernels"),
    "tiny_kernel_stress": ("tiny_kernel_stress", "TinyKernelStress"),
    "large_gemm_only": ("large_gemm_only", "LargeGemmOnly"),
    "graph_subgraphs": ("graph_subgraphs", "GraphSubgraphs"),
    "fsdp_tp": ("fsdp_tp", "FsdpTp"),
    "moe": ("moe", "MixtureOfExperts"),
    "activation_ckpt": ("activation_ckpt", "ActivationCheckpointing"),
    "grad_accum": ("grad_accum", "GradAccumulation"),
    "comms_compute_overlap": ("comms_compute_overlap", "CommsComputeOverlap"),
    "continuous_batch": ("continuous_batch", "ContinuousBatch"),
    "speculative_decode": ("speculative_decode", "SpeculativeDecode"),
    "rag_pipeline": ("rag_pipeline", "RagPipeline"),
    "async_dataload": ("async_dataload", "AsyncDataload"),
    "zero_offload": ("zero_offload", "ZeroOffload"),
    "torch_compile": ("torch_compile", "TorchCompileRegions"),
}


def workload_class(name: str) -> type[QueueWorkload]:
    if name not in WORKLOADS:
        raise UsageError(
            f"unknown workload {name!r}",
            hint=did_you_mean(name, WORKLOADS) + "`aorta-tui queue list` shows them all",
        )
    module, cls = WORKLOADS[name]
    mod = importlib.import_module(f"{__name__}.{module}")
    return getattr(mod, cls)


def all_infos() -> list[WorkloadInfo]:
    return [workload_class(n).info() for n in WORKLOADS]


def streams_out_of_range(name: str, counts: Sequence[int]) -> tuple[WorkloadInfo, list[int]]:
    """The one stream-count rule of a queue run and a queue sweep: each count within the
    workload's ``min_streams..max_streams``. Returns the workload's info and the counts outside."""
    info = workload_class(name).info()
    return info, [c for c in counts if not info.min_streams <= c <= info.max_streams]


def check_streams(name: str, streams: int) -> None:
    info, bad = streams_out_of_range(name, [streams])
    if bad:
        raise UsageError(
            f"workload {name!r} runs with {info.min_streams}..{info.max_streams} streams, "
            f"not {streams}",
            hint=f"use --streams between {info.min_streams} and {info.max_streams} "
            f"(recommended {info.recommended_streams})",
        )
