"""``cuda`` and ``cuda_calls``: uprobes on the CUDA driver API (libcuda) entry points.

The stream handle is read where the x86-64 calling convention puts it: ``cuLaunchKernel``'s
``hStream`` is its 9th argument, on the user stack at entry (``sp + 24``: return address, then
the 7th and 8th arguments), because bpftrace 0.17 refuses ``arg8``.
"""

from __future__ import annotations

from aorta_tui.trace.metrics import Metric
from aorta_tui.trace.probes.base import (
    ProbeContext,
    ProbeDetection,
    ProbeSet,
    add_symbol_instances,
    uprobe_symbols,
)

LIB_PATTERNS = ["libcuda.so.1", "libcuda.so*"]

# entry point -> expression of its stream handle at function entry (x86-64 SysV)
LAUNCHES: dict[str, str] = {
    "cuLaunchKernel": '*(uint64*)(reg("sp") + 24)',
    "cuLaunchKernel_ptsz": '*(uint64*)(reg("sp") + 24)',
    "cuLaunchKernelEx": "*(uint64*)(arg0 + 32)",  # CUlaunchConfig.hStream
    "cuLaunchKernelEx_ptsz": "*(uint64*)(arg0 + 32)",
    "cuLaunchCooperativeKernel": '*(uint64*)(reg("sp") + 24)',
    "cuGraphLaunch": "arg1",
    "cuGraphLaunch_ptsz": "arg1",
}
COPIES: dict[str, tuple[str, str]] = {  # name -> (stream, bytes)
    "cuMemcpyAsync": ("arg3", "arg2"),
    "cuMemcpyHtoDAsync_v2": ("arg3", "arg2"),
    "cuMemcpyDtoHAsync_v2": ("arg3", "arg2"),
    "cuMemcpyDtoDAsync_v2": ("arg3", "arg2"),
    "cuMemsetD8Async": ("arg3", "arg2"),
    "cuMemsetD32Async": ("arg3", "arg2 * 4"),
}
SYNCS: dict[str, str] = {
    "cuStreamSynchronize": "arg0",
    "cuEventSynchronize": "arg0",
    "cuCtxSynchronize": "0",
}


# Joined from the CUPTI collector's device records (aorta_tui/trace/device/), when it can be
# loaded into the traced program: the GPU side of every launch the uprobes above see.
DEVICE_METRICS = (
    Metric(
        "launch_to_start",
        "duration",
        "submit->dispatch: CUDA launch call entry (eBPF uprobe, CLOCK_MONOTONIC) -> kernel start on "
        "the GPU (CUPTI activity record, mapped onto CLOCK_MONOTONIC); a graph launch counts to its "
        "first kernel",
        key_name="stream",
        probe_type="cupti",
        probe_hits=0,
    ),
    Metric(
        "kernel_duration",
        "duration",
        "kernel execution on the GPU: start -> end of each kernel (CUPTI activity record, device clock)",
        key_name="stream",
        probe_type="cupti",
        probe_hits=0,
    ),
    Metric(
        "queued",
        "count",
        "kernels launched earlier on the same stream and not yet started when each launch call "
        "entered (eBPF launch time against CUPTI start times)",
        key_name="stream",
        probe_type="cupti",
        probe_hits=0,
    ),
    # launch -> start in three parts that add up (issue 34; device/latency.py): CUPTI's latency
    # timestamps `queued` and `submitted` of every kernel record
    Metric(
        "launch_host",
        "duration",
        "host part: launch call entry -> queued (the launch written into the command buffer, CUPTI "
        "latency timestamp); only where an entry time is known (eBPF uprobe or launch callback)",
        key_name="stream",
        probe_type="cupti",
        probe_hits=0,
    ),
    Metric(
        "launch_push",
        "duration",
        "push part: queued -> submitted (the command buffer handed to the GPU; CUPTI latency timestamps)",
        key_name="stream",
        probe_type="cupti",
        probe_hits=0,
    ),
    Metric(
        "launch_gpu_queue",
        "duration",
        "GPU queue part: submitted -> kernel start (the hardware's queue; a long kernel ahead on the "
        "stream waits here)",
        key_name="stream",
        probe_type="cupti",
        probe_hits=0,
    ),
    Metric(
        "gpu_idle",
        "duration",
        "GPU idle gap: end of every earlier kernel on the device -> start of the next kernel "
        "(CUPTI activity records; traced processes only)",
        key_name="device",
        probe_type="cupti",
        probe_hits=0,
    ),
)


class CudaProbes(ProbeSet):
    name = "cuda"
    description = "CUDA driver API launches per stream (one uprobe per launch), async copies, synchronisation"
    template = "cuda.bt"
    launch_block = "launch"  # the template block each launch entry point renders
    device_metrics = DEVICE_METRICS
    calibration_function = "cuDriverGetVersion"
    metrics = (
        Metric(
            "launch",
            "point",
            "CUDA kernel/graph launch calls (libcuda cuLaunchKernel/cuLaunchKernelEx/cuGraphLaunch entry, one uprobe per launch)",
            key_name="stream",
            aux_name="entry point",
        ),
        Metric(
            "copy",
            "size",
            "bytes per async copy/memset call (libcuda cuMemcpy*Async/cuMemset*Async entry; memset D32 counts 4 bytes per element)",
            key_name="stream",
            aux_name="entry point",
        ),
        Metric(
            "sync",
            "duration",
            "host time blocked in cuStreamSynchronize/cuEventSynchronize/cuCtxSynchronize (entry to return)",
            key_name="stream",
            probe_hits=2,
            aux_name="entry point",
        ),
    )


    def detect(self, ctx: ProbeContext) -> ProbeDetection:
        wanted = list(LAUNCHES) + list(COPIES) + list(SYNCS)
        det, syms = uprobe_symbols(self.name, "cuda", LIB_PATTERNS, ctx, wanted)
        if det.library is None or det.reason:  # no library, or an unreadable one (not ELF, ...)
            return det
        names = [s.name for s in syms]
        if not any(n in LAUNCHES for n in names):
            det.reason = f"{det.library} exports none of {', '.join(LAUNCHES)}"
            det.fix = "point --lib cuda= at the NVIDIA driver's libcuda.so.1"
            return det
        det.available = True
        add_symbol_instances(det, self.launch_block, LAUNCHES, names, lambda s: {"stream": s})
        add_symbol_instances(det, "copy", COPIES, names, lambda sb: {"stream": sb[0], "bytes": sb[1]})
        add_symbol_instances(det, "sync", SYNCS, names, lambda h: {"handle": h})
        det.notes.append("aux of launch records: index into " + ", ".join(LAUNCHES))
        return det


class CudaCallProbes(CudaProbes):
    """Same entry points, plus a return probe on launches: measures the launch call itself."""

    name = "cuda_calls"
    description = "CUDA launch call duration (uprobe + uretprobe per launch: two probe hits)"
    launch_block = "launch_call"
    metrics = (
        Metric(
            "launch_call",
            "duration",
            "CUDA launch call duration on the host: cuLaunchKernel/Ex/cuGraphLaunch entry to return (uprobe+uretprobe)",
            key_name="stream",
            probe_hits=2,
            aux_name="entry point",
        ),
        *CudaProbes.metrics[1:],
    )

