"""Ask GPU libraries for their own version numbers, in a separate process.

Run as a script (``python libprobe.py '{"libs": {...}, "devices": true}'``) by the capture
orchestrator, and imported by ``torch_probe.py`` (also a script, same directory) for the
libraries torch actually loaded. Standard library only: it must start fast and must not
import the package. Loading a vendor library can crash or hang, which is why this runs in
a child process with a timeout and never in the probe itself.

Prints one JSON object: ``{"libs": {name: {"version": ..., "error": ...}}, "devices": [...]}``.
"""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Callable
from typing import Any


def _int_out(fn: Callable[..., int], *args: object) -> int | None:
    out = ctypes.c_int(0)
    rc = fn(*args, ctypes.byref(out))
    return out.value if rc == 0 else None


def _dotted(code: int, major_div: int, minor_div: int = 100) -> str:
    major, rest = divmod(code, major_div)
    minor, patch = divmod(rest, minor_div)
    return f"{major}.{minor}.{patch}"


def _cuda_like(code: int | None) -> str | None:
    # CUDA driver/runtime encode 1000*major + 10*minor (12040 -> 12.4).
    if code is None:
        return None
    return f"{code // 1000}.{(code % 1000) // 10}"


def version_of(name: str, path: str) -> dict[str, Any]:
    """Load ``path`` and call its version entry point; report the raw code and a dotted form."""
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    except OSError as exc:
        return {"error": f"dlopen failed: {exc}"}
    try:
        return _VERSION_READERS[name](lib)
    except AttributeError as exc:
        return {"error": f"version symbol missing: {exc}"}
    except Exception as exc:  # a library that misbehaves must not cost the other readings
        return {"error": f"{type(exc).__name__}: {exc}"}


def _cudart(lib: ctypes.CDLL) -> dict[str, Any]:
    code = _int_out(lib.cudaRuntimeGetVersion)
    return {"code": code, "version": _cuda_like(code), "api": "cudaRuntimeGetVersion"}


def _cuda_driver(lib: ctypes.CDLL) -> dict[str, Any]:
    code = _int_out(lib.cuDriverGetVersion)
    return {"code": code, "version": _cuda_like(code), "api": "cuDriverGetVersion"}


def _cublas(lib: ctypes.CDLL) -> dict[str, Any]:
    parts = []
    for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        value = _int_out(lib.cublasGetProperty, ctypes.c_int(prop))
        if value is None:
            return {"error": "cublasGetProperty failed"}
        parts.append(value)
    return {"version": ".".join(map(str, parts)), "api": "cublasGetProperty"}


def _size_t_version(symbol: str, major_div: int) -> Callable[[ctypes.CDLL], dict[str, Any]]:
    def read(lib: ctypes.CDLL) -> dict[str, Any]:
        fn = getattr(lib, symbol)
        fn.restype = ctypes.c_size_t
        code = int(fn())
        return {"code": code, "version": _dotted(code, major_div), "api": symbol}

    return read


def _cudnn(lib: ctypes.CDLL) -> dict[str, Any]:
    fn = lib.cudnnGetVersion
    fn.restype = ctypes.c_size_t
    code = int(fn())
    # cuDNN 9 encodes 10000*major + 100*minor + patch; cuDNN <= 8 used 1000*major.
    div = 10000 if code >= 90000 else 1000
    return {"code": code, "version": _dotted(code, div), "api": "cudnnGetVersion"}


def _nccl(lib: ctypes.CDLL) -> dict[str, Any]:
    code = _int_out(lib.ncclGetVersion)
    if code is None:
        return {"error": "ncclGetVersion failed"}
    div = 10000 if code >= 20900 else 1000  # NCCL >= 2.9 widened the minor field
    return {"code": code, "version": _dotted(code, div), "api": "ncclGetVersion"}


def _cupti(lib: ctypes.CDLL) -> dict[str, Any]:
    out = ctypes.c_uint32(0)
    rc = lib.cuptiGetVersion(ctypes.byref(out))
    return {"code": out.value if rc == 0 else None, "api": "cuptiGetVersion (CUPTI API version)"}


def _nvrtc(lib: ctypes.CDLL) -> dict[str, Any]:
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    rc = lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return {"version": f"{major.value}.{minor.value}" if rc == 0 else None, "api": "nvrtcVersion"}


def _hip(lib: ctypes.CDLL) -> dict[str, Any]:
    code = _int_out(lib.hipRuntimeGetVersion)
    # HIP encodes 10000000*major + 100000*minor + patch.
    if code is None:
        return {"error": "hipRuntimeGetVersion failed"}
    major, rest = divmod(code, 10_000_000)
    minor, patch = divmod(rest, 100_000)
    return {"code": code, "version": f"{major}.{minor}.{patch}", "api": "hipRuntimeGetVersion"}


def _rocblas(lib: ctypes.CDLL) -> dict[str, Any]:
    size = ctypes.c_size_t(0)
    if lib.rocblas_get_version_string_size(ctypes.byref(size)) != 0:
        return {"error": "rocblas_get_version_string_size failed"}
    buf = ctypes.create_string_buffer(size.value or 64)
    if lib.rocblas_get_version_string(buf, ctypes.c_size_t(len(buf))) != 0:
        return {"error": "rocblas_get_version_string failed"}
    return {"version": buf.value.decode(errors="replace"), "api": "rocblas_get_version_string"}


def _miopen(lib: ctypes.CDLL) -> dict[str, Any]:
    parts = [ctypes.c_size_t(0) for _ in range(3)]
    rc = lib.miopenGetVersion(*(ctypes.byref(p) for p in parts))
    if rc != 0:
        return {"error": "miopenGetVersion failed"}
    return {"version": ".".join(str(p.value) for p in parts), "api": "miopenGetVersion"}


_VERSION_READERS: dict[str, Callable[[ctypes.CDLL], dict[str, Any]]] = {
    "cudart": _cudart,
    "cuda_driver": _cuda_driver,
    "cublas": _cublas,
    "cublaslt": _size_t_version("cublasLtGetVersion", 10000),
    "cudnn": _cudnn,
    "nccl": _nccl,
    "rccl": _nccl,
    "cupti": _cupti,
    "nvrtc": _nvrtc,
    "hip": _hip,
    "rocblas": _rocblas,
    "miopen": _miopen,
}


def _optional_identity(cuda: ctypes.CDLL, dev: ctypes.c_int) -> tuple[str | None, int | None, str | None]:
    """Name, memory and UUID: only used when nvidia-smi is missing, so each may be absent
    (a symbol renamed in a driver release must not cost the SM counts)."""
    name = total = uuid = None
    try:
        buf = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGetName(buf, 256, dev) == 0:
            name = buf.value.decode(errors="replace")
    except AttributeError:
        pass
    try:
        size = ctypes.c_size_t(0)
        if cuda.cuDeviceTotalMem_v2(ctypes.byref(size), dev) == 0:
            total = size.value
    except AttributeError:
        pass
    for symbol in ("cuDeviceGetUuid_v2", "cuDeviceGetUuid"):
        fn = getattr(cuda, symbol, None)
        if fn is None:
            continue
        raw = ctypes.create_string_buffer(16)
        if fn(raw, dev) == 0:
            h = raw.raw.hex()  # formatted as nvidia-smi prints it, so the hashes agree
            uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            break
    return name, total, uuid


def cuda_devices() -> dict[str, Any]:
    """Per-device SM count and compute capability through the CUDA driver API (no context)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return {"error": f"libcuda.so.1 not loadable: {exc}"}
    rc = cuda.cuInit(0)
    if rc != 0:
        return {"error": f"cuInit failed with CUresult {rc}"}
    count = _int_out(cuda.cuDeviceGetCount)
    devices = []
    for ordinal in range(count or 0):
        dev = ctypes.c_int(0)
        if cuda.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            continue
        bus = ctypes.create_string_buffer(64)
        cuda.cuDeviceGetPCIBusId(bus, 64, dev)

        def attr(code: int, dev: ctypes.c_int = dev) -> int | None:
            out = ctypes.c_int(0)
            return out.value if cuda.cuDeviceGetAttribute(ctypes.byref(out), code, dev) == 0 else None

        name, total, uuid = _optional_identity(cuda, dev)
        devices.append({
            "ordinal": ordinal,
            "name": name,
            "memory_total_bytes": total,
            "uuid": uuid,
            "pci_bus_id": bus.value.decode(),
            "sm_count": attr(16),  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
            "cc_major": attr(75),
            "cc_minor": attr(76),
            "l2_cache_bytes": attr(38),
            "async_engines": attr(40),
        })
    return {"devices": devices, "api": "cuInit/cuDeviceGetAttribute"}


def main(argv: list[str]) -> int:
    request = json.loads(argv[1]) if len(argv) > 1 else {}
    result: dict[str, Any] = {"libs": {}}
    for name, path in sorted(request.get("libs", {}).items()):
        result["libs"][name] = version_of(name, path)
    if request.get("devices"):
        try:
            result["cuda_devices"] = cuda_devices()
        except Exception as exc:  # never let the device query cost the library versions
            result["cuda_devices"] = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
