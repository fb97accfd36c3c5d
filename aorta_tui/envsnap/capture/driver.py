"""Driver section: kernel-driver versions, scheduler module parameters, MPS daemon."""

from __future__ import annotations

import os
import re

from aorta_tui.core.numerals import ascii_digits
from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.fields import Leaf

AMDGPU_SCHED_PARAMS = ("sched_policy", "hws_max_conc_proc", "cwsr_enable", "compute_multipipe",
                       "mes", "sched_hw_submission", "lockup_timeout", "noretry")
# /proc/driver/nvidia/params entries that change scheduling or memory behaviour.
NVIDIA_PARAMS = ("EnableGpuFirmware", "EnableStreamMemOPs", "RmProfilingAdminOnly",
                 "EnablePCIeGen3", "NVreg_RegistryDwords", "RegistryDwords", "EnableMSI",
                 "DynamicPowerManagement", "EnableResizableBar", "GrdmaPciTopoCheckOverride",
                 "EnableUserNUMAManagement", "CoherentGPUMemoryMode")


def capture_driver(vendors: list[str]) -> dict[str, Leaf]:
    out: dict[str, Leaf] = {"vendors": F.ok(vendors, "file:/proc/driver/nvidia, /sys/class/kfd")}
    out.update(_nvidia() if "nvidia" in vendors else _not_vendor("nvidia", _NVIDIA_KEYS))
    out.update(_amd() if "amd" in vendors else _not_vendor("amd", _AMD_KEYS))
    out["mps_daemon"] = _mps_daemon() if "nvidia" in vendors else F.not_applicable(
        "MPS is NVIDIA-only and no NVIDIA driver is loaded", "file:/proc/*/comm")
    return out


_NVIDIA_KEYS = ("nvidia_version", "nvidia_kernel_module", "nvidia_params")
_AMD_KEYS = ("amdgpu_version", "amdgpu_params", "kfd_present")


def _not_vendor(vendor: str, keys: tuple[str, ...]) -> dict[str, Leaf]:
    where = "/proc/driver/nvidia" if vendor == "nvidia" else "/sys/module/amdgpu"
    return {k: F.not_applicable(f"no {vendor} kernel driver loaded ({where} absent)", f"file:{where}")
            for k in keys}


def _nvidia() -> dict[str, Leaf]:
    leaf = F.read_file("/proc/driver/nvidia/version")
    version = F.derive(leaf, None)
    flavour = F.derive(leaf, None)
    if leaf["state"] == "ok":
        m = re.search(r"Kernel Module(?: for [\w]+)?\s+([\d.]+)", leaf["value"])
        version = F.ok(m.group(1), leaf["source"]) if m else F.unknown("no version in file", leaf["source"])
        flavour = F.ok("open" if "Open Kernel Module" in leaf["value"] else "proprietary", leaf["source"])
    params = F.read_file("/proc/driver/nvidia/params")
    if params["state"] == "ok":
        values = {}
        for line in params["value"].splitlines():
            key, _, value = line.partition(":")
            if key.strip() in NVIDIA_PARAMS:
                values[key.strip()] = value.strip().strip('"')
        params = F.ok(dict(sorted(values.items())), params["source"])
    return {"nvidia_version": version, "nvidia_kernel_module": flavour, "nvidia_params": params}


def _amd() -> dict[str, Leaf]:
    version = F.read_file("/sys/module/amdgpu/version")
    if version["state"] == "ok" and not version["value"]:
        version = F.unknown("empty (an in-tree amdgpu reports no version)", version["source"])
    params: dict[str, object] = {}
    denied: list[str] = []
    for name in AMDGPU_SCHED_PARAMS:
        leaf = F.read_file(f"/sys/module/amdgpu/parameters/{name}")
        if leaf["state"] == "ok":
            params[name] = int(leaf["value"]) if re.fullmatch(r"-?\d+", leaf["value"]) else leaf["value"]
        elif leaf.get("needs_root"):
            denied.append(name)
    source = "file:/sys/module/amdgpu/parameters/*"
    if denied:
        amd_params = F.error(f"permission denied for {', '.join(denied)}; needs root", source, needs_root=True)
    else:
        amd_params = F.ok(params, source)
    kfd = os.path.exists("/dev/kfd")
    return {"amdgpu_version": version, "amdgpu_params": amd_params,
            "kfd_present": F.ok(kfd, "file:/dev/kfd")}


def _mps_daemon() -> Leaf:
    control = servers = 0
    try:
        pids = [p for p in os.listdir("/proc") if ascii_digits(p)]
    except OSError as exc:
        return F.error(f"listing /proc failed: {exc}", "file:/proc/*/comm")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        if not comm.startswith("nvidia-cuda-mps"):  # comm is cut at 15 characters
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv0 = fh.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            argv0 = comm
        if os.path.basename(argv0) == "nvidia-cuda-mps-control":
            control += 1
        else:
            servers += 1
    return F.ok({"control_daemon": control > 0, "servers": servers}, "file:/proc/*/comm")
