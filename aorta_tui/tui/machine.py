"""What the home screen says about this machine, gathered quickly and without torch.

GPUs come from sysfs PCI ids (instant, no vendor tool needed), named by ``nvidia-smi`` where it
answers within a second; bpftrace capability comes from the trace engine when it is installed,
else from the binary and the effective user. Every fact says where it came from.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

VENDORS = {"0x10de": "NVIDIA", "0x1002": "AMD"}
DISPLAY_CLASSES = ("0x0300", "0x0302", "0x0380", "0x1200")


@dataclass(frozen=True)
class MachineFacts:
    gpus: list[str] = field(default_factory=list)
    gpu_source: str = ""
    bpftrace: str = ""
    privileges: str = ""


def _pci_gpus(root: Path = Path("/sys/bus/pci/devices")) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    try:
        devices = sorted(root.iterdir())
    except OSError:
        return found
    for dev in devices:
        try:
            vendor = (dev / "vendor").read_text().strip()
            klass = (dev / "class").read_text().strip()
        except OSError:
            continue
        if vendor in VENDORS and klass[:6] in DISPLAY_CLASSES:
            found.append((VENDORS[vendor], dev.name))
    return found


def _nvidia_names() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=1.5, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def _bpftrace_fact() -> str:
    """bpftrace and which probe sets can attach here, from the trace engine's capability check."""
    try:
        from aorta_tui.trace.capability import trace_info

        info = trace_info()
    except Exception as exc:  # engine missing or failing: say so, fall back to the binary
        path = shutil.which("bpftrace")
        where = f"{path} found" if path else "not installed"
        return f"{where}; probe sets unknown (trace engine: {type(exc).__name__}: {exc})"
    bpf = info.get("bpftrace", {})
    if not bpf.get("path"):
        return f"not available ({bpf.get('fix') or 'bpftrace not found'})"
    priv = info.get("privileges", {})
    usable = [name for name, entry in info.get("probe_sets", {}).items() if entry.get("available")]
    head = f"bpftrace {bpf.get('version') or '?'} ({bpf['path']})"
    if not priv.get("sufficient"):
        return f"{head}: needs root or CAP_BPF+CAP_PERFMON (run `sudo aorta-tui`)"
    sets = ", ".join(usable) if usable else "none"
    return f"{head}; probe sets usable here: {sets}"


def _privileges() -> str:
    if os.geteuid() == 0:
        sudo_user = os.environ.get("SUDO_USER")
        return f"root (via sudo by {sudo_user})" if sudo_user else "root"
    return f"uid {os.geteuid()} (no root: tracing and some env fields unavailable)"


def gather_machine_facts() -> MachineFacts:
    pci = _pci_gpus()
    names = _nvidia_names()
    gpus: list[str] = []
    nvidia_index = 0
    for vendor, bus in pci:
        if vendor == "NVIDIA" and nvidia_index < len(names):
            gpus.append(f"{vendor} {names[nvidia_index]} ({bus})")
            nvidia_index += 1
        else:
            gpus.append(f"{vendor} GPU ({bus})")
    source = "sysfs PCI ids" + (" + nvidia-smi" if names else "")
    return MachineFacts(gpus=gpus, gpu_source=source, bpftrace=_bpftrace_fact(), privileges=_privileges())


def nearby_recipes(base: Path, limit: int = 30) -> list[Path]:
    """YAML files in ``base`` and ``base/recipes`` that look like recipes (schema or mode key)."""
    found: list[Path] = []
    for directory in (base, base / "recipes"):
        try:
            candidates = sorted(directory.glob("*.y*ml"))
        except OSError:
            continue
        for path in candidates:
            try:
                with path.open("rb") as fh:  # the keys sit at the top: read no more than that
                    head = fh.read(4000).decode("utf-8", "replace")
            except OSError:
                continue
            if any(key in head for key in ("schema_version:", "cells:", "mitigation_axis:", "workload:")):
                found.append(path)
            if len(found) >= limit:
                return found
    return found
