"""Capture a snapshot: every section in parallel, each bounded by one deadline.

The torch section and the library-version readings run in child processes started first
(``torch_probe.py``, ``libprobe.py``), so the slowest part (``import torch``: 1-6 s) overlaps
the file reads and commands of the other sections, and a hanging library import is killed at
the deadline instead of hanging the probe.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aorta_tui import __version__
from aorta_tui.core import spawn_gate
from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.capture import cuda, driver, host, libraries, python_env, rocm
from aorta_tui.envsnap.capture.env_vars import capture_env_vars
from aorta_tui.envsnap.capture.gpus import DEVICE_KEYS, amd, detect_vendors, nvidia
from aorta_tui.envsnap.capture.torch_probe import failed_section
from aorta_tui.envsnap.doc import FORMAT, SCHEMA_VERSION, EnvSnapshot
from aorta_tui.envsnap.fields import Leaf

if TYPE_CHECKING:
    from aorta_tui.core.bytecode import BytecodePlan

_HERE = os.path.dirname(os.path.abspath(__file__))
_LATE = "the {} section failed or did not finish before the deadline"
_T = TypeVar("_T")


class _Child:
    """A helper script run in its own process group with a deadline; result is parsed JSON."""

    def __init__(self, script: str, args: list[str], env: dict[str, str] | None = None) -> None:
        self.name = script
        self.started = time.perf_counter()
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_error: str | None = None
        try:
            self.proc = spawn_gate.popen(
                # -S: libprobe needs only the standard library; skipping site saves ~40 ms.
                [sys.executable, *(["-S"] if script == "libprobe.py" else []),
                 os.path.join(_HERE, script), *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, env=env,
            )
        except OSError as exc:
            self.start_error = f"could not start {script}: {exc}"

    def result(self, deadline: float) -> tuple[dict[str, Any] | None, Leaf | None]:
        source = f"cmd:{os.path.basename(sys.executable)} {self.name}"
        if self.proc is None:
            return None, F.error(self.start_error or "not started", source)
        try:
            out, err = self.proc.communicate(timeout=max(deadline - time.monotonic(), 0.05))
        except subprocess.TimeoutExpired:
            F.kill_group(self.proc)
            waited = time.perf_counter() - self.started
            return None, F.error(f"{self.name} did not finish within {waited:.1f} s (killed)", source)
        try:
            data = json.loads(out.decode("utf-8", "replace") or "null")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            return None, F.error(
                f"{self.name} exited {self.proc.returncode} without a result: {tail[0][:200]}", source)
        return data, None


def capture_snapshot(*, timeout_s: float = 20.0, include_torch: bool = True,
                     bytecode: BytecodePlan | None = None) -> EnvSnapshot:
    """Capture this process's environment. Never raises, never outlives ``timeout_s`` by much.

    ``bytecode``: a :class:`aorta_tui.core.bytecode.BytecodePlan` for the helper processes
    (``import torch`` in one of them is most of the capture's time); None: they inherit this
    process's settings. The snapshot records which was used (``python.bytecode``). The
    sections build plain leaf objects (``fields.py``); the one reader types them, so what the
    capture writes is what every reader takes (``to_json()`` is the file)."""
    try:
        return EnvSnapshot.from_dict(_capture(timeout_s, include_torch, bytecode),
                                     where="the captured snapshot")
    except Exception as exc:  # a bug in a section must still leave a valid snapshot
        return _minimal_failure(f"{type(exc).__name__}: {exc}")


def _capture(timeout_s: float, include_torch: bool,
             bytecode: BytecodePlan | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    captured_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    child_env = bytecode.apply(os.environ) if bytecode is not None and bytecode.active else None
    torch_child = _Child("torch_probe.py", [], child_env) if include_torch else None
    vendors = detect_vendors()
    cmd_timeout = max(min(timeout_s / 2, 10.0), 0.5)
    # The sections that need nothing from the library discovery start first, so they run while
    # this thread reads ldconfig and the CUDA/ROCm trees.
    f_host = _Section.start(host.capture_host, cmd_timeout)
    f_nv = _Section.start(nvidia.capture_nvidia_gpus, cmd_timeout) if "nvidia" in vendors else None
    f_amd = _Section.start(amd.capture_amd_gpus) if "amd" in vendors else None
    f_driver = _Section.start(driver.capture_driver, vendors)
    f_python = _Section.start(python_env.capture_python)
    f_nvcc = _Section.start(cuda.nvcc_version, cmd_timeout)

    ldconfig = libraries.ldconfig_dirs(cmd_timeout)
    cuda_entries, cuda_probe = cuda.discover(ldconfig)
    rocm_roots, rocm_entries, rocm_probe = rocm.discover(ldconfig)
    libs = {**cuda_probe, **rocm_probe}
    if "nvidia" in vendors:
        libs["cuda_driver"] = "libcuda.so.1"
    libs_request = {"libs": libs, "devices": "nvidia" in vendors}
    lib_child = _Child("libprobe.py", [json.dumps(libs_request)], child_env)

    lib_result, lib_failure = lib_child.result(deadline)
    lib_result = lib_result or {}
    gpus, gpu_status, gpu_status_notes = _collect_gpus(f_nv, f_amd, deadline, lib_result,
                                                       lib_failure)
    driver_section = _driver_section(f_driver, deadline, vendors, gpus, gpu_status,
                                     gpu_status_notes)
    gfx_leaf = _gfx_leaf(gpus, vendors)
    python_fields: dict[str, object] = (_get(f_python, deadline)
                                        or {"version": F.error(_LATE.format("python"), "")})

    snapshot: dict[str, Any] = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "host": _get(f_host, deadline) or {"kernel_release": F.error(_LATE.format("host"), "")},
        "gpus": gpus,
        "driver": driver_section,
        "cuda": cuda.finish(cuda_entries, lib_result, lib_failure, "nvidia" in vendors,
                            _get(f_nvcc, deadline) or F.error("nvcc timed out", "cmd:nvcc")),
        "rocm": rocm.finish(rocm_roots, rocm_entries, lib_result, lib_failure, gfx_leaf),
        "python": {**python_fields, "bytecode": _bytecode_leaf(bytecode)},
        "env_vars": capture_env_vars(),
    }

    if torch_child is None:
        snapshot["torch"] = failed_section(
            F.not_applicable("torch capture skipped (include_torch=False / --no-torch)", ""))
    else:
        data, failure = torch_child.result(deadline)
        snapshot["torch"] = data if data is not None else failed_section(failure or F.error("no result", ""))
    snapshot["probe"] = _probe_meta(snapshot, captured_at, time.perf_counter() - t0, timeout_s, include_torch)
    return snapshot


def _collect_gpus(f_nv: _Section | None, f_amd: _Section | None, deadline: float,
                  lib_result: dict[str, Any], lib_failure: Leaf | None,
                  ) -> tuple[list[dict[str, Leaf]], list[Leaf], list[Leaf]]:
    """Every GPU (NVIDIA first, then AMD) with an index and every device key, the per-vendor
    query statuses, and the failures that a fallback covered."""
    gpus: list[dict[str, Leaf]] = []
    gpu_status: list[Leaf] = []
    gpu_status_notes: list[Leaf] = []  # failures that a fallback covered
    if f_nv is not None:
        devs, status, driver_section_note = _nvidia_gpus(f_nv, deadline, lib_result, lib_failure)
        gpus += devs
        gpu_status.append(status)
        if driver_section_note is not None:
            gpu_status_notes.append(driver_section_note)
    if f_amd is not None:
        amd_gpus = _get(f_amd, deadline)
        gpus += amd_gpus[0] if amd_gpus else []
        gpu_status.append(amd_gpus[1] if amd_gpus else
                          F.error("reading KFD topology timed out", "file:/sys/class/kfd"))
    for i, d in enumerate(gpus):
        d["index"] = F.ok(i, d.get("index", {}).get("source", ""))
        for key in DEVICE_KEYS:
            d.setdefault(key, F.unknown("not reported by this vendor backend", ""))
    return gpus, gpu_status, gpu_status_notes


def _nvidia_gpus(f_nv: _Section, deadline: float, lib_result: dict[str, Any],
                 lib_failure: Leaf | None) -> tuple[list[dict[str, Leaf]], Leaf, Leaf | None]:
    """nvidia-smi's devices merged with the driver API's (or named by it when nvidia-smi
    failed); their status, and nvidia-smi's failure when the driver API covered it."""
    devs, status = _get(f_nv, deadline) or ([], None)
    status = status or F.error("nvidia-smi failed or did not finish", "cmd:nvidia-smi")
    api_devices = lib_result.get("cuda_devices") or {}
    if status["state"] != "ok" and api_devices.get("devices"):
        # No usable nvidia-smi: the driver API still names the devices.
        devs = nvidia.devices_from_driver_api(api_devices, status.get("reason", ""))
        driver_section_note = status
        status = F.ok(len(devs), "api:cuDeviceGetCount via libprobe")
    elif api_devices:
        nvidia.merge_driver_api_devices(devs, api_devices)
        driver_section_note = None
    else:
        for d in devs:
            d["compute_units"] = dict(lib_failure) if lib_failure else F.unknown(
                "the CUDA driver API was not asked", "")
        driver_section_note = None
    return devs, status, driver_section_note


def _driver_section(f_driver: _Section, deadline: float, vendors: list[str],
                    gpus: list[dict[str, Leaf]], gpu_status: list[Leaf],
                    gpu_status_notes: list[Leaf]) -> dict[str, Any]:
    """The driver section with the GPU count (unknown, not zero, when the query failed)."""
    driver_section = _get(f_driver, deadline) or {"vendors": F.error(_LATE.format("driver"), "")}
    failures = [s for s in gpu_status if s["state"] != "ok"]
    if not vendors:
        driver_section["gpu_count"] = F.not_applicable(
            "no GPU driver found: no /proc/driver/nvidia, no /dev/nvidiactl, no /sys/class/kfd",
            "file:/proc/driver/nvidia, /sys/class/kfd")
    elif failures and not gpus:
        driver_section["gpu_count"] = dict(failures[0])  # unknown, not zero
    else:
        driver_section["gpu_count"] = F.ok(len(gpus), "; ".join(s.get("source", "") for s in gpu_status))
    for status in failures + gpu_status_notes:
        driver_section["gpu_query_error"] = status
    return driver_section


def _gfx_leaf(gpus: list[dict[str, Leaf]], vendors: list[str]) -> Leaf:
    """The AMD GPUs' gfx architectures (not applicable without an AMD GPU)."""
    gfx = sorted({d["architecture"]["value"] for d in gpus
                  if d["vendor"]["value"] == "amd" and d["architecture"]["state"] == "ok"})
    return (F.ok(gfx, "file:/sys/class/kfd/kfd/topology/nodes/*/properties") if "amd" in vendors
            else F.not_applicable("no AMD GPU (no /sys/class/kfd)", "file:/sys/class/kfd"))


def _bytecode_leaf(bytecode: BytecodePlan | None) -> Leaf:
    """Which bytecode settings the capture's processes ran with: this interpreter's, and the
    cache its helpers were given (``--bytecode-cache``)."""
    from aorta_tui.core.bytecode import interpreter_settings

    value: dict[str, Any] = interpreter_settings()
    if bytecode is not None:
        value["helpers"] = {"mode": bytecode.mode, "cache": bytecode.prefix if bytecode.active else None,
                            "reason": bytecode.reason}
    return F.ok(value, "api:sys.flags.dont_write_bytecode, sys.pycache_prefix; core/bytecode.py")


class _Section(Generic[_T]):
    """A section running in a daemon thread: a read that blocks forever (a sysfs file of a hung
    GPU) costs its own fields at the deadline, never the probe, and never blocks exit."""

    def __init__(self, fn: Callable[..., _T], args: tuple[object, ...]) -> None:
        self.result: list[_T] = []  # its value, once it returned
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)

    @classmethod
    def start(cls, fn: Callable[..., _T], *args: object) -> _Section[_T]:
        section = cls(fn, args)
        section._thread.start()
        return section

    def _run(self, fn: Callable[..., _T], args: tuple[object, ...]) -> None:
        # a bug in one section (it raises): no result, its fields say "timed out or failed"
        with contextlib.suppress(Exception):
            self.result.append(fn(*args))


def _get(section: _Section[_T], deadline: float) -> _T | None:
    """The section's result; None when it failed or is still running at the deadline."""
    section._thread.join(timeout=max(deadline - time.monotonic(), 0.05))
    if section._thread.is_alive() or not section.result:
        return None
    return section.result[0]


def _probe_meta(snapshot: dict[str, Any], captured_at: str, duration: float, timeout_s: float,
                include_torch: bool) -> dict[str, Leaf]:
    from aorta_tui.envsnap.schema import iter_leaves

    needs_root = sorted(path for path, leaf in iter_leaves(snapshot) if leaf.get("needs_root"))
    counts = {s: 0 for s in F.STATES}
    for _, leaf in iter_leaves(snapshot):
        counts[leaf["state"]] = counts.get(leaf["state"], 0) + 1
    return {
        "captured_at": F.ok(captured_at, "api:datetime.now(utc)"),
        "duration_s": F.ok(round(duration, 3), "api:time.perf_counter"),
        "timeout_s": F.ok(timeout_s, "argument"),
        "torch_included": F.ok(include_torch, "argument"),
        "aorta_tui_version": F.ok(__version__, "api:aorta_tui.__version__"),
        "is_root": F.ok(os.geteuid() == 0, "api:os.geteuid"),
        "fields_needing_root": F.ok(needs_root, "leaves whose read was denied without root"),
        "state_counts": F.ok(counts, "count over all leaves"),
    }


def _minimal_failure(reason: str) -> EnvSnapshot:
    """Only the probe section, saying what broke. Written through ``to_json`` like every
    snapshot, so its keys are sorted now (the untyped writer wrote this one unsorted: the
    same keys and values, in another order)."""
    return EnvSnapshot.from_dict({
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "probe": {"captured_at": F.ok(datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "api:datetime"),
                  "internal_error": F.error(reason, "aorta_tui.envsnap.capture")},
    }, where="the captured snapshot")
