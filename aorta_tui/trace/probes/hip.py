"""``hip``/``hip_calls``: uprobes on libamdhip64 launch entry points; ``hsa``: HSA doorbell stores.

ROCm compute never passes through the amdgpu CS ioctl: HIP writes AQL packets into user-mode
queues and rings the doorbell with ``hsa_signal_store_*``. The ``hsa`` set counts those stores
(one per submitted packet batch) per signal.
"""

from __future__ import annotations

from aorta_tui.trace.metrics import Metric
from aorta_tui.trace.probes.base import (
    Instance,
    ProbeContext,
    ProbeDetection,
    ProbeSet,
    add_symbol_instances,
    uprobe_symbols,
)

LIB_PATTERNS = ["libamdhip64.so*"]
HSA_PATTERNS = ["libhsa-runtime64.so*"]

# x86-64: dim3 (12 bytes) travels in two registers, so hipLaunchKernel's 6th parameter (the
# stream) is the second stack slot; hipModuleLaunchKernel's is the 9th argument like CUDA's.
LAUNCHES: dict[str, str] = {
    "hipLaunchKernel": '*(uint64*)(reg("sp") + 16)',
    "hipLaunchKernel_spt": '*(uint64*)(reg("sp") + 16)',
    "hipExtLaunchKernel": '*(uint64*)(reg("sp") + 16)',
    "hipLaunchCooperativeKernel": '*(uint64*)(reg("sp") + 16)',
    "hipModuleLaunchKernel": '*(uint64*)(reg("sp") + 24)',
    "hipExtModuleLaunchKernel": '*(uint64*)(reg("sp") + 24)',
    "hipGraphLaunch": "arg1",
}
DOORBELLS = ["hsa_signal_store_screlease", "hsa_signal_store_relaxed"]


# Joined from the rocprofiler-sdk collector's records (trace/device/rocprof_collector.c), loaded
# only with --device-timestamps on: it has never run on AMD hardware (docs/tracing.md).
HIP_DEVICE_METRICS = (
    Metric("launch_to_start", "duration",
           "submit->dispatch: HIP launch call entry (eBPF uprobe, CLOCK_MONOTONIC) -> kernel start "
           "on the GPU (rocprofiler-sdk kernel-dispatch record, mapped onto CLOCK_MONOTONIC)",
           key_name="stream", probe_type="rocprofiler", probe_hits=0),
    Metric("kernel_duration", "duration",
           "kernel execution on the GPU: start -> end of each dispatch (rocprofiler-sdk "
           "kernel-dispatch record)", key_name="stream", probe_type="rocprofiler", probe_hits=0),
    Metric("queued", "count",
           "kernels launched earlier on the same stream and not yet started when each launch call "
           "entered (eBPF launch time against rocprofiler-sdk start times)",
           key_name="stream", probe_type="rocprofiler", probe_hits=0),
    Metric("gpu_idle", "duration",
           "GPU idle gap: end of every earlier kernel on the device -> start of the next kernel "
           "(rocprofiler-sdk records; traced processes only)",
           key_name="device", probe_type="rocprofiler", probe_hits=0),
)


class HipProbes(ProbeSet):
    name = "hip"
    description = "HIP kernel launches per stream (libamdhip64 entry, one uprobe per launch)"
    template = "hip.bt"
    launch_block = "launch"  # the template block each launch entry point renders
    device_metrics = HIP_DEVICE_METRICS
    metrics = (
        Metric(
            "launch",
            "point",
            "HIP launch calls (libamdhip64 hipLaunchKernel/hipModuleLaunchKernel/hipGraphLaunch entry, one uprobe per launch)",
            key_name="stream",
            aux_name="entry point",
        ),
    )


    def detect(self, ctx: ProbeContext) -> ProbeDetection:
        det, syms = uprobe_symbols(self.name, "hip", LIB_PATTERNS, ctx, list(LAUNCHES))
        if det.library is None or det.reason:  # no library, or an unreadable one (not ELF, ...)
            return det
        if not syms:
            det.reason = f"{det.library} exports none of {', '.join(LAUNCHES)}"
            det.fix = "point --lib hip= at ROCm's libamdhip64.so"
            return det
        det.available = True
        add_symbol_instances(det, self.launch_block, LAUNCHES, [s.name for s in syms],
                             lambda s: {"stream": s})
        det.notes.append("aux of launch records: index into " + ", ".join(LAUNCHES))
        return det


class HipCallProbes(HipProbes):
    name = "hip_calls"
    description = "HIP launch call duration (uprobe + uretprobe per launch: two probe hits)"
    launch_block = "launch_call"
    metrics = (
        Metric(
            "launch_call",
            "duration",
            "HIP launch call duration on the host: hipLaunchKernel/hipModuleLaunchKernel entry to return (uprobe+uretprobe)",
            key_name="stream",
            probe_hits=2,
            aux_name="entry point",
        ),
    )


class HsaProbes(ProbeSet):
    name = "hsa"
    description = "HSA doorbell stores (libhsa-runtime64 hsa_signal_store_*): user-mode queue submissions"
    template = "hip.bt"
    metrics = (
        Metric(
            "doorbell",
            "point",
            "HSA signal stores that ring a user-mode queue doorbell (hsa_signal_store_screlease/relaxed entry); aux = value written (write index)",
            key_name="signal",
            aux_name="value stored",
        ),
    )

    def detect(self, ctx: ProbeContext) -> ProbeDetection:
        det, syms = uprobe_symbols(self.name, "hsa", HSA_PATTERNS, ctx, DOORBELLS)
        if det.library is None or det.reason:
            return det
        if not syms:
            det.reason = f"{det.library} exports none of {', '.join(DOORBELLS)}"
            return det
        det.available = True
        for s in syms:
            det.instances.append(Instance("doorbell", {"lib": det.library, "symbol": s.name}))
        det.notes.append("every signal store is counted, not only doorbells: the key (signal handle) tells queues apart")
        return det
