"""Which probe sets can *see anything* on this machine, not only attach.

A probe set attaches when its events or its library's symbols exist. That is not the same as
seeing something: Debian installs the real ``libamdhip64.so.5`` on a box with no AMD GPU, and
the ``hip`` uprobes attach to it and count calls that launch nothing (every ``hipLaunchKernel``
fails: no device). What a set can see is decided by the GPU devices the kernel exposes:

* NVIDIA: ``/dev/nvidiactl`` or a GPU under ``/proc/driver/nvidia/gpus`` (the driver's nodes);
* AMD compute (HIP, HSA): ``/dev/kfd``, the amdkfd node every ROCm program opens;
* a DRM card bound to ``amdgpu`` (the ``amdgpu`` tracepoints), or to any driver that schedules
  through the DRM GPU scheduler (the ``drm_sched`` tracepoints);
* ``ioctl`` sees every process's ioctls, with or without a GPU.

Read from files only (``root`` for tests), never by opening a device.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# DRM drivers that submit through the DRM GPU scheduler (drivers/gpu/drm/scheduler users)
DRM_SCHED_DRIVERS = ("amdgpu", "etnaviv", "lima", "panfrost", "panthor", "v3d", "msm", "nouveau",
                     "xe", "imagination", "asahi")


@dataclass
class Devices:
    nvidia: str | None = None  # evidence, e.g. "/dev/nvidiactl"
    amd_kfd: str | None = None
    drm_drivers: dict[str, str] = field(default_factory=dict)  # card -> driver


def find_devices(root: Path = Path("/")) -> Devices:
    d = Devices()
    if (root / "dev" / "nvidiactl").exists():
        d.nvidia = "/dev/nvidiactl"
    else:
        gpus = root / "proc" / "driver" / "nvidia" / "gpus"
        if gpus.is_dir() and any(gpus.iterdir()):
            d.nvidia = "/proc/driver/nvidia/gpus"
    if (root / "dev" / "kfd").exists():
        d.amd_kfd = "/dev/kfd"
    drm = root / "sys" / "class" / "drm"
    if drm.is_dir():
        for card in sorted(drm.glob("card[0-9]*")):
            if "-" in card.name:  # connectors (card0-DP-1), not devices
                continue
            link = card / "device" / "driver"
            try:
                d.drm_drivers[card.name] = os.path.basename(os.readlink(link))
            except OSError:
                continue
    return d


def _drivers(d: Devices, wanted: tuple[str, ...]) -> list[str]:
    return [f"{card} ({drv})" for card, drv in d.drm_drivers.items() if drv in wanted]


NO_NVIDIA = "no NVIDIA GPU here (neither /dev/nvidiactl nor /proc/driver/nvidia/gpus)"
NO_KFD = ("no AMD GPU for compute here (/dev/kfd does not exist): a HIP/HSA runtime may be installed, "
          "but every launch fails before reaching a GPU")


def sees(name: str, available: bool, reason: str, d: Devices) -> tuple[bool, str]:
    """(whether probe set ``name`` can see anything here, why or why not)."""
    if not available:
        return False, f"cannot attach: {reason}" if reason else "cannot attach"
    amdgpu = _drivers(d, ("amdgpu",))
    if name in ("cuda", "cuda_calls"):
        return (True, f"NVIDIA GPU: {d.nvidia}") if d.nvidia else (False, NO_NVIDIA)
    if name in ("hip", "hip_calls", "hsa"):
        return (True, f"AMD GPU: {d.amd_kfd}") if d.amd_kfd else (False, NO_KFD)
    if name == "amdgpu":
        return (True, f"amdgpu: {', '.join(amdgpu)}") if amdgpu else (
            False, "no DRM card is driven by amdgpu here (/sys/class/drm)")
    if name == "drm_sched":
        cards = _drivers(d, DRM_SCHED_DRIVERS)
        return (True, f"GPU scheduler drivers: {', '.join(cards)}") if cards else (
            False, "no DRM card here is driven by a driver that uses the DRM GPU scheduler "
                   f"({', '.join(DRM_SCHED_DRIVERS[:4])}, ...)")
    if name in ("memory", "errors"):
        parts = ([f"NVIDIA ({d.nvidia})"] if d.nvidia else []) + ([f"amdgpu ({', '.join(amdgpu)})"] if amdgpu else [])
        return (True, ", ".join(parts)) if parts else (False, "no NVIDIA or amdgpu GPU here")
    if name == "ioctl":
        return True, "every process's ioctls, GPU or not"
    return True, "no device rule for this set: assumed to see what it attaches to"
