"""The HIP collector (aorta_tui/trace/device/rocprof_collector.c, rocprof_build.py): its record
layout against records.py, its compile against the real rocprofiler-sdk headers, finding
rocprofiler-sdk with every failure a located exit 3 and the fix, and DeviceSide's ROCm branch.

Nothing here runs on AMD hardware and nothing fakes it: the collector has never run on an AMD GPU
(`trace info` and docs/tracing.md say so). The real-header tests need an installed rocprofiler-sdk
(ROCm 6.2+: /opt/rocm) or AORTA_ROCPROFILER_ROOT pointing at a prefix with include/rocprofiler-sdk
(version.h included), include/hsa and include/hsakmt; no package registry ships those headers, so
where none is found they skip, saying how to get them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aorta_tui.core.errors import EnvironmentProblem, ExitCode
from aorta_tui.trace.device import records, rocprof_build
from aorta_tui.trace.device.attach import DeviceSide
from aorta_tui.trace.device.join import DispatchJoin
from aorta_tui.trace.device.records import DOMAIN_HIP, Rec, pack, parse
from aorta_tui.trace.probes.cuda import DEVICE_METRICS

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "aorta_tui" / "trace" / "device" / "rocprof_collector.c"
CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (apt-get install gcc)")


def real_rocprofiler() -> rocprof_build.RocprofilerInstall | None:
    """Real headers: $AORTA_ROCPROFILER_ROOT, $ROCM_PATH or /opt/rocm (the collector's own search)."""
    try:
        return rocprof_build.find_rocprofiler(need_library=False)
    except EnvironmentProblem:
        return None


NO_HEADERS = ("no rocprofiler-sdk headers: install ROCm 6.2+ with rocprofiler-sdk (/opt/rocm), or point "
              "AORTA_ROCPROFILER_ROOT at a prefix with include/rocprofiler-sdk (an installed version.h), "
              "include/hsa (ROCR-Runtime) and include/hsakmt; no package registry ships them")
needs_headers = pytest.mark.skipif(real_rocprofiler() is None, reason=NO_HEADERS)


# -- the record layout, from the C side ------------------------------------------------------------
@needs_cc
def test_c_record_layout_matches_records_py(tmp_path: Path) -> None:
    """A tiny program compiled from the collector itself (-DAORTA_LAYOUT_PROBE: the record-format
    block and a main() printing its offsetof/sizeof; no rocprofiler-sdk headers needed)."""
    exe = tmp_path / "layout"
    subprocess.run([CC, "-std=gnu11", "-Wall", "-Werror", "-DAORTA_LAYOUT_PROBE", str(SOURCE), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    c = json.loads(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)
    assert c["size"] == records.RECORD_BYTES == records.DTYPE.itemsize
    for name in ("magic", "version", "type", "pid", "f"):
        dt, offset = records.DTYPE.fields[name][:2]
        assert c[name] == [offset, dt.itemsize], name
    assert (c["MAGIC"], c["VERSION"], c["DOMAIN_HIP"]) == (records.MAGIC, records.VERSION, DOMAIN_HIP)
    assert c["types"] == {r.name: int(r) for r in Rec}
    # every place the collector reports an error from has a name in records.py
    assert {int(k) for k in c["where"]} <= set(records.ERROR_WHERE)
    assert {int(k) for k in c["where"]} - {6} == set(records.ROCPROFILER_WHERE)


# -- the real headers --------------------------------------------------------------------------------
@needs_cc
@needs_headers
def test_collector_compiles_against_the_real_headers_without_a_warning(tmp_path: Path) -> None:
    inst = real_rocprofiler()
    assert inst is not None
    obj = tmp_path / "rocprof_collector.o"
    cmd = rocprof_build.compile_command(CC, inst, SOURCE, obj, link=False)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr  # -Wall -Wextra, silent
    nm = shutil.which("nm")
    if nm:
        syms = subprocess.run([nm, "-g", str(obj)], capture_output=True, text=True, check=True).stdout.split("\n")
        defined = {ln.split()[-1] for ln in syms if " T " in ln}
        undefined = {ln.split()[-1] for ln in syms if ln.strip().startswith("U ")}
        assert defined == {"rocprofiler_configure"}  # the tool entry point, nothing else exported
        assert {s for s in undefined if s.startswith("rocprofiler_")} >= {
            "rocprofiler_create_context", "rocprofiler_create_buffer", "rocprofiler_flush_buffer",
            "rocprofiler_configure_buffer_tracing_service", "rocprofiler_get_timestamp"}


@needs_cc
@needs_headers
def test_status_names_in_records_py_are_the_headers_values(tmp_path: Path) -> None:
    """rocprofiler_status_t values from the real fwd.h (compiled, run: enums need no library)."""
    inst = real_rocprofiler()
    assert inst is not None
    names = {code: text.split()[0] for code, text in records.ROCPROFILER_STATUSES.items()}
    prog = tmp_path / "status.c"
    prog.write_text("#include <stdio.h>\n#include <rocprofiler-sdk/fwd.h>\nint main(void){\n"
                    + "".join(f'printf("%d\\n", (int){n});\n' for n in names.values()) + "return 0;}\n")
    exe = tmp_path / "status"
    subprocess.run([CC, "-std=gnu11", f"-I{inst.include}", str(prog), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    got = [int(x) for x in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    assert got == list(names)


# -- finding rocprofiler-sdk: fake prefixes under tmp_path, this machine's /opt/rocm left out --------
def fake_prefix(root: Path, *, version: tuple[int, int, int] = (0, 6, 0), version_h: bool = True,
                hsa: bool = True, hsakmt: bool = True, lib: bool = True) -> Path:
    inc = root / "include"
    sdk = inc / "rocprofiler-sdk"
    sdk.mkdir(parents=True)
    for name in ("buffer_tracing.h", "registration.h"):
        (sdk / name).write_text("/* test tree */\n")
    if version_h:
        (sdk / "version.h").write_text("".join(f"#define ROCPROFILER_VERSION_{k}   {v}\n"
                                               for k, v in zip(("MAJOR", "MINOR", "PATCH"), version, strict=True)))
    else:
        (sdk / "version.h.in").write_text("#define ROCPROFILER_VERSION_MAJOR @PROJECT_VERSION_MAJOR@\n")
    for flag, rel in ((hsa, "hsa/hsa_amd_tool.h"), (hsakmt, "hsakmt/hsakmttypes.h")):
        if flag:
            (inc / rel).parent.mkdir(parents=True, exist_ok=True)
            (inc / rel).write_text("/* test tree */\n")
    if lib:
        (root / "lib").mkdir()
        (root / "lib" / "librocprofiler-sdk.so.0").write_bytes(b"\x7fELF test")
    return root


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in ("AORTA_ROCPROFILER_ROOT", "ROCM_PATH", "ROCP_TOOL_LIBRARIES", "AORTA_ROCPROF_COLLECTOR"):
        monkeypatch.delenv(var, raising=False)
    real = rocprof_build._prefixes
    monkeypatch.setattr(rocprof_build, "_prefixes",
                        lambda: [p for p in real() if str(p[0]).startswith(str(tmp_path))])
    return tmp_path


def test_an_installed_prefix_is_found_with_its_version(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake_prefix(isolated / "rocm", version=(0, 6, 2))
    monkeypatch.setenv("AORTA_ROCPROFILER_ROOT", str(root))
    inst = rocprof_build.find_rocprofiler()
    assert (inst.version, inst.version_string) == (602, "0.6.2")
    assert inst.lib == root / "lib" / "librocprofiler-sdk.so.0" and "AORTA_ROCPROFILER_ROOT" in inst.origin


@pytest.mark.parametrize(("kw", "says"), [
    ({"version_h": False}, "rocprofiler-sdk/version.h (rocprofiler-sdk (an installed one: a source checkout has only version.h.in))"),
    ({"hsa": False}, "hsa/hsa_amd_tool.h (the HSA runtime headers"),
    ({"hsakmt": False}, "hsakmt/hsakmttypes.h"),
    ({"lib": False}, "headers of rocprofiler-sdk 0.6.0 but no lib/librocprofiler-sdk.so"),
])
def test_each_missing_part_is_exit_3_naming_it_and_the_fix(isolated: Path, monkeypatch: pytest.MonkeyPatch,
                                                           kw: dict, says: str) -> None:
    root = fake_prefix(isolated / "rocm", **kw)
    monkeypatch.setenv("AORTA_ROCPROFILER_ROOT", str(root))
    with pytest.raises(EnvironmentProblem) as e:
        rocprof_build.find_rocprofiler()
    assert e.value.exit_code == ExitCode.ENVIRONMENT == 3
    assert f"$AORTA_ROCPROFILER_ROOT={root}: " in e.value.message and says in e.value.message
    assert e.value.hint == rocprof_build.FIX and "no package registry ships them" in e.value.hint
    info = rocprof_build.describe_availability()
    assert info["available"] is False and info["status"] == f"not available: {e.value.message}"
    assert info["hardware"] == "never run on AMD hardware"


def test_headers_only_serve_compile_checks(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AORTA_ROCPROFILER_ROOT", str(fake_prefix(isolated / "rocm", lib=False)))
    assert rocprof_build.find_rocprofiler(need_library=False).lib is None


def test_a_root_that_is_not_there_is_named(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AORTA_ROCPROFILER_ROOT", str(isolated / "gone"))
    with pytest.raises(EnvironmentProblem) as e:
        rocprof_build.find_rocprofiler()
    assert f"$AORTA_ROCPROFILER_ROOT={isolated / 'gone'}: no such folder" in e.value.message


def test_no_rocm_at_all(isolated: Path) -> None:
    with pytest.raises(EnvironmentProblem) as e:
        rocprof_build.find_rocprofiler()
    assert e.value.exit_code == 3 and "no ROCm installation (/opt/rocm)" in e.value.message


@needs_cc
def test_trace_info_says_built_from_source_never_run(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AORTA_ROCPROFILER_ROOT", str(fake_prefix(isolated / "rocm", version=(0, 6, 0))))
    from aorta_tui.trace.capability import device_timestamps_info

    hip = device_timestamps_info()["hip"]
    assert hip["available"] is True
    assert hip["status"] == "built from source against rocprofiler-sdk 0.6.0, never run on AMD hardware"
    assert "--device-timestamps on" in hip["needs"]


@needs_cc
def test_trace_info_text_prints_the_hip_status(tmp_path: Path) -> None:
    root = fake_prefix(tmp_path / "rocm", version=(0, 6, 0))
    r = subprocess.run([sys.executable, "-m", "aorta_tui", "trace", "info"], capture_output=True, text=True,
                       timeout=90, env={**os.environ, "AORTA_ROCPROFILER_ROOT": str(root)})
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("GPU start times", 1)[1]  # the probe sets' own "hip" line comes before
    line = next(ln for ln in section.splitlines() if ln.strip().startswith("hip "))
    assert line.strip().endswith("built from source against rocprofiler-sdk 0.6.0, never run on AMD hardware")


def test_a_failed_build_is_exit_3_with_the_compiler_lines(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test tree's headers are empty, so the real compile fails: the message quotes it."""
    if CC is None:
        pytest.skip("no C compiler (apt-get install gcc)")
    monkeypatch.setenv("AORTA_ROCPROFILER_ROOT", str(fake_prefix(isolated / "rocm")))
    with pytest.raises(EnvironmentProblem) as e:
        rocprof_build.build_rocprof_collector(cache=isolated / "cache")
    assert e.value.exit_code == 3
    assert e.value.message.startswith("building the rocprofiler-sdk collector against $AORTA_ROCPROFILER_ROOT=")
    assert "(rocprofiler-sdk 0.6.0) failed:" in e.value.message and "error" in e.value.message
    assert "--device-timestamps off" in (e.value.hint or "")
    assert not list((isolated / "cache").rglob("*.so"))  # nothing half-built is left to load


# -- DeviceSide, ROCm branch ---------------------------------------------------------------------------
def hip_side(mode: str) -> DeviceSide:
    return DeviceSide(mode, probe_set="hip", device_metrics=DEVICE_METRICS)


def test_auto_never_loads_a_collector_that_has_not_run_on_hardware(isolated: Path) -> None:
    s = hip_side("auto")
    assert s.vendor == "hip" and s.prepare(["./hip_prog"]) == {} and not s.active
    assert "never run on AMD hardware" in (s.reason or "") and "--device-timestamps on" in (s.fix or "")
    assert s.to_dict()["hardware"] == "never run on AMD hardware"


def test_on_without_rocprofiler_is_exit_3_with_the_fix(isolated: Path) -> None:
    with pytest.raises(EnvironmentProblem) as e:
        hip_side("on").prepare(["./hip_prog"])
    assert e.value.exit_code == 3 and "no rocprofiler-sdk found" in e.value.message
    assert "AORTA_ROCPROFILER_ROOT" in (e.value.hint or "")


def test_on_gives_the_program_rocp_tool_libraries_and_a_fifo(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = isolated / "libaorta_rocprof.so"
    lib.write_bytes(b"\x7fELF")  # never loaded here: only its path travels
    monkeypatch.setenv("AORTA_ROCPROF_COLLECTOR", str(lib))
    s = hip_side("on")
    env = s.prepare(["./hip_prog"])
    try:
        assert env["ROCP_TOOL_LIBRARIES"] == str(lib) and "CUDA_INJECTION64_PATH" not in env
        fifo = Path(env["AORTA_ROCPROF_FIFO"])
        assert fifo.exists() and oct(fifo.parent.stat().st_mode & 0o777) == "0o700"
        d = s.to_dict()
        assert d["available"] is True and d["collector"]["from"] == "$AORTA_ROCPROF_COLLECTOR"
        assert "HIP runtime" in d["warning"]  # no record came: said in HIP terms
    finally:
        s.stop()


def test_another_rocprofiler_tool_and_a_pid_are_left_alone(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = hip_side("on")
    with pytest.raises(EnvironmentProblem) as e:
        s.prepare(None)
    assert "ROCP_TOOL_LIBRARIES" in e.value.message and e.value.exit_code == 3
    monkeypatch.setenv("ROCP_TOOL_LIBRARIES", "/opt/rocm/lib/rocprofiler-sdk/librocprofiler-sdk-tool.so")
    s = hip_side("auto")
    assert s.prepare(["./hip_prog"]) == {} and "already set" in (s.reason or "")


def test_a_missing_prebuilt_collector_is_exit_3(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AORTA_ROCPROF_COLLECTOR", str(isolated / "gone.so"))
    with pytest.raises(EnvironmentProblem) as e:
        hip_side("on").prepare(["./hip_prog"])
    assert "AORTA_ROCPROF_COLLECTOR=" in e.value.message and "libaorta_rocprof.so" in (e.value.hint or "")


# -- the join, on records in the collector's HIP shape (a recorded CPU-side fixture, not hardware) ---
def test_hip_launch_records_join_the_launch_whose_call_they_are_inside() -> None:
    """A HIP API record's start is taken inside the probed hipLaunchKernel (rocprofiler-sdk's
    wrapper runs after the exported entry point), so it takes the thread's last eBPF launch at or
    before it; its ERROR records are named with rocprofiler_status_t names."""
    got: dict[str, list[int]] = {}
    j = DispatchJoin(lambda name, ts, pid, key, value: got.setdefault(name, []).extend(value.tolist()))
    t0, pid, tid = 10_000_000_000, 77, 78
    j.add_launches(np.array([t0, t0 + 10_000]), np.array([pid, pid]), np.array([tid, tid]), np.array([0xA, 0xA]))
    j.add_heartbeat(t0 + 1_000_000)
    rocp_ahead = 3_000_000  # rocprofiler's clock (CLOCK_BOOTTIME) ahead of CLOCK_MONOTONIC
    data = (pack(Rec.HELLO, pid, 602, 100, 1 << 20, 0, DOMAIN_HIP, 602, 8)
            + pack(Rec.CLOCK, pid, t0 - 5_000, t0 - 5_000 + 100 + rocp_ahead, t0 - 5_000 + 200)
            + pack(Rec.LAUNCH, pid, tid, 41, t0 + 900, 0, 1 | (DOMAIN_HIP << 32))
            + pack(Rec.LAUNCH, pid, tid, 42, t0 + 10_900, 0, 1 | (DOMAIN_HIP << 32))
            + pack(Rec.KERNEL, pid, 41, t0 + 50_000 + rocp_ahead, t0 + 60_000 + rocp_ahead, 0, 0x1234, 0, 5)
            + pack(Rec.KERNEL, pid, 42, t0 + 70_000 + rocp_ahead, t0 + 71_000 + rocp_ahead, 0, 0x1234, 0, 5)
            + pack(Rec.ERROR, pid, 12, 13))
    j.add_device(parse(data))
    j.finish()
    assert got["launch_to_start"] == [50_000, 60_000]
    assert sorted(got["kernel_duration"]) == [1_000, 10_000]
    assert j.counts["kernels_joined"] == 2 and j.counts["device_launches_without_ebpf"] == 0
    assert j.procs[pid].errors == ["configuring kernel-dispatch tracing failed: ROCPROFILER_STATUS_ERROR_"
                                   "CONTEXT_CONFLICT (another tool's context traces the same service)"]
