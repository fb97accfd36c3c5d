"""The torch section, captured in a child process so a broken or slow torch cannot hang the probe.

Run as a script by the orchestrator (``python torch_probe.py``): imports torch, reads its
build and its numerics/scheduling state without creating a CUDA context, finds the GPU
libraries torch actually mapped (``/proc/self/maps``) and asks each for its version through
``libprobe.py`` (a sibling script). Prints one JSON object ``{field: leaf}``. Standard library
plus torch only.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

Leaf = dict[str, Any]

_LOADED_LIBS = {
    "cudart": r"libcudart\.so",
    "cublas": r"libcublas\.so",
    "cublaslt": r"libcublasLt\.so",
    "cudnn": r"libcudnn\.so",
    "nccl": r"libnccl\.so",
    "cupti": r"libcupti\.so",
    "nvrtc": r"libnvrtc\.so",
    "hip": r"libamdhip64\.so",
    "rocblas": r"librocblas\.so",
    "hipblaslt": r"libhipblaslt\.so",
    "miopen": r"libMIOpen\.so",
    "rccl": r"librccl\.so",
}


# Every key the torch section has, so a skipped or failed capture keeps the same shape.
TORCH_KEYS = (
    "version", "git_commit", "debug_build", "cuda_build_version", "hip_build_version",
    "build_settings", "cxx11_abi", "num_threads", "float32_matmul_precision",
    "deterministic_algorithms", "deterministic_warn_only", "mkldnn_enabled", "import_seconds",
    "fp32_precision", "cuda_available", "device_count", "compiled_arch_list", "tf32_matmul",
    "tf32_cudnn", "fp16_reduced_precision_reduction", "bf16_reduced_precision_reduction",
    "cudnn_version", "cudnn_enabled", "cudnn_deterministic", "cudnn_benchmark", "nccl_version",
    "preferred_blas_library", "preferred_linalg_library", "sdpa_flash", "sdpa_mem_efficient",
    "sdpa_math", "sdpa_cudnn", "allocator_backend",
)


def failed_section(leaf: Leaf) -> dict[str, Any]:
    """The torch section when torch could not be captured: every key carries the same failure."""
    out: dict[str, Any] = {key: dict(leaf) for key in TORCH_KEYS}
    out["loaded_libraries"] = {name: {"path": dict(leaf), "version": dict(leaf)} for name in _LOADED_LIBS}
    return out


def _ok(value: object, source: str) -> Leaf:
    return {"value": value, "state": "ok", "source": source}


def _na(reason: str, source: str) -> Leaf:
    return {"value": None, "state": "not_applicable", "source": source, "reason": reason}


def _err(reason: str, source: str) -> Leaf:
    return {"value": None, "state": "error", "source": source, "reason": reason}


def _api(expr: str, fn: Callable[[], object]) -> Leaf:
    source = f"api:{expr}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation notices for the TF32 flags
            return _ok(fn(), source)
    except Exception as exc:
        return _err(f"{type(exc).__name__}: {str(exc)[:200]}", source)


def _build_settings(torch: ModuleType) -> Leaf:
    source = "api:torch.__config__.show()"
    try:
        text = torch.__config__.show()
    except Exception as exc:
        return _err(f"{type(exc).__name__}: {exc}", source)
    m = re.search(r"Build settings:\s*(.*?)(?:\n\s*\n|$)", text, re.S)
    if not m:
        return _err("no 'Build settings' block", source)
    settings: dict[str, str] = {}
    for item in re.findall(r"(\w+)=([^,]*)", m.group(1).replace("\n", " ")):
        key, value = item[0], item[1].strip()
        # Compiler flag strings and paths differ per build host; keep the USE_* switches
        # and versions, which decide what kernels exist.
        if key.startswith(("USE_", "BUILD_", "TORCH_VERSION", "CUDA_VERSION", "CUDNN_VERSION",
                           "HIP_VERSION", "BLAS_INFO", "LAPACK_INFO", "CXX_COMPILER_ID")):
            settings[key] = value
    return _ok(dict(sorted(settings.items())), source)


def _loaded_libraries() -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split(None, 5)[5].strip() for line in fh if len(line.split(None, 5)) == 6}
    except OSError:
        return found
    for name, pattern in _LOADED_LIBS.items():
        rx = re.compile(rf"/{pattern}[.\d]*$")
        hits = sorted(p for p in paths if rx.search(p))
        if hits:
            found[name] = hits[0]
    return found


def _loaded_library_fields(include_versions: bool) -> dict[str, Any]:
    """{library: {path, version}} for every known GPU library; unmapped ones not_applicable."""
    source = "file:/proc/self/maps"
    loaded = _loaded_libraries()
    reader: Callable[[str, str], dict[str, Any]] | None = None
    reader_error = None
    if include_versions and loaded:
        try:
            import libprobe  # sibling script: this file runs as a script from its directory

            reader = libprobe.version_of
        except Exception as exc:
            reader_error = f"libprobe unavailable: {exc}"
    out: dict[str, Any] = {}
    for name in _LOADED_LIBS:
        path = loaded.get(name)
        if path is None:
            na = _na("not mapped by this torch process after import", source)
            out[name] = {"path": na, "version": dict(na)}
            continue
        entry: dict[str, Leaf] = {"path": _ok(path, source)}
        if reader is None:
            entry["version"] = _err(reader_error or "versions not requested", "libprobe")
        else:
            res = reader(name, path)
            src = f"api:{res.get('api', 'version API')} (in the torch process)"
            if "error" in res:
                entry["version"] = _err(res["error"], src)
            else:
                entry["version"] = _ok(res.get("version", res.get("code")), src)
        out[name] = entry
    return out


def capture(include_versions: bool = True) -> dict[str, Leaf]:
    t0 = time.perf_counter()
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install raising anything
        reason = f"import torch failed: {type(exc).__name__}: {str(exc)[:200]}"
        state = "not_applicable" if isinstance(exc, ModuleNotFoundError) else "error"
        return failed_section({"value": None, "state": state, "source": "api:import torch",
                               "reason": reason})
    import_s = time.perf_counter() - t0
    cuda_build = getattr(torch.version, "cuda", None)
    hip_build = getattr(torch.version, "hip", None)
    gpu_build = bool(cuda_build or hip_build)
    no_gpu = "torch was built without CUDA/HIP"

    out = _build_fields(torch, cuda_build, hip_build, import_s)
    fp32 = getattr(torch.backends, "fp32_precision", None)
    out["fp32_precision"] = (
        _ok(fp32, "api:torch.backends.fp32_precision") if fp32 is not None
        else _na("this torch has no torch.backends.fp32_precision (added in 2.9)",
                 "api:torch.backends.fp32_precision")
    )
    if gpu_build:
        out.update(_gpu_fields(torch))
    else:
        for name in ("cuda_available", "device_count", "compiled_arch_list", "tf32_matmul",
                     "tf32_cudnn", "fp16_reduced_precision_reduction",
                     "bf16_reduced_precision_reduction", "cudnn_version", "cudnn_enabled",
                     "cudnn_deterministic", "cudnn_benchmark", "nccl_version",
                     "preferred_blas_library", "preferred_linalg_library", "sdpa_flash",
                     "sdpa_mem_efficient", "sdpa_math", "sdpa_cudnn", "allocator_backend"):
            out[name] = _na(no_gpu, "api:torch.version.cuda/hip")

    out["loaded_libraries"] = (
        _loaded_library_fields(include_versions) if gpu_build
        else {name: {"path": _na(no_gpu, "file:/proc/self/maps"),
                     "version": _na(no_gpu, "file:/proc/self/maps")} for name in _LOADED_LIBS})
    return out


def _build_fields(torch: ModuleType, cuda_build: str | None, hip_build: str | None,
                  import_s: float) -> dict[str, Leaf]:
    """What any torch build reports: version, build, threads, precision and determinism."""
    return {
        "version": _ok(torch.__version__, "api:torch.__version__"),
        "git_commit": _api("torch.version.git_version", lambda: torch.version.git_version),
        "debug_build": _api("torch.version.debug", lambda: bool(torch.version.debug)),
        "cuda_build_version": _ok(cuda_build, "api:torch.version.cuda") if cuda_build
        else _na("torch was built without CUDA", "api:torch.version.cuda"),
        "hip_build_version": _ok(hip_build, "api:torch.version.hip") if hip_build
        else _na("torch was built without HIP", "api:torch.version.hip"),
        "build_settings": _build_settings(torch),
        "cxx11_abi": _api("torch.compiled_with_cxx11_abi()", torch.compiled_with_cxx11_abi),
        "num_threads": _api("torch.get_num_threads()", torch.get_num_threads),
        "float32_matmul_precision": _api("torch.get_float32_matmul_precision()",
                                         torch.get_float32_matmul_precision),
        "deterministic_algorithms": _api("torch.are_deterministic_algorithms_enabled()",
                                         torch.are_deterministic_algorithms_enabled),
        "deterministic_warn_only": _api("torch.is_deterministic_algorithms_warn_only_enabled()",
                                        torch.is_deterministic_algorithms_warn_only_enabled),
        "mkldnn_enabled": _api("torch.backends.mkldnn.enabled",
                               lambda: bool(torch.backends.mkldnn.enabled)),
        "import_seconds": _ok(round(import_s, 3), "api:time.perf_counter around import torch"),
    }


def _gpu_fields(torch: ModuleType) -> dict[str, Leaf]:
    """What a CUDA/HIP build adds: devices, TF32 and reduced precision, cuDNN, NCCL, SDPA."""
    cuda = torch.backends.cuda
    return {
        "cuda_available": _api("torch.cuda.is_available()", torch.cuda.is_available),
        "device_count": _api("torch.cuda.device_count()", torch.cuda.device_count),
        "compiled_arch_list": _api("torch.cuda.get_arch_list()", torch.cuda.get_arch_list),
        "tf32_matmul": _api("torch.backends.cuda.matmul.allow_tf32",
                            lambda: bool(cuda.matmul.allow_tf32)),
        "tf32_cudnn": _api("torch.backends.cudnn.allow_tf32",
                           lambda: bool(torch.backends.cudnn.allow_tf32)),
        "fp16_reduced_precision_reduction": _api(
            "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
            lambda: bool(cuda.matmul.allow_fp16_reduced_precision_reduction)),
        "bf16_reduced_precision_reduction": _api(
            "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
            lambda: bool(cuda.matmul.allow_bf16_reduced_precision_reduction)),
        "cudnn_version": _api("torch.backends.cudnn.version()", torch.backends.cudnn.version),
        "cudnn_enabled": _api("torch.backends.cudnn.enabled",
                              lambda: bool(torch.backends.cudnn.enabled)),
        "cudnn_deterministic": _api("torch.backends.cudnn.deterministic",
                                    lambda: bool(torch.backends.cudnn.deterministic)),
        "cudnn_benchmark": _api("torch.backends.cudnn.benchmark",
                                lambda: bool(torch.backends.cudnn.benchmark)),
        "nccl_version": _api("torch.cuda.nccl.version()",
                             lambda: ".".join(map(str, torch.cuda.nccl.version()))),
        "preferred_blas_library": _api("torch.backends.cuda.preferred_blas_library()",
                                       lambda: str(cuda.preferred_blas_library()).split(".")[-1]),
        "preferred_linalg_library": _api(
            "torch.backends.cuda.preferred_linalg_library()",
            lambda: str(cuda.preferred_linalg_library()).split(".")[-1]),
        "sdpa_flash": _api("torch.backends.cuda.flash_sdp_enabled()", cuda.flash_sdp_enabled),
        "sdpa_mem_efficient": _api("torch.backends.cuda.mem_efficient_sdp_enabled()",
                                   cuda.mem_efficient_sdp_enabled),
        "sdpa_math": _api("torch.backends.cuda.math_sdp_enabled()", cuda.math_sdp_enabled),
        "sdpa_cudnn": _api("torch.backends.cuda.cudnn_sdp_enabled()", cuda.cudnn_sdp_enabled),
        "allocator_backend": _api("torch.cuda.get_allocator_backend()",
                                  torch.cuda.get_allocator_backend),
    }


def main() -> int:
    sys.stdout.write(json.dumps(capture()))
    sys.stdout.flush()
    # Skip interpreter teardown: some GPU stacks hang or crash in their atexit handlers.
    os._exit(0)


if __name__ == "__main__":
    main()
