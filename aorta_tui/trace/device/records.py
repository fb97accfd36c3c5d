"""The collector's wire format: fixed 64-byte records, parsed in bulk with numpy.

Mirrors ``aorta_rec`` in ``cupti_collector.c`` and ``rocprof_collector.c`` (little-endian x86-64): ``magic`` (0xA07A),
``version``, ``type``, ``pid``, then seven 64-bit fields whose meaning depends on the type.
A record with a wrong magic or version is counted as malformed, never trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

MAGIC = 0xA07A
VERSION = 1
RECORD_BYTES = 64

DTYPE = np.dtype([("magic", "<u2"), ("version", "u1"), ("type", "u1"), ("pid", "<u4"),
                  ("f", "<u8", (7,))])
assert DTYPE.itemsize == RECORD_BYTES


class Rec(IntEnum):
    HELLO = 1  # f0 CUPTI version, f1 flush period ms, f2 ring slots, f3 timestamp callback, f4 domains,
    #           f5 multiple subscribers allowed, f6 latency timestamps (1, or a CUptiResult)
    CLOCK = 2  # f0 CLOCK_MONOTONIC before, f1 cuptiGetTimestamp, f2 CLOCK_MONOTONIC after
    LAUNCH = 3  # f0 tid, f1 correlation id, f2 CLOCK_MONOTONIC at the callback, f3 stream, f4 cbid|domain<<32
    KERNEL = 4  # f0 correlation id, f1 start, f2 end, f3 device|context<<32, f4 CUPTI stream id, f5 graph id
    MEMCPY = 5  # as KERNEL; f5 bytes, f6 copy kind
    MEMSET = 6  # as KERNEL; f5 bytes
    STATS = 7  # f0 launches seen, f1 dropped (ring), f2 dropped (pipe), f3 dropped (CUPTI), f4 activity
    #           records, f5 buffers, f6 dropped (staging)
    ERROR = 8  # f0 CUptiResult, f1 where
    BYE = 9  # as STATS, from the exit handler
    KERNEL_LAT = 10  # f0 correlation id|graph id<<32, f1 start, f2 end, f3 device|context<<32,
    #                  f4 CUPTI stream id, f5 queued, f6 submitted (CUPTI clock; 0 unknown)
    STREAM = 11  # f0 CUPTI stream id (2**64-1: lookup refused), f1 stream handle, f2 context id,
    #              f3 CUptiResult of cuptiGetStreamIdEx
    POOL = 12  # f0 buffer requests refused (pool empty), f1 buffers ready, f2 buffer bytes,
    #            f3 latency timestamps: 1 on, else the CUptiResult that refused them,
    #            f4 activity kinds asked for (ACTIVITY_KIND_BITS; 0 from collectors that do not say)


# POOL f4: kernels always; memcpy/memset only with latency timestamps off or when asked for
# (AORTA_CUPTI_KINDS), since CUPTI 13.0 deadlocked a training loop with both on (docs/tracing.md)
ACTIVITY_KIND_BITS = ((1, "kernel"), (2, "memcpy"), (4, "memset"))


DOMAIN_DRIVER = 1  # CUPTI_CB_DOMAIN_DRIVER_API (cupti_callbacks.h)
DOMAIN_RUNTIME = 2  # CUPTI_CB_DOMAIN_RUNTIME_API
# rocprof_collector.c: a HIP launch API record (rocprofiler-sdk buffer tracing). Its start time is
# taken inside the probed hipLaunchKernel call, as a CUPTI driver callback is (join.py nesting).
DOMAIN_HIP = 3
INSIDE_CALL_DOMAINS = (DOMAIN_DRIVER, DOMAIN_HIP)

# CUPTI_DRIVER_TRACE_CBID_* of the launch entry points the collector's callback is enabled on
# (cupti_driver_cbid.h; checked against the real header by tests/trace/test_trace_device_build.py),
# named as the eBPF ``cuda`` set names them (probes/cuda.py LAUNCHES).
DRIVER_LAUNCH_CBIDS = {
    307: "cuLaunchKernel", 442: "cuLaunchKernel_ptsz", 652: "cuLaunchKernelEx",
    653: "cuLaunchKernelEx_ptsz", 477: "cuLaunchCooperativeKernel",
    478: "cuLaunchCooperativeKernel_ptsz", 514: "cuGraphLaunch", 515: "cuGraphLaunch_ptsz",
}

ERROR_WHERE = {1: "cuptiSubscribe", 2: "cuptiEnableCallback", 3: "cuptiActivityEnable",
               4: "cuptiActivityRegisterCallbacks", 5: "cuptiActivityFlushAll", 6: "opening the FIFO",
               7: "cuptiActivityEnableLatencyTimestamps", 8: "enabling the resource callbacks",
               9: "cuptiGetStreamIdEx",
               # rocprof_collector.c (codes 11 and up: rocprofiler_status_t, not CUptiResult)
               11: "rocprofiler_create_context", 12: "rocprofiler_create_buffer",
               13: "configuring kernel-dispatch tracing", 14: "configuring HIP API tracing",
               15: "configuring memory-copy tracing", 16: "creating the buffer callback thread",
               17: "rocprofiler_start_context", 18: "rocprofiler_flush_buffer",
               19: "finding the HIP launch operations by name (none of hipLaunchKernel, ... found)"}
ROCPROFILER_WHERE = range(11, 20)  # the steps above whose code is a rocprofiler_status_t
# The rocprofiler_status_t codes a user can act on (rocprofiler-sdk fwd.h; checked against the
# real headers by tests/trace/test_trace_device_rocprof_build.py).
ROCPROFILER_STATUSES = {
    1: "ROCPROFILER_STATUS_ERROR", 2: "ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND",
    3: "ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND", 4: "ROCPROFILER_STATUS_ERROR_KIND_NOT_FOUND",
    5: "ROCPROFILER_STATUS_ERROR_OPERATION_NOT_FOUND",
    12: "ROCPROFILER_STATUS_ERROR_CONTEXT_CONFLICT (another tool's context traces the same service)",
    13: "ROCPROFILER_STATUS_ERROR_BUFFER_BUSY",
    14: "ROCPROFILER_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED",
    15: "ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED", 16: "ROCPROFILER_STATUS_ERROR_NOT_IMPLEMENTED",
    17: "ROCPROFILER_STATUS_ERROR_INCOMPATIBLE_ABI (the collector was built against other headers)",
    18: "ROCPROFILER_STATUS_ERROR_INVALID_ARGUMENT", 20: "ROCPROFILER_STATUS_ERROR_FINALIZED",
}
# The CUptiResult codes a user can act on (cupti_result.h).
CUPTI_RESULTS = {
    1: "CUPTI_ERROR_INVALID_PARAMETER", 15: "CUPTI_ERROR_NOT_INITIALIZED",
    17: "CUPTI_ERROR_NOT_COMPATIBLE (this CUPTI does not match the driver)",
    22: "CUPTI_ERROR_NOT_SUPPORTED", 27: "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
    35: "CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE",
    39: "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (another profiler already uses CUPTI in "
        "this process)",
    999: "CUPTI_ERROR_UNKNOWN",
}


def describe_error(code: int, where: int) -> str:
    if where in ROCPROFILER_WHERE:
        name = ROCPROFILER_STATUSES.get(code, f"rocprofiler_status_t {code}")
    else:
        name = CUPTI_RESULTS.get(code, f"CUptiResult {code}")
    return f"{ERROR_WHERE.get(where, f'step {where}')} failed: {name}"


@dataclass
class Parsed:
    """One read's records, split by type (each a structured array of DTYPE)."""

    by_type: dict[int, np.ndarray] = field(default_factory=dict)
    malformed: int = 0
    rest: bytes = b""  # a trailing partial record, prepended to the next read

    def of(self, kind: Rec) -> np.ndarray:
        return self.by_type.get(int(kind), np.empty(0, dtype=DTYPE))


def parse(data: bytes) -> Parsed:
    whole = len(data) - len(data) % RECORD_BYTES
    arr = np.frombuffer(data[:whole], dtype=DTYPE)
    good = (arr["magic"] == MAGIC) & (arr["version"] == VERSION)
    out = Parsed(malformed=int((~good).sum()), rest=data[whole:])
    arr = arr[good]
    if len(arr):
        types = arr["type"]
        for t in np.unique(types).tolist():
            out.by_type[int(t)] = arr[types == t]
    return out


def pack(kind: Rec, pid: int, *fields: int) -> bytes:
    """One record as the collector writes it (tests and recorded fixtures)."""
    rec = np.zeros(1, dtype=DTYPE)
    rec["magic"] = MAGIC
    rec["version"] = VERSION
    rec["type"] = int(kind)
    rec["pid"] = pid
    f = list(fields) + [0] * (7 - len(fields))
    rec["f"][0] = np.array(f, dtype=np.uint64)
    return rec.tobytes()
