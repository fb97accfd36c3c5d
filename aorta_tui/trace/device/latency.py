"""CUPTI's latency timestamps: launch -> start in three parts that add up (issue 34).

With ``cuptiActivityEnableLatencyTimestamps(1)`` set before CUDA starts, a kernel's activity
record (the collector's ``KERNEL_LAT``) carries two host-side moments beside start and end:

* ``queued``: the driver wrote the launch into the stream's command buffer;
* ``submitted``: the driver handed that buffer to the GPU.

So a launch's path splits, per stream, into

* **host**: launch call entry -> ``queued`` (the runtime's and driver's own work). Only where an
  entry time is known: the eBPF launch uprobe or the collector's launch callback (cross-check,
  ``--launch-source ebpf|collector``); the default mode has neither, by design;
* **push**: ``queued`` -> ``submitted`` (the command buffer waiting to be handed over);
* **GPU queue**: ``submitted`` -> kernel start (the hardware's queue: a long kernel ahead on the
  stream waits here; this is the seed's submit -> dispatch).

host + push + GPU queue = launch -> start exactly (the same three timestamps subtracted in
turn). A record whose ``queued`` or ``submitted`` is 0 (CUPTI_TIMESTAMP_UNKNOWN: latency
timestamps refused, a graph's kernel) gives no parts and is counted, never guessed.

On ROCm (rocprofiler-sdk, ``rocprof_collector.c``) the kernel-dispatch record has the
dispatch's start and end only: host is the HIP launch API record's start -> dispatch start
minus nothing the runtime reports, and neither the AQL packet's write (queued) nor its doorbell
(submitted) is timestamped there: push and GPU queue are unavailable (``ROCM_PARTS``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aorta_tui.trace.device.records import Rec

PART_METRICS = ("launch_host", "launch_push", "launch_gpu_queue")
ROCM_PARTS = {
    "launch_host": "unavailable: rocprofiler-sdk gives no queued time for a dispatch (the AQL packet's "
                   "write is not timestamped); launch -> start is the whole path",
    "launch_push": "unavailable: neither the AQL packet's write nor its HSA doorbell ring is "
                   "timestamped by rocprofiler-sdk's kernel-dispatch records",
    "launch_gpu_queue": "unavailable: the doorbell (submission) time is not recorded, so the hardware "
                        "queue's wait cannot be split from the host's",
}
STREAM_ID_UNKNOWN = (1 << 64) - 1  # REC_STREAM f0 when cuptiGetStreamIdEx refused


@dataclass
class KernelColumns:
    """The fields of KERNEL and KERNEL_LAT records that differ in layout, as int64 arrays."""

    corr: np.ndarray
    graph: np.ndarray
    queued: np.ndarray  # CUPTI clock, 0 when unknown (or a plain KERNEL record)
    submitted: np.ndarray


def kernel_columns(kernels: np.ndarray) -> KernelColumns:
    f = kernels["f"]
    lat = kernels["type"] == int(Rec.KERNEL_LAT)
    f0 = f[:, 0]
    corr = np.where(lat, f0 & np.uint64(0xFFFFFFFF), f0).astype(np.int64)
    graph = np.where(lat, f0 >> np.uint64(32), f[:, 5]).astype(np.int64)
    queued = np.where(lat, f[:, 5], 0).astype(np.int64)
    submitted = np.where(lat, f[:, 6], 0).astype(np.int64)
    return KernelColumns(corr, graph, queued, submitted)


def to_host_clock(cupti_ts: np.ndarray, offset_ns: int) -> np.ndarray:
    """CUPTI timestamps onto CLOCK_MONOTONIC; unknown (0) stays 0."""
    return np.where(cupti_ts > 0, cupti_ts - offset_ns, 0)


@dataclass
class Parts:
    """One batch's three parts, for the kernels that have both latency timestamps."""

    known: np.ndarray  # bool per kernel
    host: np.ndarray | None  # per known kernel; None when no entry time is known
    push: np.ndarray
    gpu_queue: np.ndarray


def split(entry: np.ndarray | None, queued: np.ndarray, submitted: np.ndarray, start: np.ndarray) -> Parts:
    """The parts of launch -> start. ``entry`` (host clock) may be None (no entry time)."""
    known = (queued > 0) & (submitted > 0)
    q, s, st = queued[known], submitted[known], start[known]
    host = None if entry is None else q - entry[known]
    return Parts(known, host, s - q, st - s)


class StreamMap:
    """Per process, CUPTI stream id -> the stream handle (REC_STREAM, from stream creation)."""

    def __init__(self) -> None:
        self._handle: dict[tuple[int, int], int] = {}
        self.refused = 0  # cuptiGetStreamIdEx refusals: those streams keep their CUPTI id

    def add(self, recs: np.ndarray) -> None:
        for r in recs:
            f = r["f"].tolist()
            if f[0] == STREAM_ID_UNKNOWN:
                self.refused += 1
                continue
            self._handle[(int(r["pid"]), int(f[0]))] = int(np.int64(np.uint64(f[1])))

    def keys(self, pid: int, stream_ids: np.ndarray) -> tuple[np.ndarray, int]:
        """Handles for the ids (the id itself where unmapped), and how many were unmapped."""
        out = stream_ids.astype(np.int64).copy()
        unmapped = 0
        for sid in np.unique(stream_ids).tolist():
            h = self._handle.get((pid, int(sid)))
            if h is None:
                unmapped += int((stream_ids == sid).sum())
            else:
                out[stream_ids == sid] = h
        return out, unmapped

    def __len__(self) -> int:
        return len(self._handle)
