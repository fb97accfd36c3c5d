"""NVIDIA backend: ``nvidia-smi --query-gpu`` (one call), joined with the driver API's SM
counts from ``libprobe`` by PCI bus id."""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.fields import Leaf

# (nvidia-smi field, our key, converter); order is the CSV column order.
_QUERY: tuple[tuple[str, str, str], ...] = (
    ("index", "index", "int"),
    ("name", "name", "str"),
    ("uuid", "uuid_hash", "hash"),
    ("pci.bus_id", "pci_bus_id", "str"),
    ("memory.total", "memory_total_bytes", "mib"),
    ("compute_cap", "architecture", "sm"),
    ("mig.mode.current", "partition_mode", "str"),
    ("ecc.mode.current", "ecc", "str"),
    ("persistence_mode", "persistence_mode", "str"),
    ("compute_mode", "compute_mode", "str"),
    ("power.limit", "power_limit_w", "float"),
    ("power.max_limit", "power_max_limit_w", "float"),
    ("clocks.sm", "clock_sm_mhz", "int"),
    ("clocks.max.sm", "clock_sm_max_mhz", "int"),
    ("clocks.mem", "clock_mem_mhz", "int"),
    ("clocks.max.mem", "clock_mem_max_mhz", "int"),
    ("vbios_version", "vbios", "str"),
    ("temperature.gpu", "temperature_c", "int"),
    ("utilization.gpu", "utilization_percent", "int"),
    ("memory.used", "memory_used_bytes", "mib"),
    ("pstate", "pstate", "str"),
)
_MINIMAL = ("index", "name", "uuid", "pci.bus_id", "memory.total")
_NOT_AVAILABLE = re.compile(r"^\[?(N/A|Not Supported|Unknown Error|Insufficient Permissions)\]?$", re.I)


def query_command(names: tuple[str, ...]) -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(names)}", "--format=csv,noheader,nounits"]


def capture_nvidia_gpus(timeout_s: float) -> tuple[list[dict[str, Leaf]], Leaf]:
    """Return (devices, status leaf). The status leaf says why the list is empty, if it is."""
    names = tuple(q[0] for q in _QUERY)
    result = F.run_command(query_command(names), timeout_s=timeout_s)
    if not result.ok and "not a valid field" in (result.stderr + result.output).lower():
        names = _MINIMAL  # an older nvidia-smi: fall back to fields every release has
        result = F.run_command(query_command(names), timeout_s=timeout_s)
    if not result.ok:
        return [], dict(result.leaf)
    devices = parse_query_csv(result.stdout, names, result.leaf["source"])
    return devices, F.ok(len(devices), result.leaf["source"])


def parse_query_csv(text: str, names: tuple[str, ...], source: str) -> list[dict[str, Leaf]]:
    by_name = {q[0]: q for q in _QUERY}
    devices: list[dict[str, Leaf]] = []
    for row in csv.reader(io.StringIO(text)):
        if not row or all(not c.strip() for c in row):
            continue
        cells = [c.strip() for c in row]
        device: dict[str, Leaf] = {"vendor": F.ok("nvidia", "cmd:nvidia-smi")}
        for name, cell in zip(names, cells, strict=False):
            _, key, kind = by_name[name]
            device[key] = _convert(cell, kind, f"cmd:nvidia-smi --query-gpu={name}")
        for _, key, _ in _QUERY:
            device.setdefault(key, F.unknown("this nvidia-smi does not report it", source))
        device["compute_units"] = F.unknown("SM count comes from the CUDA driver API", "")
        devices.append(device)
    return devices


def _convert(cell: str, kind: str, source: str) -> Leaf:
    if _NOT_AVAILABLE.match(cell):
        if "permission" in cell.lower():
            return F.error(f"nvidia-smi answered {cell}; needs root", source, needs_root=True)
        return F.not_applicable(f"nvidia-smi answered {cell}", source)
    try:
        value: int | float | str
        if kind == "int":
            value = int(float(cell))
        elif kind == "float":
            value = float(cell)
            if not math.isfinite(value):  # JSON has no inf/nan
                raise ValueError(cell)
        elif kind == "mib":
            value = int(float(cell)) * 1024 * 1024
        elif kind == "sm":
            major, _, minor = cell.partition(".")
            value = f"sm_{int(major)}{int(minor or 0)}"
        elif kind == "hash":
            value = F.short_hash(cell)
            source += " (sha256, 12 hex)"
        else:
            value = cell
    except (ValueError, OverflowError):
        return F.error(f"could not parse {cell!r} as {kind}", source)
    return F.ok(value, source)


def merge_driver_api_devices(devices: list[dict[str, Leaf]], probe: dict[str, Any]) -> None:
    """Fill ``compute_units`` (SMs) from ``cuDeviceGetAttribute`` results, matched by PCI bus."""
    source = "api:cuDeviceGetAttribute(MULTIPROCESSOR_COUNT) via libprobe"
    if "error" in probe:
        for d in devices:
            d["compute_units"] = F.error(probe["error"], source)
        return
    by_bus = {_norm_bus(x.get("pci_bus_id", "")): x for x in probe.get("devices", [])}
    for d in devices:
        bus = d.get("pci_bus_id", {}).get("value") or ""
        hit = by_bus.get(_norm_bus(bus))
        if hit is None:
            d["compute_units"] = F.not_applicable(
                "device not visible to the CUDA driver API (CUDA_VISIBLE_DEVICES?)", source)
        elif hit.get("sm_count") is not None:
            d["compute_units"] = F.ok(hit["sm_count"], source)
            if d.get("architecture", {}).get("state") != "ok" and hit.get("cc_major") is not None:
                d["architecture"] = F.ok(f"sm_{hit['cc_major']}{hit['cc_minor']}", source)


def _norm_bus(bus: str) -> str:
    # nvidia-smi prints 00000000:18:00.0, the driver API 0000:18:00.0
    bus = bus.lower()
    domain, _, rest = bus.partition(":")
    return f"{int(domain, 16):04x}:{rest}" if rest and re.fullmatch(r"[0-9a-f]+", domain) else bus


def devices_from_driver_api(probe: dict[str, Any], why: str) -> list[dict[str, Leaf]]:
    """Devices from the CUDA driver API alone, for machines without a working nvidia-smi
    (containers often lack it). Fields only nvidia-smi knows are ``unknown`` with ``why``."""
    source = "api:cuDeviceGet* via libprobe"
    devices: list[dict[str, Leaf]] = []
    for raw in probe.get("devices", []):
        device: dict[str, Leaf] = {key: F.unknown(f"nvidia-smi unavailable ({why})", "cmd:nvidia-smi")
                                   for _, key, _ in _QUERY}
        device["vendor"] = F.ok("nvidia", source)
        if raw.get("name"):
            device["name"] = F.ok(raw["name"], source)
        device["pci_bus_id"] = F.ok(raw.get("pci_bus_id"), source)
        if raw.get("memory_total_bytes"):
            device["memory_total_bytes"] = F.ok(raw["memory_total_bytes"], source)
        if raw.get("uuid"):
            device["uuid_hash"] = F.ok(F.short_hash(raw["uuid"]), source + " (sha256, 12 hex)")
        if raw.get("cc_major") is not None:
            device["architecture"] = F.ok(f"sm_{raw['cc_major']}{raw['cc_minor']}", source)
        device["compute_units"] = (F.ok(raw["sm_count"], source) if raw.get("sm_count") is not None
                                   else F.unknown("no SM count", source))
        devices.append(device)
    return devices
