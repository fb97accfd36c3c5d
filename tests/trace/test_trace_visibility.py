"""What can be traced here (issue 24 item 3): a probe set that attaches is not one that sees
anything. On this box the real Debian libamdhip64/libhsa-runtime64 are installed (the hip and
hsa uprobes attach to them) and there is no /dev/kfd: trace info and Home say those sets see
nothing, and why. The device rules are checked on fake /dev and /sys trees."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_trace_cli import cli

from aorta_tui.trace.visibility import find_devices, sees


def _tree(tmp_path: Path, *, kfd: bool = False, nvidia: bool = False, cards: dict[str, str] | None = None) -> Path:
    (tmp_path / "dev").mkdir(parents=True)
    if kfd:
        (tmp_path / "dev" / "kfd").touch()
    if nvidia:
        (tmp_path / "dev" / "nvidiactl").touch()
    drm = tmp_path / "sys" / "class" / "drm"
    drm.mkdir(parents=True)
    for card, driver in (cards or {}).items():
        (tmp_path / "sys" / "bus" / driver).mkdir(parents=True, exist_ok=True)
        (drm / card / "device").mkdir(parents=True)
        os.symlink(tmp_path / "sys" / "bus" / driver, drm / card / "device" / "driver")
    (drm / "card0-DP-1").mkdir()  # a connector: never a device
    return tmp_path


def test_device_rules(tmp_path: Path) -> None:
    bare = find_devices(_tree(tmp_path / "a"))
    assert sees("hip", True, "", bare) == (False, sees("hsa", True, "", bare)[1])
    assert "/dev/kfd does not exist" in sees("hip", True, "", bare)[1]
    assert sees("cuda", True, "", bare)[0] is False and sees("ioctl", True, "", bare)[0] is True
    assert sees("drm_sched", True, "", bare)[0] is False
    amd = find_devices(_tree(tmp_path / "b", kfd=True, cards={"card0": "amdgpu"}))
    assert amd.drm_drivers == {"card0": "amdgpu"}
    for name in ("hip", "hip_calls", "hsa", "amdgpu", "drm_sched", "errors", "memory"):
        assert sees(name, True, "", amd)[0] is True, name
    assert sees("cuda", True, "", amd)[0] is False
    nv = find_devices(_tree(tmp_path / "c", nvidia=True, cards={"card1": "nvidia"}))
    assert sees("cuda", True, "", nv) == (True, "NVIDIA GPU: /dev/nvidiactl")
    assert sees("drm_sched", True, "", nv)[0] is False  # nvidia's DRM driver has no GPU scheduler
    xe = find_devices(_tree(tmp_path / "d", cards={"card0": "xe"}))
    assert sees("drm_sched", True, "", xe)[0] is True and sees("amdgpu", True, "", xe)[0] is False
    # a set that cannot attach sees nothing, for its own reason
    assert sees("cuda", False, "no library matching libcuda.so.1", nv) == (False, "cannot attach: no library matching libcuda.so.1")


@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="this machine has an AMD GPU")
def test_trace_info_says_hip_attaches_but_sees_nothing_without_an_amd_gpu(bpftrace, tmp_path: Path) -> None:
    r = cli("trace", "info", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    sets = json.loads(r.stdout)["probe_sets"]
    assert sets["ioctl"]["sees_anything"] is True
    for name in ("hip", "hip_calls", "hsa"):
        if not sets[name]["available"]:
            pytest.skip(f"{name} does not attach here (scripts/test.sh installs libamdhip64-5)")
        assert sets[name]["sees_anything"] is False and "/dev/kfd" in sets[name]["sees_why"]
    text = cli("trace", "info", cwd=tmp_path).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("can see anything here:"))
    assert "ioctl" in line and "hip" not in line
    assert "hip         attaches, but sees nothing here: no AMD GPU" in text


@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="this machine has an AMD GPU")
def test_home_does_not_list_hip_as_usable(bpftrace) -> None:
    from aorta_tui.tui.machine import bpftrace_facts

    line, sets = bpftrace_facts()
    usable = line.split("can see anything here: ")[1].split(" (")[0].split(", ")
    assert "ioctl" in usable and not {"hip", "hip_calls", "hsa"} & set(usable)
    if sets.get("hip") is not None and "attaches" in sets["hip"]:
        assert "sees nothing" in sets["hip"] and "/dev/kfd" in sets["hip"]
