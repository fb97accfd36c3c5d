"""The probe catalogue: every probe set by name."""

from __future__ import annotations

from aorta_tui.trace.probes.amdgpu import AmdgpuProbes
from aorta_tui.trace.probes.base import ProbeContext, ProbeDetection, ProbeSet
from aorta_tui.trace.probes.cuda import CudaCallProbes, CudaProbes
from aorta_tui.trace.probes.drm_sched import DrmSchedProbes
from aorta_tui.trace.probes.errors import ErrorProbes
from aorta_tui.trace.probes.hip import HipCallProbes, HipProbes, HsaProbes
from aorta_tui.trace.probes.ioctl import IoctlProbes
from aorta_tui.trace.probes.memory import MemoryProbes

CATALOGUE: dict[str, type[ProbeSet]] = {
    cls.name: cls
    for cls in (
        CudaProbes, CudaCallProbes, HipProbes, HipCallProbes, HsaProbes,
        AmdgpuProbes, DrmSchedProbes, MemoryProbes, ErrorProbes, IoctlProbes,
    )
}


def get(name: str) -> ProbeSet:
    from aorta_tui.core.errors import UsageError

    cls = CATALOGUE.get(name)
    if cls is None:
        raise UsageError(
            f"unknown probe set {name!r}",
            hint=f"choose from {', '.join(CATALOGUE)}",
        )
    return cls()


__all__ = ["CATALOGUE", "get", "ProbeDetection", "ProbeContext", "ProbeSet"]
