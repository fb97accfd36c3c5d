"""CUDA section: driver API version, runtime, cuBLAS, cuBLASLt, cuDNN, NCCL, CUPTI, NVRTC
(path, content hash, version from the library's own API) and nvcc."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from aorta_tui.core.cuda_paths import toolkit_lib_dirs
from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.capture import libraries as L
from aorta_tui.envsnap.fields import Leaf

# section key -> library file stem
CUDA_LIBRARIES = {
    "runtime": "libcudart",
    "cublas": "libcublas",
    "cublaslt": "libcublasLt",
    "cudnn": "libcudnn",
    "nccl": "libnccl",
    "cupti": "libcupti",
    "nvrtc": "libnvrtc",
}
# section key -> libprobe reader name
_READER = {"runtime": "cudart", "cublaslt": "cublaslt"}


def cuda_home() -> str | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var) and os.path.isdir(os.environ[var]):
            return os.environ[var]
    return "/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else None


def search_dirs(ldconfig: list[str]) -> tuple[list[str], str]:
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += L.wheel_lib_dirs(("nvidia/*/lib", "nvidia/*/lib64", "nvidia/cu*/lib"))
    home = cuda_home()
    if home:  # the trace engine's CUPTI finder reads the same list
        dirs += toolkit_lib_dirs(Path(home))
    dirs += ldconfig
    searched = "LD_LIBRARY_PATH, pip nvidia/*/lib, $CUDA_HOME or /usr/local/cuda, ldconfig cache"
    return list(dict.fromkeys(dirs)), searched


def discover(ldconfig: list[str]) -> tuple[dict[str, dict[str, Leaf]], dict[str, str]]:
    """Library entries without versions, and {libprobe reader: path} to ask for versions."""
    dirs, searched = search_dirs(ldconfig)
    entries: dict[str, dict[str, Leaf]] = {}
    to_probe: dict[str, str] = {}
    for key, stem in CUDA_LIBRARIES.items():
        entry, path = L.library_entry(stem, dirs, searched)
        entries[key] = entry
        if path:
            to_probe[_READER.get(key, key)] = path
    return entries, to_probe


def finish(entries: dict[str, dict[str, Leaf]], probe: dict[str, Any], probe_failure: Leaf | None,
           nvidia_driver: bool, nvcc: Leaf) -> dict[str, Any]:
    out: dict[str, Any] = {}
    libs = probe.get("libs", {})
    for key, entry in entries.items():
        reader = _READER.get(key, key)
        entry = dict(entry)
        if entry["path"]["state"] != "ok":
            entry["version"] = dict(entry["path"])
        elif probe_failure is not None:
            entry["version"] = dict(probe_failure)
        else:
            entry["version"] = _version_leaf(libs.get(reader), entry["path"]["value"])
        out[key] = entry
    drv = libs.get("cuda_driver")
    if drv is not None:
        out["driver_api_version"] = _version_leaf(drv, "libcuda.so.1")
    elif probe_failure is not None and nvidia_driver:
        out["driver_api_version"] = dict(probe_failure)
    else:
        out["driver_api_version"] = F.not_applicable("no NVIDIA driver (libcuda.so.1) on this machine",
                                                     "api:cuDriverGetVersion")
    out["nvcc"] = nvcc
    home = cuda_home()
    out["cuda_home"] = (F.ok(os.path.realpath(home), "env:CUDA_HOME|CUDA_PATH or /usr/local/cuda") if home
                        else F.not_applicable("no $CUDA_HOME, $CUDA_PATH or /usr/local/cuda",
                                              "env:CUDA_HOME"))
    return out


def _version_leaf(result: dict[str, Any] | None, path: str) -> Leaf:
    source = f"api:{(result or {}).get('api', 'version entry point')} ({os.path.basename(path)})"
    if result is None:
        return F.unknown("the library was not asked for its version", source)
    if "error" in result:
        return F.error(result["error"], source)
    version = result.get("version")
    if version is None and result.get("code") is not None:
        version = result["code"]
    return F.ok(version, source) if version is not None else F.unknown("no version returned", source)


def nvcc_version(timeout_s: float) -> Leaf:
    exe = "nvcc"
    home = cuda_home()
    if home and os.path.exists(f"{home}/bin/nvcc"):
        exe = f"{home}/bin/nvcc"
    result = F.run_command([exe, "--version"], timeout_s=timeout_s)
    if not result.ok:
        return result.leaf
    m = re.search(r"release ([\d.]+), V([\d.]+)", result.stdout)
    return F.ok(m.group(2) if m else result.stdout.strip().splitlines()[-1], result.leaf["source"])
