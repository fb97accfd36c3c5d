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
    try:
        from aorta_tui.trace import trace_info  # the trace engine knows best

        info = trace_info()
        if isinstance(info, dict):
            ok = info.get("usable", info.get("ok"))
            reason = info.get("reason") or info.get("why") or ""
            version = info.get("version") or info.get("bpftrace_version") or ""
            head = f"bpftrace {version}".strip()
            return f"{head}: {'usable' if ok else 'not usable'}{(' (' + reason + ')') if reason else ''}"
        return str(info)
    except Exception:  # engine not there yet, or failed: fall back to what we can see
        pass
    path = shutil.which("bpftrace")
    if path is None:
        return "not available (bpftrace not installed)"
    if os.geteuid() != 0:
        return f"{path} found; not usable without root (run `sudo aorta-tui`)"
    return f"{path} found, running as root"


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
                head = path.read_text(errors="replace")[:4000]
            except OSError:
                continue
            if any(key in head for key in ("schema_version:", "cells:", "mitigation_axis:", "workload:")):
                found.append(path)
            if len(found) >= limit:
                return found
    return found
