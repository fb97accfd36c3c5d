"""``memory``: CUDA driver allocations/frees (uprobes), amdgpu BO create/move/map/unmap
(tracepoints), amdkfd eviction/restore workers (kprobes, where the kernel has them)."""

from __future__ import annotations

from pathlib import Path

from aorta_tui.trace.metrics import Metric
from aorta_tui.trace.probes.base import (
    Instance,
    ProbeContext,
    ProbeDetection,
    ProbeSet,
    uprobe_symbols,
)
from aorta_tui.trace.probes.kernel_common import fields_of, num

CUDA_PATTERNS = ["libcuda.so.1", "libcuda.so*"]
ALLOCS = {"cuMemAlloc_v2": "arg1", "cuMemAllocManaged": "arg1", "cuMemAllocAsync": "arg1",
          "cuMemAllocFromPoolAsync": "arg1", "cuMemAllocPitch_v2": "arg2 * arg3"}
FREES = ["cuMemFree_v2", "cuMemFreeAsync"]
# metric -> (event, key fields, bytes expression builder, aux fields)
BO_EVENTS = {
    "bo_create": ("amdgpu_bo_create", ("bo",), ("pages",), ("type", "prefer")),
    "bo_move": ("amdgpu_bo_move", ("bo",), ("bo_size",), ("new_placement",)),
    "vm_map": ("amdgpu_vm_bo_map", ("bo",), ("last",), ("flags",)),
    "vm_unmap": ("amdgpu_vm_bo_unmap", ("bo",), ("last",), ("flags",)),
}
# both generations of kfd worker names: newer kernels split evict/restore into *_worker_start
KFD = {
    "kfd_evict": ("evict_process_worker", "kfd_process_evict_queues", "kgd2kfd_quiesce_mm"),
    "kfd_restore": ("restore_process_worker", "kfd_process_restore_queues", "kgd2kfd_resume_mm"),
}


def _bytes(metric: str, f) -> str | None:
    if metric == "bo_create":
        p = num(f, "pages")
        return f"({p}) * 4096" if p else None
    if metric == "bo_move":
        return num(f, "bo_size")
    start, last = num(f, "start"), num(f, "last")
    return f"(({last}) - ({start}) + 1) * 4096" if start and last else None


class MemoryProbes(ProbeSet):
    name = "memory"
    description = "GPU memory events: CUDA allocations/frees, amdgpu BO create/move/map/unmap, amdkfd evict/restore"
    template = "memory.bt"
    calibration_function = "cuDriverGetVersion"
    metrics = (
        Metric("cuda_alloc", "size", "CUDA driver allocations (cuMemAlloc*/cuMemAllocAsync, entry+return): bytes requested; key = device pointer returned; aux = CUresult", key_name="pointer", probe_hits=2, aux_name="CUresult"),
        Metric("cuda_free", "point", "CUDA driver frees (cuMemFree_v2/cuMemFreeAsync entry); key = device pointer", key_name="pointer"),
        Metric("bo_create", "size", "amdgpu buffer object created (tracepoint amdgpu_bo_create): bytes", key_name="bo", probe_type="tracepoint", aux_name="type"),
        Metric("bo_move", "size", "amdgpu buffer object moved between placements (tracepoint amdgpu_bo_move, e.g. VRAM -> GTT eviction): bytes", key_name="bo", probe_type="tracepoint", aux_name="new placement"),
        Metric("vm_map", "size", "amdgpu GPU VM mapping added (tracepoint amdgpu_vm_bo_map): bytes", key_name="bo", probe_type="tracepoint", aux_name="flags"),
        Metric("vm_unmap", "size", "amdgpu GPU VM mapping removed (tracepoint amdgpu_vm_bo_unmap): bytes", key_name="bo", probe_type="tracepoint", aux_name="flags"),
        Metric("kfd_evict", "point", "amdkfd process queue eviction started (kprobe)", key_name="pid"),
        Metric("kfd_restore", "point", "amdkfd process queue restore started (kprobe)", key_name="pid"),
    )

    def detect(self, ctx: ProbeContext) -> ProbeDetection:
        det, syms = uprobe_symbols(self.name, "cuda", CUDA_PATTERNS, ctx, list(ALLOCS) + FREES)
        det.available = False
        reasons = []
        lib = det.library
        if lib is None:  # no library, no symbols
            reasons.append(f"CUDA: {det.reason}")
        else:
            for s in syms:
                if s.name in ALLOCS:
                    det.instances.append(Instance("cuda_alloc", {"lib": lib, "symbol": s.name,
                                                                 "bytes": ALLOCS[s.name]}))
                else:
                    det.instances.append(Instance("cuda_free", {"lib": lib, "symbol": s.name,
                                                                "kind": str(FREES.index(s.name))}))
        if ctx.tracefs is None:
            reasons.append("amdgpu: tracefs is not mounted")
        else:
            for metric, (event, keys, _b, auxs) in BO_EVENTS.items():
                f = fields_of(ctx.tracefs, "amdgpu", event)
                if f is None:
                    det.missing.append(f"amdgpu:{event}")
                    continue
                nbytes = _bytes(metric, f)
                if nbytes is None:
                    det.notes.append(f"amdgpu:{event}: no size fields in {sorted(f)}")
                    continue
                det.found.append(f"amdgpu:{event}")
                det.instances.append(Instance("bo", {"event": event, "metric": metric,
                                                     "key": num(f, *keys) or "0", "bytes": nbytes,
                                                     "aux": num(f, *auxs) or "0"}))
        kallsyms = _kallsyms()
        for metric, names in KFD.items():
            present = [n for n in names if n in kallsyms]
            if not present:
                det.missing.append(f"kprobe:{'|'.join(names)}")
                continue
            if not ctx.kprobes:
                det.missing.append(f"kprobe:{present[0]}")
                det.notes.append(f"{present[0]} exists but kprobes are unavailable: {ctx.kprobes_reason}")
                continue
            det.found.append(f"kprobe:{present[0]}")
            det.instances.append(Instance("kfd", {"symbol": present[0], "metric": metric}))
        det.available = bool(det.instances)
        if not det.available:
            det.reason = "; ".join(reasons + ["no amdgpu memory tracepoints or amdkfd kprobes here"])
            det.fix = "attach to a CUDA process (--pid) or use --lib cuda=/path/libcuda.so.1; amdgpu events need the amdgpu driver"
        return det


def _kallsyms() -> set[str]:
    try:
        text = Path("/proc/kallsyms").read_text()
    except OSError:
        return set()
    wanted = {n for names in KFD.values() for n in names}
    out = set()
    for ln in text.splitlines():
        parts = ln.split()
        if len(parts) >= 3 and parts[2] in wanted:
            out.add(parts[2])
    return out
