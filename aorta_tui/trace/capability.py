"""What this machine can trace: bpftrace, privileges, tracefs, kprobes, and every probe set."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import EnvironmentProblem
from aorta_tui.privsep import client as privsep
from aorta_tui.trace import tracefs

ENV_VAR = "AORTA_TUI_BPFTRACE"
CAP_BPF = 39
CAP_PERFMON = 38
CAP_SYS_ADMIN = 21


def find_bpftrace(explicit: str | None = None) -> tuple[str | None, str]:
    """(path, how it was chosen): --bpftrace, then $AORTA_TUI_BPFTRACE, then PATH."""
    for candidate, how in ((explicit, "--bpftrace"), (os.environ.get(ENV_VAR), f"${ENV_VAR}")):
        if candidate:
            path = shutil.which(candidate) if os.sep not in candidate else candidate
            if path and os.access(path, os.X_OK) and os.path.isfile(path):
                return path, how
            return None, f"{how} points at {candidate}, which is not an executable file"
    path = shutil.which("bpftrace")
    return (path, "PATH") if path else (None, "bpftrace is not on PATH")


def require_bpftrace(explicit: str | None = None) -> str:
    path, how = find_bpftrace(explicit)
    if path is None:
        raise EnvironmentProblem(
            f"bpftrace not found: {how}",
            hint=f"install it (apt-get install bpftrace), or pass --bpftrace PATH or set {ENV_VAR}",
        )
    return path


def bpftrace_version(path: str) -> str | None:
    try:
        out = spawn_gate.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"v?(\d+\.\d+(?:\.\d+)?)", out.stdout + out.stderr)
    return m.group(1) if m else None


def privileges() -> dict[str, Any]:
    caps = 0
    try:
        for ln in Path("/proc/self/status").read_text().splitlines():
            if ln.startswith("CapEff:"):
                caps = int(ln.split()[1], 16)
    except (OSError, ValueError):
        pass
    root = os.geteuid() == 0
    has = {
        "root": root,
        "cap_bpf": bool(caps >> CAP_BPF & 1),
        "cap_perfmon": bool(caps >> CAP_PERFMON & 1),
        "cap_sys_admin": bool(caps >> CAP_SYS_ADMIN & 1),
    }
    # under sudo the tool runs as the user and the privileged helper (root) runs bpftrace
    has["privileged_helper"] = privsep.current() is not None
    has["sufficient"] = (root or has["cap_sys_admin"] or (has["cap_bpf"] and has["cap_perfmon"])
                         or has["privileged_helper"])
    return has


def require_privilege() -> None:
    p = privileges()
    if not p["sufficient"]:
        raise EnvironmentProblem(
            f"not privileged for eBPF tracing (uid {os.geteuid()}, no CAP_BPF+CAP_PERFMON)",
            hint="run as root (sudo aorta-tui trace ...) or grant CAP_BPF and CAP_PERFMON",
        )


def detect_sets(names: list[str], *, pid: int | None = None,
                library_paths: dict[str, Path] | None = None) -> dict[str, Any]:
    """``name -> ProbeDetection`` for the named probe sets, on this machine's tracefs."""
    from aorta_tui.trace import probes

    root = tracefs.find_tracefs()
    kp, kp_reason = tracefs.kprobes_supported(root)
    ctx = probes.ProbeContext(tracefs=root, pid=pid, library_paths=dict(library_paths or {}),
                              kprobes=kp, kprobes_reason=kp_reason)
    return {name: probes.get(name).detect(ctx) for name in names}


def trace_info(bpftrace: str | None = None, *, pid: int | None = None,
               library_paths: dict[str, Path] | None = None) -> dict[str, Any]:
    """Everything ``aorta-tui trace info`` prints, as a JSON-ready dict."""
    from aorta_tui.trace import probes
    from aorta_tui.trace.visibility import find_devices, sees

    path, how = find_bpftrace(bpftrace)
    root = tracefs.find_tracefs()
    kp, kp_reason = tracefs.kprobes_supported(root)
    devices = find_devices()
    sets = {}
    for name, det in detect_sets(list(probes.CATALOGUE), pid=pid, library_paths=library_paths).items():
        ps = probes.get(name)
        entry = det.to_dict()
        entry["description"] = ps.description
        entry["metrics"] = {m.name: m.measures for m in ps.metrics}
        # attaching is not seeing: e.g. Debian's libamdhip64 on a box with no AMD GPU
        entry["sees_anything"], entry["sees_why"] = sees(name, det.available, det.reason, devices)
        sets[name] = entry
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "bpftrace": {
            "path": path,
            "found_by": how,
            "version": bpftrace_version(path) if path else None,
            "fix": None if path else f"apt-get install bpftrace, or --bpftrace PATH / {ENV_VAR}",
        },
        "privileges": privileges(),
        "tracefs": {
            "mounted_at": str(root) if root else None,
            "fix": None if root else tracefs.MOUNT_COMMAND,
        },
        "kprobes": {"available": kp, "reason": kp_reason},
        "probe_sets": sets,
        "gpu_devices": {"nvidia": devices.nvidia, "amd_kfd": devices.amd_kfd, "drm": devices.drm_drivers},
        "device_timestamps": device_timestamps_info(),
    }


def device_timestamps_info() -> dict[str, Any]:
    """GPU start times beside the eBPF launches: the CUPTI collector's state, and HIP's (the
    rocprofiler-sdk collector: built from source where rocprofiler-sdk is installed, never run
    on AMD hardware, and ``trace info`` says so in its status)."""
    from aorta_tui.trace.device.build import describe_availability
    from aorta_tui.trace.device.rocprof_build import describe_availability as describe_hip

    return {"cuda": describe_availability(), "hip": describe_hip()}
