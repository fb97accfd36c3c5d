"""GPU devices, one backend per vendor (nvtop style): ``nvidia``, ``amd``; none on a CPU box.

``detect_vendor`` looks for each vendor's kernel driver footprint; the backends then read
``nvidia-smi`` / sysfs. Each device is a dict of leaves with the same keys on both vendors;
a key that does not exist on a vendor (persistence mode on AMD) is ``not_applicable``.
"""

from __future__ import annotations

import os

DEVICE_KEYS = (
    "index", "vendor", "name", "architecture", "memory_total_bytes", "compute_units",
    "pci_bus_id", "uuid_hash", "partition_mode", "ecc", "persistence_mode", "compute_mode",
    "power_limit_w", "power_max_limit_w", "clock_sm_mhz", "clock_sm_max_mhz", "clock_mem_mhz",
    "clock_mem_max_mhz", "vbios", "temperature_c", "utilization_percent", "memory_used_bytes",
    "pstate",
)


def detect_vendors() -> list[str]:
    vendors = []
    if os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl"):
        vendors.append("nvidia")
    if os.path.exists("/sys/class/kfd/kfd/topology/nodes") or os.path.exists("/dev/kfd"):
        vendors.append("amd")
    return vendors
