"""Finding CUPTI and a compiler, and building the collector (aorta_tui/trace/device/build.py).

find_cupti runs on fake installation trees made under tmp_path (this machine's own toolkits are
filtered out, so the result depends only on the tree a test made). The real compile test builds
the real collector against real CUPTI headers when they are present (scripts/test.sh installs
the three nvidia wheels into .venv/cupti-headers; AORTA_TEST_CUPTI_ROOT overrides)."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aorta_tui.core.errors import EnvironmentProblem, ExitCode
from aorta_tui.trace.device import build

REPO = Path(__file__).resolve().parents[2]


def _header(include: Path, rel: str, text: str = "/* fake */\n") -> None:
    p = include / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def fake_cupti(include: Path, lib: Path, *, version: int = 130000, kernels: tuple[int, ...] = (9, 11),
               with_cuda_h: bool = True, with_crt: bool = True) -> None:
    """The files find_cupti and defines_for read, with a chosen CUpti_ActivityKernelN set."""
    _header(include, "cupti.h", "#include <cupti_activity.h>\n")
    _header(include, "cupti_version.h", f"#define CUPTI_API_VERSION {version}\n")
    act = "".join(f"typedef struct {{ int x; }} CUpti_ActivityKernel{n};\n" for n in kernels[:-1])
    _header(include, "cupti_activity.h",
            act + "typedef struct {\n  int x;\n}" + f" CUpti_ActivityKernel{kernels[-1]};\n"
            "typedef struct { int y; } CUpti_ActivityMemcpy6;\ntypedef struct { int z; } CUpti_ActivityMemset4;\n"
            "CUptiResult cuptiActivityRegisterTimestampCallback(void *);\n")
    _header(include, "cupti_activity_deprecated.h", "typedef struct { int x; } CUpti_ActivityKernel4;\n")
    if with_cuda_h:
        _header(include, "cuda.h")
    if with_crt:
        _header(include, "crt/host_defines.h")
    lib.mkdir(parents=True, exist_ok=True)
    (lib / f"libcupti.so.{version // 10000}").write_bytes(b"\x7fELF fake")


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No CUPTI from this machine: sys.path, env and the fixed toolkit paths see only tmp_path."""
    for var in ("AORTA_CUPTI_ROOT", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nothing")])
    real = build._toolkit_roots
    monkeypatch.setattr(build, "_toolkit_roots",
                        lambda: [r for r in real() if str(r[0]).startswith(str(tmp_path))])
    return tmp_path


def test_cu13_wheel_layout(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = isolated / "site"
    cu = site / "nvidia" / "cu13"
    fake_cupti(cu / "include", cu / "lib")
    monkeypatch.setattr(sys, "path", [str(isolated / "nothing"), str(site)])
    c = build.find_cupti()
    assert c.include == cu / "include" and c.lib == cu / "lib" / "libcupti.so.13"
    assert c.version == 130000 and c.origin == f"wheel {cu}"
    assert c.extra_includes == ()  # cuda.h and crt/ are in the same tree


def test_cu12_per_component_wheels(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nv = isolated / "site" / "nvidia"
    fake_cupti(nv / "cuda_cupti" / "include", nv / "cuda_cupti" / "lib", version=120400,
               with_cuda_h=False, with_crt=False)
    _header(nv / "cuda_runtime" / "include", "cuda.h")
    _header(nv / "cuda_nvcc" / "include", "crt/host_defines.h")
    monkeypatch.setattr(sys, "path", [str(isolated / "site")])
    c = build.find_cupti()
    assert c.lib.name == "libcupti.so.12" and c.version == 120400
    # the compile sees cuda.h and crt/ (the other candidate folders are passed too; -I of a
    # missing folder is harmless)
    assert {nv / "cuda_runtime" / "include", nv / "cuda_nvcc" / "include"} <= set(c.extra_includes)


def test_toolkit_layout_through_cuda_home(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = isolated / "cuda-12.9"
    fake_cupti(home / "extras" / "CUPTI" / "include", home / "extras" / "CUPTI" / "lib64", version=120900,
               with_cuda_h=False, with_crt=False)
    _header(home / "include", "cuda.h")
    _header(home / "include", "crt/host_defines.h")
    monkeypatch.setenv("CUDA_HOME", str(home))
    c = build.find_cupti()
    assert c.origin == f"CUDA toolkit {home}" and c.lib.parent == home / "extras" / "CUPTI" / "lib64"
    assert c.extra_includes[0] == home / "include"


def test_crt_headers_from_another_installation(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a CUPTI wheel without crt/, beside a toolkit that has it (and no CUPTI of its own)
    cu = isolated / "site" / "nvidia" / "cu13"
    fake_cupti(cu / "include", cu / "lib", with_crt=False)
    home = isolated / "toolkit"
    _header(home / "include", "crt/host_defines.h")
    monkeypatch.setattr(sys, "path", [str(isolated / "site")])
    monkeypatch.setenv("CUDA_HOME", str(home))
    c = build.find_cupti()
    assert c.include == cu / "include" and c.extra_includes == (home / "include",)


def test_aorta_cupti_root_comes_first(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cu = isolated / "site" / "nvidia" / "cu13"
    fake_cupti(cu / "include", cu / "lib")
    mine = isolated / "mine"
    fake_cupti(mine / "include", mine / "lib64", version=130100)
    monkeypatch.setattr(sys, "path", [str(isolated / "site")])
    monkeypatch.setenv("AORTA_CUPTI_ROOT", str(mine))
    c = build.find_cupti()
    assert c.include == mine / "include" and c.version == 130100 and "AORTA_CUPTI_ROOT" in c.origin


def test_cupti_without_crt_anywhere_is_not_usable(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cu = isolated / "site" / "nvidia" / "cu13"
    fake_cupti(cu / "include", cu / "lib", with_crt=False)
    monkeypatch.setattr(sys, "path", [str(isolated / "site")])
    with pytest.raises(EnvironmentProblem) as e:
        build.find_cupti()
    assert e.value.exit_code == ExitCode.ENVIRONMENT == 3
    assert f"wheel {cu}" in e.value.message  # says where it looked


def test_no_cupti_is_exit_3_with_the_fix(isolated: Path) -> None:
    with pytest.raises(EnvironmentProblem) as e:
        build.find_cupti()
    assert e.value.exit_code == 3
    assert "no CUPTI found" in e.value.message
    assert "AORTA_CUPTI_ROOT" in (e.value.hint or "") and "--device-timestamps off" in (e.value.hint or "")
    info = build.describe_availability()
    assert info["available"] is False and info["fix"] == e.value.hint


def test_no_compiler_is_exit_3_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EnvironmentProblem) as e:
        build.find_compiler()
    assert e.value.exit_code == 3 and "no C compiler" in e.value.message
    assert "apt-get install gcc" in (e.value.hint or "")


def test_defines_pick_the_newest_record_layouts(isolated: Path) -> None:
    inc = isolated / "inc"
    fake_cupti(inc, isolated / "lib", kernels=(5, 11, 9))
    c = build.CuptiInstall(inc, isolated / "lib" / "libcupti.so.13", (), 130000, "test")
    d = build.defines_for(c)
    assert d["AORTA_KERNEL_T"] == "CUpti_ActivityKernel11"  # not the last one written, the newest
    assert d["AORTA_MEMCPY_T"] == "CUpti_ActivityMemcpy6" and d["AORTA_MEMSET_T"] == "CUpti_ActivityMemset4"
    assert d["AORTA_HAS_TS_CALLBACK"] == "1" and d["AORTA_INCLUDE_META"] == "1"


def test_headers_without_a_kernel_record_are_exit_3(isolated: Path) -> None:
    inc = isolated / "inc"
    fake_cupti(inc, isolated / "lib")
    (inc / "cupti_activity.h").write_text("/* nothing */\n")
    (inc / "cupti_activity_deprecated.h").unlink()
    c = build.CuptiInstall(inc, isolated / "lib" / "libcupti.so.13", (), 130000, "test")
    with pytest.raises(EnvironmentProblem) as e:
        build.defines_for(c)
    assert e.value.exit_code == 3 and "CUpti_ActivityKernelN" in e.value.message


# -- the real collector, against real CUPTI headers --------------------------------------------
def real_cupti_root() -> Path | None:
    """Where the nvidia-cuda-cupti/-runtime/-crt wheels are unpacked (scripts/test.sh)."""
    cands = [os.environ.get("AORTA_TEST_CUPTI_ROOT"), str(REPO / ".venv" / "cupti-headers" / "nvidia" / "cu13"),
             "/tmp/cupti/x/nvidia/cu13"]
    for c in cands:
        if c and (Path(c) / "include" / "cupti.h").is_file() and (Path(c) / "include" / "crt").is_dir():
            return Path(c)
    return None


@pytest.mark.skipif(real_cupti_root() is None,
                    reason="no real CUPTI headers: scripts/test.sh installs nvidia-cuda-cupti, "
                           "nvidia-cuda-runtime and nvidia-cuda-crt into .venv/cupti-headers")
@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_real_collector_builds_exports_its_entry_point_and_is_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = real_cupti_root()
    monkeypatch.setenv("AORTA_CUPTI_ROOT", str(root))
    first = build.build_collector(cache=tmp_path)
    assert not first.cached and first.library.is_file()
    assert first.cupti.include == root / "include" and first.cupti.version >= 130000
    assert first.defines["AORTA_KERNEL_T"].startswith("CUpti_ActivityKernel")
    # issue 34: these headers (CUPTI 13.5) have latency timestamps and cuptiSubscribe_v2, so the
    # real compile covers the default mode's code and the multiple-subscriber request
    assert first.defines["AORTA_HAS_LATENCY_TS"] == "1" and first.defines["AORTA_HAS_SUBSCRIBE_V2"] == "1"
    nm = shutil.which("nm")
    if nm:
        syms = subprocess.run([nm, "-D", "--defined-only", str(first.library)], capture_output=True,
                              text=True, check=True).stdout.split()
        assert "InitializeInjection" in syms
        assert "ring_push" not in syms  # -fvisibility=hidden: only the entry point is exported
    # it loads (libcupti through its rpath) and has the entry point; calling it needs a GPU
    lib = ctypes.CDLL(str(first.library))
    assert hasattr(lib, "InitializeInjection")
    # the in-process session's detach (queue run --ebpf-trace): a collector CUDA never started
    # has nothing to give back, and says so (0), touching no CUPTI call
    assert "aorta_cupti_detach" in (syms if nm else ["aorta_cupti_detach"])
    assert lib.aorta_cupti_detach() == 0
    again = build.build_collector(cache=tmp_path)
    assert again.cached and again.library == first.library
    assert first.library.parent.name.startswith(f"cupti{first.cupti.version}-")


@pytest.mark.skipif(real_cupti_root() is None, reason="no real CUPTI headers (scripts/test.sh installs them)")
def test_the_launch_cbid_table_matches_the_real_header() -> None:
    """records.DRIVER_LAUNCH_CBIDS names the collector's launch callbacks (launches from the
    collector, issue 24): every number is the header's CUPTI_DRIVER_TRACE_CBID_<name>."""
    import re

    from aorta_tui.trace.device.records import DRIVER_LAUNCH_CBIDS

    text = (real_cupti_root() / "include" / "cupti_driver_cbid.h").read_text()
    header = {m.group(1): int(m.group(2)) for m in re.finditer(r"CUPTI_DRIVER_TRACE_CBID_(\w+)\s*=\s*(\d+)", text)}
    assert {name: header[name] for name in DRIVER_LAUNCH_CBIDS.values()} == {
        n: c for c, n in DRIVER_LAUNCH_CBIDS.items()}
