"""Vendor backends and helpers: the NVIDIA parser on the H200's real nvidia-smi line, a fake
nvidia-smi on PATH for the fallback path, the AMD backend on a sysfs tree in the documented
amdgpu/KFD formats, library discovery and fingerprints, libprobe, files and commands."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from envsnap_helpers import FIXTURES, REPO, load_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.capture import host, libprobe, libraries
from aorta_tui.envsnap.capture.env_vars import CATEGORY_RANK, KNOBS
from aorta_tui.envsnap.capture.gpus import amd, nvidia
from aorta_tui.envsnap.capture.rocm import header_version

NAMES = tuple(q[0] for q in nvidia._QUERY)


def test_nvidia_parser_on_the_real_h200_line() -> None:
    text = (FIXTURES / "h200-nvidia-smi.csv").read_text()
    [device] = nvidia.parse_query_csv(text, NAMES, "cmd:nvidia-smi")
    values = {k: v["value"] for k, v in device.items()}
    assert values["name"] == "NVIDIA H200" and values["architecture"] == "sm_90"
    assert values["memory_total_bytes"] == 143771 * 2**20
    assert values["power_limit_w"] == 700.0 and values["clock_sm_max_mhz"] == 1980
    assert values["partition_mode"] == "Disabled" and values["ecc"] == "Enabled"
    assert values["uuid_hash"] == F.short_hash("GPU-00000000-0000-0000-0000-000000000000")
    # the committed snapshot was parsed from this same line (its UUID hashed, not zeroed)
    snap_gpu = load_fixture("h200.json")["gpus"][0]
    for key in ("name", "architecture", "memory_total_bytes", "power_limit_w", "clock_sm_max_mhz", "vbios"):
        assert snap_gpu[key]["value"] == values[key], key


def test_nvidia_unavailable_cells_are_not_made_up() -> None:
    row = "0, NVIDIA A100, GPU-x, 00000000:01:00.0, 81920, 8.0, [N/A], [Not Supported], Enabled, Default, [Insufficient Permissions], 400.00, 210, 1410, 1593, 1593, 92.00, 30, 0, 0, P0"
    [device] = nvidia.parse_query_csv(row, NAMES, "cmd:nvidia-smi")
    assert device["partition_mode"]["state"] == "not_applicable" and device["partition_mode"]["value"] is None
    assert device["ecc"]["state"] == "not_applicable"
    assert device["power_limit_w"]["state"] == "error" and device["power_limit_w"]["needs_root"] is True
    assert device["architecture"]["value"] == "sm_80"


def _fake_nvidia_smi(tmp: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp}{os.pathsep}{os.environ['PATH']}")


def test_older_nvidia_smi_falls_back_to_the_minimal_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path, """
case "$1" in
  *pstate*) echo 'Field "pstate" is not a valid field to query.' >&2; exit 2;;
  *) echo "0, Tesla V100, GPU-abc, 00000000:3B:00.0, 16160";;
esac
""", monkeypatch)
    devices, status = nvidia.capture_nvidia_gpus(timeout_s=5)
    assert status == {"value": 1, "state": "ok", "source": status["source"]}
    assert devices[0]["name"]["value"] == "Tesla V100"
    assert devices[0]["architecture"]["state"] == "unknown"  # not asked of this nvidia-smi


def test_a_hanging_nvidia_smi_is_an_error_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path, "sleep 30\n", monkeypatch)
    t0 = time.monotonic()
    devices, status = nvidia.capture_nvidia_gpus(timeout_s=0.5)
    assert time.monotonic() - t0 < 5
    assert devices == [] and status["state"] == "error" and "did not finish" in status["reason"]


def test_driver_api_sm_counts_join_by_pci_bus() -> None:
    [device] = nvidia.parse_query_csv((FIXTURES / "h200-nvidia-smi.csv").read_text(), NAMES, "cmd")
    nvidia.merge_driver_api_devices([device], {"devices": [
        {"pci_bus_id": "0000:00:06.0", "sm_count": 132, "cc_major": 9, "cc_minor": 0}]})
    assert device["compute_units"]["value"] == 132
    nvidia.merge_driver_api_devices([device], {"devices": []})
    assert device["compute_units"]["state"] == "not_applicable"
    assert "CUDA_VISIBLE_DEVICES" in device["compute_units"]["reason"]


def test_without_nvidia_smi_the_driver_api_still_names_the_devices() -> None:
    raw = bytes.fromhex("0123456789abcdef0123456789abcdef")
    uuid = "GPU-01234567-89ab-cdef-0123-456789abcdef"
    assert raw.hex()[:8] == uuid[4:12]
    [device] = nvidia.devices_from_driver_api({"devices": [{
        "name": "NVIDIA H200", "pci_bus_id": "0000:00:06.0", "memory_total_bytes": 150754820096,
        "uuid": uuid, "sm_count": 132, "cc_major": 9, "cc_minor": 0}]}, "nvidia-smi is not on PATH")
    assert device["architecture"]["value"] == "sm_90" and device["compute_units"]["value"] == 132
    assert device["uuid_hash"]["value"] == F.short_hash(uuid)  # same hash nvidia-smi's UUID gives
    assert device["power_limit_w"]["state"] == "unknown"
    assert "nvidia-smi is not on PATH" in device["power_limit_w"]["reason"]


def test_gpu_count_is_unknown_not_zero_when_nothing_can_count(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import aorta_tui.envsnap.capture as capture_mod

    monkeypatch.setattr(capture_mod, "detect_vendors", lambda: ["nvidia"])
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi, and no libcuda on a CPU box
    snap = capture_mod.capture_snapshot(include_torch=False, timeout_s=10)
    count = snap.driver["gpu_count"]
    if snap.gpus:
        pytest.skip("this machine has a CUDA driver API to fall back on")
    assert count.state != "ok" and count.value is None
    assert "nvidia-smi is not on PATH" in count.reason


@pytest.mark.parametrize(("code", "name"), [(90402, "gfx942"), (90010, "gfx90a"), (110000, "gfx1100"),
                                            (90500, "gfx950"), (100300, "gfx1030")])
def test_gfx_names(code: int, name: str) -> None:
    assert amd.gfx_name(code) == name


def test_dpm_levels() -> None:
    assert amd.parse_dpm("0: 500Mhz\n1: 1700Mhz *\n2: 2100Mhz\n") == (1700, 2100)
    assert amd.parse_dpm("garbage") == (None, None)


def _sysfs_tree(tmp: Path) -> tuple[Path, Path]:
    topo, drm = tmp / "nodes", tmp / "drm"
    (topo / "0").mkdir(parents=True)
    (topo / "0" / "properties").write_text("cpu_cores_count 96\nsimd_count 0\n")
    (topo / "1").mkdir()
    (topo / "1" / "properties").write_text(
        "cpu_cores_count 0\nsimd_count 1216\nsimd_per_cu 4\ngfx_target_version 90402\n"
        "location_id 768\ndomain 0\ndrm_render_minor 128\nunique_id 1234567890123\n")
    dev = drm / "renderD128" / "device"
    (dev / "hwmon" / "hwmon3").mkdir(parents=True)
    files = {
        "product_name": "AMD Instinct MI300X", "mem_info_vram_total": str(192 * 2**30),
        "mem_info_vram_used": "1048576", "current_compute_partition": "SPX",
        "current_memory_partition": "NPS1", "pp_dpm_sclk": "0: 500Mhz\n1: 2100Mhz *\n",
        "pp_dpm_mclk": "0: 900Mhz\n1: 1300Mhz *\n", "vbios_version": "113-M3000100-102",
        "gpu_busy_percent": "3", "hwmon/hwmon3/power1_cap": "750000000",
        "hwmon/hwmon3/power1_cap_max": "750000000", "hwmon/hwmon3/temp1_input": "41000",
    }
    for name, text in files.items():
        (dev / name).write_text(text + "\n")
    (dev / "ras").mkdir()
    (dev / "ras" / "features").write_text("feature mask: 0x3fff\numc: enabled\n")
    return topo, drm


def test_amd_backend_on_a_sysfs_tree(tmp_path: Path) -> None:
    topo, drm = _sysfs_tree(tmp_path)
    devices, status = amd.capture_amd_gpus(root=str(topo), drm_root=str(drm))
    assert status["value"] == 1 and len(devices) == 1  # the CPU node is skipped
    values = {k: v["value"] for k, v in devices[0].items()}
    assert values["architecture"] == "gfx942" and values["compute_units"] == 304
    assert values["pci_bus_id"] == "0000:03:00.0"
    assert values["name"] == "AMD Instinct MI300X" and values["memory_total_bytes"] == 192 * 2**30
    assert values["partition_mode"] == "SPX/NPS1" and values["ecc"] == "Enabled"
    assert (values["clock_sm_mhz"], values["clock_sm_max_mhz"]) == (2100, 2100)
    assert values["power_limit_w"] == 750.0 and values["temperature_c"] == 41
    assert devices[0]["persistence_mode"]["state"] == "not_applicable"
    assert values["uuid_hash"] == F.short_hash("1234567890123")


def test_an_amd_capture_reads_back_through_the_typed_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The AMD path end to end (no AMD machine here): its leaves pass the one reader, so the
    capture is the GPU's, not the failure snapshot the reader's refusal would leave."""
    import aorta_tui.envsnap.capture as capture_mod

    jsonschema = pytest.importorskip("jsonschema")
    topo, drm = _sysfs_tree(tmp_path)
    real = amd.capture_amd_gpus
    monkeypatch.setattr(capture_mod, "detect_vendors", lambda: ["amd"])
    monkeypatch.setattr(capture_mod.amd, "capture_amd_gpus", lambda: real(str(topo), str(drm)))
    snap = capture_mod.capture_snapshot(include_torch=False, timeout_s=10)
    assert "internal_error" not in snap.probe, snap.probe.get("internal_error")
    assert snap.gpus[0]["architecture"].value == "gfx942"
    assert snap.rocm["gfx_targets"].value == ["gfx942"]
    assert snap.driver["gpu_count"].value == 1
    schema = json.loads((REPO / "aorta_tui" / "envsnap" / "schema.json").read_text())
    jsonschema.validate(snap.to_json(), schema)


def test_cgroup_v2_limit_is_the_tightest_on_the_way_up(tmp_path: Path) -> None:
    own = tmp_path / "system.slice" / "job.scope"
    own.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "system.slice" / "cpu.max").write_text("200000 100000\n")
    (own / "cpu.max").write_text("max 100000\n")
    (tmp_path / "system.slice" / "memory.max").write_text("max\n")
    (own / "memory.max").write_text("1073741824\n")
    cpu = host.v2_limit("cpu.max", host.parse_cpu_max, own=str(own), root=str(tmp_path))
    mem = host.v2_limit("memory.max", host.parse_memory_max, own=str(own), root=str(tmp_path))
    assert cpu["value"] == 2.0 and mem["value"] == 1073741824
    assert "<own cgroup and ancestors>" in cpu["source"] and str(tmp_path) not in cpu["source"]
    (own / "cpu.max").write_text("50000 100000\n")
    assert host.v2_limit("cpu.max", host.parse_cpu_max, own=str(own), root=str(tmp_path))["value"] == 0.5
    for f in (own / "cpu.max", tmp_path / "system.slice" / "cpu.max"):
        f.unlink()
    assert host.v2_limit("cpu.max", host.parse_cpu_max, own=str(own), root=str(tmp_path))["value"] == "unlimited"
    (own / "cpu.max").write_text("garbage\n")
    assert host.v2_limit("cpu.max", host.parse_cpu_max, own=str(own), root=str(tmp_path))["state"] == "error"
    (tmp_path / "cgroup.controllers").unlink()
    assert host.v2_limit("cpu.max", host.parse_cpu_max, own=str(own), root=str(tmp_path)) is None


def test_rocm_header_versions(tmp_path: Path) -> None:
    inc = tmp_path / "include" / "rocblas" / "internal"
    inc.mkdir(parents=True)
    (inc / "rocblas-version.h").write_text(
        "#define ROCBLAS_VERSION_MAJOR 4\n#define ROCBLAS_VERSION_MINOR 4\n"
        "#define ROCBLAS_VERSION_PATCH 0\n#define ROCBLAS_VERSION_TWEAK 2f3a1b\n")
    assert header_version(str(tmp_path), "rocblas")["value"] == "4.4.0-2f3a1b"
    assert header_version(str(tmp_path), "miopen")["state"] == "not_applicable"


def test_library_search_takes_the_first_directory_like_the_loader(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for d, version in ((first, "12.4.5"), (second, "12.8.1")):
        d.mkdir()
        real = d / f"libcublas.so.{version}"
        real.write_bytes(b"\x7fELF" + version.encode())
        (d / "libcublas.so.12").symlink_to(real.name)
        (d / "libcublas.so").symlink_to("libcublas.so.12")
    (first / "libcublasLt.so.12").write_bytes(b"not cublas")  # a different library
    path, others = libraries.find_library("libcublas", [str(first), str(second)])
    assert path == str(first / "libcublas.so.12.4.5") and others == [str(second / "libcublas.so.12.8.1")]


def test_fingerprints_whole_and_sampled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = tmp_path / "small.so"
    small.write_bytes(b"x" * 1000)
    leaf = libraries.fingerprint(str(small))
    assert leaf["state"] == "ok" and "whole file" in leaf["source"] and len(leaf["value"]) == 16
    monkeypatch.setattr(libraries, "FULL_HASH_LIMIT", 20)
    monkeypatch.setattr(libraries, "SAMPLE", 10)
    big = tmp_path / "big.so"
    big.write_bytes(b"a" * 10 + b"middle-1" + b"b" * 10)
    same_ends = tmp_path / "big2.so"
    same_ends.write_bytes(b"a" * 10 + b"middle-2" + b"b" * 10)
    h1, h2 = libraries.fingerprint(str(big)), libraries.fingerprint(str(same_ends))
    assert "first and last" in h1["source"]
    assert h1["value"] == h2["value"]  # documented limit of sampling: the middle is not read
    assert libraries.fingerprint(str(tmp_path / "gone.so"))["state"] == "error"


def test_libprobe_reports_failures_instead_of_raising() -> None:
    assert "dlopen failed" in libprobe.version_of("cublas", "/nonexistent/libcublas.so.12")["error"]
    # libc has no cudaRuntimeGetVersion: a missing symbol is reported, not raised
    assert "symbol missing" in libprobe.version_of("cudart", "libc.so.6")["error"]


def test_read_file_and_run_command_states(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("hello\n")
    assert F.read_file(str(tmp_path / "f")) == {"value": "hello", "state": "ok", "source": f"file:{tmp_path / 'f'}"}
    assert F.read_file(str(tmp_path / "missing"))["state"] == "not_applicable"
    assert F.read_file(str(tmp_path))["state"] == "error"  # a directory
    assert F.run_command(["definitely-not-a-command-xyz"], timeout_s=1).leaf["state"] == "not_applicable"
    failed = F.run_command(["sh", "-c", "echo boom >&2; exit 3"], timeout_s=5)
    assert failed.leaf["state"] == "error" and "exited 3: boom" in failed.leaf["reason"]


def test_run_command_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    # no wall time asserted (a loaded box): the reason says the timeout ended it, and a command
    # left waiting on its background sleep would run into pytest-timeout
    result = F.run_command(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], timeout_s=0.5)
    assert result.leaf["state"] == "error" and "did not finish within 0.5 s" in result.leaf["reason"]
    grandchild = int(pidfile.read_text())
    time.sleep(0.1)
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(grandchild)], capture_output=True, text=True).stdout.strip()
    # its first letter: a test run under nice shows a zombie as "ZN"
    assert state[:1] in ("", "Z"), f"the backgrounded sleep survived: {state}"


def test_catalogue_covers_upstream_knobs_and_categories_are_ranked() -> None:
    upstream_names = set(load_fixture("upstream-cpu-box.json")["env_vars"])
    assert len(upstream_names) == 138
    assert upstream_names <= set(KNOBS)
    assert set(KNOBS.values()) <= set(CATEGORY_RANK)
    assert set(CATEGORY_RANK.values()) == {"numerics", "scheduling", "informational"}
    for name in ("CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", "CUDA_LAUNCH_BLOCKING",
                 "NCCL_ALGO", "TRITON_F32_DEFAULT", "XLA_FLAGS", "PYTORCH_CUDA_ALLOC_CONF"):
        assert name in KNOBS


# --- properties of the parsers -----------------------------------------------------------

_cell = st.one_of(st.text(alphabet=st.characters(blacklist_characters="\n\r,\"", blacklist_categories=("Cs",)),
                          max_size=12),
                  st.sampled_from(["[N/A]", "[Not Supported]", "[Insufficient Permissions]", "9.0", "700.00", "12"]))


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_cell, min_size=len(NAMES), max_size=len(NAMES)), min_size=1, max_size=3))
def test_nvidia_parser_never_raises_and_keeps_the_field_contract(rows: list[list[str]]) -> None:
    text = "\n".join(", ".join(row) for row in rows)
    devices = nvidia.parse_query_csv(text, NAMES, "cmd:nvidia-smi")
    for device in devices:
        for key, leaf in device.items():
            assert leaf["state"] in F.STATES, key
            if leaf["state"] != "ok":
                assert leaf["value"] is None and leaf["reason"], key
        arch = device["architecture"]
        if arch["state"] == "ok":
            assert arch["value"].startswith("sm_")


@given(st.integers(min_value=8, max_value=12), st.integers(min_value=0, max_value=15),
       st.integers(min_value=0, max_value=15))
def test_gfx_name_encodes_major_minor_stepping(major: int, minor: int, stepping: int) -> None:
    name = amd.gfx_name(major * 10000 + minor * 100 + stepping)
    assert name == f"gfx{major}{minor:x}{stepping:x}"


@given(st.lists(st.integers(min_value=100, max_value=5000), min_size=1, max_size=8), st.data())
def test_dpm_parser_finds_the_current_and_the_top_level(levels: list[int], data: st.DataObject) -> None:
    current = data.draw(st.integers(min_value=0, max_value=len(levels) - 1))
    text = "".join(f"{i}: {mhz}Mhz{' *' if i == current else ''}\n" for i, mhz in enumerate(levels))
    assert amd.parse_dpm(text) == (levels[current], max(levels))


@given(st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), st.integers(-2**40, 2**40), max_size=10))
def test_kfd_properties_round_trip(props: dict[str, int]) -> None:
    text = "".join(f"{k} {v}\n" for k, v in props.items())
    assert amd.parse_properties(text) == props
