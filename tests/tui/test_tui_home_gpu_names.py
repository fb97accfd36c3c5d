"""Home names each GPU once: "NVIDIA H200", never "NVIDIA NVIDIA H200" (found on the H200 box)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from aorta_tui.tui.machine import gather_machine_facts, gpu_label


@pytest.mark.parametrize("vendor, name, shown", [
    ("NVIDIA", "NVIDIA H200", "NVIDIA H200 (0000:18:00.0)"),
    ("NVIDIA", "Tesla V100-SXM2-16GB", "NVIDIA Tesla V100-SXM2-16GB (0000:18:00.0)"),
    ("NVIDIA", "nvidia A100", "nvidia A100 (0000:18:00.0)"),
    ("AMD", "AMD Instinct MI300X", "AMD Instinct MI300X (0000:18:00.0)"),
    ("AMD", "Instinct MI210", "AMD Instinct MI210 (0000:18:00.0)"),
    ("AMD", None, "AMD GPU (0000:18:00.0)"),
    ("AMD", "", "AMD GPU (0000:18:00.0)"),
])
def test_the_vendor_is_added_only_when_the_name_lacks_it(vendor: str, name: str | None, shown: str) -> None:
    assert gpu_label(vendor, name, "0000:18:00.0") == shown


def _device(root: Path, bus: str, vendor: str, klass: str, product: str | None = None) -> None:
    d = root / bus
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "class").write_text(klass + "\n")
    if product is not None:
        (d / "product_name").write_text(product + "\n")


def test_facts_from_sysfs_and_a_real_nvidia_smi_name_each_gpu_once(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "pci"
    _device(root, "0000:18:00.0", "0x10de", "0x030200")
    _device(root, "0000:c1:00.0", "0x1002", "0x038000", "AMD Instinct MI300X")
    _device(root, "0000:c2:00.0", "0x1002", "0x038000")  # no product_name from this kernel
    _device(root, "0000:00:1f.0", "0x8086", "0x060100")  # not a GPU
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"  # what nvidia-smi prints on the H200 box
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    facts = gather_machine_facts(pci_root=root)
    assert facts.gpus == ["NVIDIA H200 (0000:18:00.0)", "AMD Instinct MI300X (0000:c1:00.0)",
                          "AMD GPU (0000:c2:00.0)"]
    assert facts.gpu_source == "sysfs PCI ids + nvidia-smi + amdgpu product_name"
