"""Live capture on a GPU machine (skipped elsewhere): the real NVIDIA / AMD paths."""

from __future__ import annotations

import re

import pytest

from aorta_tui.envsnap import capture_snapshot, validate
from aorta_tui.envsnap.capture.gpus import detect_vendors

VENDORS = detect_vendors()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not VENDORS, reason="no GPU driver on this machine")]


@pytest.fixture(scope="module")
def live() -> dict:
    return capture_snapshot(timeout_s=90.0, include_torch=True).to_json()


def test_live_snapshot_is_valid_and_lists_the_gpus(live: dict) -> None:
    validate(live)
    assert live["gpus"], live["driver"].get("gpu_query_error")
    assert live["driver"]["gpu_count"]["value"] == len(live["gpus"])
    for device in live["gpus"]:
        assert device["name"]["state"] == "ok"
        assert device["memory_total_bytes"]["value"] > 1 << 30
        assert device["compute_units"]["state"] == "ok" and device["compute_units"]["value"] > 0


@pytest.mark.skipif("nvidia" not in VENDORS, reason="no NVIDIA driver")
def test_live_nvidia_fields(live: dict) -> None:
    device = live["gpus"][0]
    assert re.fullmatch(r"sm_\d{2,3}", device["architecture"]["value"])
    assert re.fullmatch(r"[0-9a-f]{12}", device["uuid_hash"]["value"])
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", live["driver"]["nvidia_version"]["value"])
    assert re.fullmatch(r"\d+\.\d", live["cuda"]["driver_api_version"]["value"])
    torch = live["torch"]
    if torch["cuda_build_version"]["state"] == "ok":
        assert torch["cuda_available"]["value"] is True
        assert torch["device_count"]["value"] >= 1
        # the build must carry code this GPU can run: its own arch or an older one (via PTX)
        gpu_arch = int(device["architecture"]["value"][3:])
        built = [int(a[3:]) for a in torch["compiled_arch_list"]["value"] if a.startswith("sm_")]
        assert any(a <= gpu_arch for a in built), (gpu_arch, built)
        cublas = torch["loaded_libraries"]["cublas"]
        assert cublas["path"]["state"] == "ok", cublas
        assert re.fullmatch(r"\d+\.\d+\.\d+", cublas["version"]["value"])
