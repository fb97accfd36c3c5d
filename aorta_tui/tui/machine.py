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

from aorta_tui.core import spawn_gate

VENDORS = {"0x10de": "NVIDIA", "0x1002": "AMD"}
DISPLAY_CLASSES = ("0x0300", "0x0302", "0x0380", "0x1200")
PCI_ROOT = Path("/sys/bus/pci/devices")


@dataclass(frozen=True)
class MachineFacts:
    gpus: list[str] = field(default_factory=list)
    gpu_source: str = ""
    bpftrace: str = ""
    privileges: str = ""
    # Probe set -> None when it can attach here, else why not (with the fix); {} = not known.
    probe_sets: dict[str, str | None] = field(default_factory=dict)


_last_gathered: MachineFacts | None = None


def last_gathered() -> MachineFacts | None:
    """The facts the last :func:`gather_machine_facts` found (Home gathers them at start)."""
    return _last_gathered


def _pci_gpus(root: Path = PCI_ROOT) -> list[tuple[str, str]]:
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


def _amd_name(bus: str, root: Path = PCI_ROOT) -> str | None:
    """The amdgpu driver's marketing name from sysfs (``product_name``, read from the board's
    FRU), when the kernel exposes one."""
    try:
        name = (root / bus / "product_name").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name or None


def gpu_label(vendor: str, name: str | None, bus: str) -> str:
    """``NVIDIA H200 (bus)``: the vendor is added only when the name does not already start
    with it (nvidia-smi says "NVIDIA H200", amdgpu "AMD Instinct MI300X"; older boards do not)."""
    if not name:
        return f"{vendor} GPU ({bus})"
    lead = name.split()[0].casefold() if name.split() else ""
    named = name if lead.startswith(vendor.casefold()) else f"{vendor} {name}"
    return f"{named} ({bus})"


def _nvidia_names() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = spawn_gate.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=1.5, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def bpftrace_facts() -> tuple[str, dict[str, str | None]]:
    """bpftrace and which probe sets can attach here, from the trace engine's capability check:
    the line Home shows, and per probe set None (can attach) or the reason it cannot."""
    try:
        from aorta_tui.trace.capability import trace_info

        info = trace_info()
    except Exception as exc:  # engine missing or failing: say so, fall back to the binary
        path = shutil.which("bpftrace")
        where = f"{path} found" if path else "not installed"
        return f"{where}; probe sets unknown (trace engine: {type(exc).__name__}: {exc})", {}
    bpf = info.get("bpftrace", {})
    entries = info.get("probe_sets", {})
    if not bpf.get("path"):
        fix = bpf.get("fix") or "bpftrace not found"
        return f"not available ({fix})", dict.fromkeys(entries, f"bpftrace is not available ({fix})")
    priv = info.get("privileges", {})
    head = f"bpftrace {bpf.get('version') or '?'} ({bpf['path']})"
    if not priv.get("sufficient"):
        why = "needs root or CAP_BPF+CAP_PERFMON (run `sudo aorta-tui`)"
        return f"{head}: {why}", dict.fromkeys(entries, why)
    sets: dict[str, str | None] = {}
    for name, entry in entries.items():
        if entry.get("available") and entry.get("sees_anything", True):
            sets[name] = None
        elif entry.get("available"):  # attaches, but no device it could see here
            sets[name] = f"attaches, but sees nothing here: {entry.get('sees_why')}"
        else:
            reason = entry.get("reason") or "its events or library were not found"
            sets[name] = reason + (f" (fix: {entry['fix']})" if entry.get("fix") else "")
    usable = ", ".join(n for n, why in sets.items() if why is None) or "none"
    blind = [n for n, e in entries.items() if e.get("available") and not e.get("sees_anything", True)]
    return (f"{head}; probe sets that can see anything here: {usable}"
            + (f" ({', '.join(blind)} attach but see nothing: no such GPU)" if blind else "")), sets


def _privileges() -> str:
    from aorta_tui.privsep import client as privsep

    if privsep.current() is not None:  # under sudo: the tool runs as the user, a helper as root
        return (f"{os.environ.get('USER') or f'uid {os.geteuid()}'} via sudo "
                "(a privileged helper runs bpftrace, GPU knobs and root-only fields as root)")
    if os.geteuid() == 0:
        return "root"
    return f"uid {os.geteuid()} (no root: tracing and some env fields unavailable)"


def gather_machine_facts(pci_root: Path = PCI_ROOT) -> MachineFacts:
    pci = _pci_gpus(pci_root)
    names = _nvidia_names()
    gpus: list[str] = []
    nvidia_index = 0
    amd_named = False
    for vendor, bus in pci:
        name = None
        if vendor == "NVIDIA" and nvidia_index < len(names):
            name = names[nvidia_index]
            nvidia_index += 1
        elif vendor == "AMD":
            name = _amd_name(bus, pci_root)
            amd_named = amd_named or name is not None
        gpus.append(gpu_label(vendor, name, bus))
    source = "sysfs PCI ids" + (" + nvidia-smi" if names else "") + (" + amdgpu product_name" if amd_named else "")
    bpftrace, probe_sets = bpftrace_facts()
    global _last_gathered
    _last_gathered = MachineFacts(gpus=gpus, gpu_source=source, bpftrace=bpftrace, privileges=_privileges(),
                                  probe_sets=probe_sets)
    return _last_gathered


def nearby_recipes(base: Path, limit: int = 30) -> list[Path]:
    """Recipe files here and under ./recipes (``recipe_files.find_recipes``, bounded)."""
    from aorta_tui.tui.recipe_files import find_recipes

    return find_recipes(base, limit=limit)
