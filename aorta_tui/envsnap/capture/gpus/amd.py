"""AMD backend: the KFD topology (``/sys/class/kfd/kfd/topology/nodes``) and the amdgpu
sysfs of each device's DRM node. Reads files only: no rocm-smi, no subprocess.

Not yet run on real AMD hardware: its parsers are tested on a sysfs tree written to a
temporary directory in the documented amdgpu/KFD formats (see tests/envsnap).
"""

from __future__ import annotations

import os
import re

from aorta_tui.core.numerals import ascii_digits
from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.fields import Leaf

TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"


def gfx_name(target_version: int) -> str:
    """KFD's gfx_target_version (90402) -> the LLVM target name (gfx942)."""
    major, rest = divmod(target_version, 10000)
    minor, stepping = divmod(rest, 100)
    return f"gfx{major}{minor:x}{stepping:x}"


def parse_properties(text: str) -> dict[str, int]:
    props: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"-?\d+", parts[1]):
            props[parts[0]] = int(parts[1])
    return props


def parse_dpm(text: str) -> tuple[int | None, int | None]:
    """``pp_dpm_sclk`` lines ``1: 1700Mhz *`` -> (current MHz, max MHz)."""
    current = None
    levels: list[int] = []
    for line in text.splitlines():
        m = re.match(r"\s*\d+:\s*(\d+)\s*[Mm]hz\s*(\*)?", line)
        if m:
            levels.append(int(m.group(1)))
            if m.group(2):
                current = int(m.group(1))
    return current, (max(levels) if levels else None)


def capture_amd_gpus(root: str = TOPOLOGY, drm_root: str = "/sys/class/drm") -> tuple[list[dict[str, Leaf]], Leaf]:
    listing = F.list_dir(root)
    if listing["state"] != "ok":
        return [], listing
    devices: list[dict[str, Leaf]] = []
    for node in sorted(listing["value"], key=lambda n: int(n) if ascii_digits(n) else 0):
        props_leaf = F.read_file(f"{root}/{node}/properties")
        if props_leaf["state"] != "ok":
            continue
        props = parse_properties(props_leaf["value"])
        if props.get("simd_count", 0) == 0:  # a CPU node
            continue
        devices.append(_device(len(devices), props, props_leaf["source"], drm_root))
    return devices, F.ok(len(devices), listing["source"])


def _device(index: int, props: dict[str, int], source: str, drm_root: str) -> dict[str, Leaf]:
    d: dict[str, Leaf] = {
        "index": F.ok(index, source),
        "vendor": F.ok("amd", source),
    }
    gfx = props.get("gfx_target_version")
    d["architecture"] = F.ok(gfx_name(gfx), source) if gfx else F.unknown("no gfx_target_version", source)
    simd_per_cu = props.get("simd_per_cu") or 0
    d["compute_units"] = (
        F.ok(props["simd_count"] // simd_per_cu, source + " (simd_count / simd_per_cu)")
        if simd_per_cu else F.unknown("no simd_per_cu", source)
    )
    loc = props.get("location_id")
    domain = props.get("domain", 0)
    bus_id = (
        f"{domain:04x}:{(loc >> 8) & 0xFF:02x}:{(loc >> 3) & 0x1F:02x}.{loc & 0x7}"
        if loc is not None else None
    )
    d["pci_bus_id"] = F.ok(bus_id, source) if bus_id else F.unknown("no location_id", source)
    uid = props.get("unique_id")
    d["uuid_hash"] = (F.ok(F.short_hash(str(uid)), source + " [unique_id] (sha256, 12 hex)")
                      if uid else F.not_applicable("no unique_id in KFD properties", source))
    dev_dir = _drm_device_dir(props.get("drm_render_minor"), drm_root)
    d.update(_drm_fields(dev_dir))
    for key, reason in (("persistence_mode", "AMD GPUs have no persistence mode"),
                        ("compute_mode", "no compute mode on AMD (use partitions)"),
                        ("pstate", "no P-states exposed on AMD")):
        d[key] = F.not_applicable(reason, "")
    return d


def _drm_device_dir(render_minor: int | None, drm_root: str) -> str | None:
    if render_minor is None:
        return None
    path = f"{drm_root}/renderD{render_minor}/device"
    return path if os.path.isdir(path) else None


def _drm_fields(dev: str | None) -> dict[str, Leaf]:
    keys = ("name", "memory_total_bytes", "memory_used_bytes", "partition_mode", "ecc",
            "power_limit_w", "power_max_limit_w", "clock_sm_mhz", "clock_sm_max_mhz",
            "clock_mem_mhz", "clock_mem_max_mhz", "vbios", "temperature_c", "utilization_percent")
    if dev is None:
        return {k: F.unknown("no DRM render node for this KFD node", "") for k in keys}
    out: dict[str, Leaf] = {}
    name = F.read_file(f"{dev}/product_name")
    out["name"] = name if name["state"] == "ok" and name["value"] else F.read_file(f"{dev}/device")
    out["memory_total_bytes"] = _int_file(f"{dev}/mem_info_vram_total")
    out["memory_used_bytes"] = _int_file(f"{dev}/mem_info_vram_used")
    compute = F.read_file(f"{dev}/current_compute_partition")
    memory = F.read_file(f"{dev}/current_memory_partition")
    if compute["state"] == "ok":
        mem = memory["value"] if memory["state"] == "ok" else "?"
        out["partition_mode"] = F.ok(f"{compute['value']}/{mem}", compute["source"])
    else:
        out["partition_mode"] = compute
    ras = F.read_file(f"{dev}/ras/features")
    out["ecc"] = F.derive(ras, "Enabled" if ras["state"] == "ok" and "umc" in ras["value"].lower() else "Disabled")
    hwmon = F.list_dir(f"{dev}/hwmon")
    hw = f"{dev}/hwmon/{hwmon['value'][0]}" if hwmon["state"] == "ok" and hwmon["value"] else None
    out["power_limit_w"] = _micro(f"{hw}/power1_cap") if hw else F.not_applicable("no hwmon", dev)
    out["power_max_limit_w"] = _micro(f"{hw}/power1_cap_max") if hw else F.not_applicable("no hwmon", dev)
    temp = _int_file(f"{hw}/temp1_input") if hw else F.not_applicable("no hwmon", dev)
    out["temperature_c"] = F.derive(temp, temp["value"] // 1000 if temp["state"] == "ok" else None)
    for clk, cur_key, max_key in (("sclk", "clock_sm_mhz", "clock_sm_max_mhz"),
                                  ("mclk", "clock_mem_mhz", "clock_mem_max_mhz")):
        leaf = F.read_file(f"{dev}/pp_dpm_{clk}")
        cur, top = parse_dpm(leaf["value"]) if leaf["state"] == "ok" else (None, None)
        out[cur_key] = F.derive(leaf, cur)
        out[max_key] = F.derive(leaf, top)
    out["vbios"] = F.read_file(f"{dev}/vbios_version")
    out["utilization_percent"] = _int_file(f"{dev}/gpu_busy_percent")
    return out


def _int_file(path: str) -> Leaf:
    leaf = F.read_file(path)
    try:
        return F.derive(leaf, int(leaf["value"]) if leaf["state"] == "ok" else None)
    except ValueError:
        return F.error(f"not an integer: {leaf['value']!r}", leaf["source"])


def _micro(path: str) -> Leaf:
    leaf = _int_file(path)
    return F.derive(leaf, leaf["value"] / 1e6 if leaf["state"] == "ok" else None)
