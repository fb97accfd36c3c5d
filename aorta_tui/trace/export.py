"""Chrome / Perfetto trace JSON from raw trace records (``--raw events.jsonl.gz``).

* duration records become complete slices (``ph: X``) from start to start + value;
  for kernel paths (submit -> dispatch, queued -> run) the submit side is a short slice on the
  submitting thread and the wait is a slice on the ring's track, joined by a flow arrow;
* point records become instant events (``ph: i``) on their thread;
* device records (the CUPTI collector's, joined with eBPF launches): every kernel is a slice on
  its stream's GPU track (``kernel_duration``), each launch call gets a flow arrow from the
  launching thread to its kernel's start (``launch_to_start``), ``queued`` is a counter track,
  ``gpu_idle`` a slice on the device's idle track; host / push / GPU queue (the parts of
  launch -> start) are consecutive slices on the stream's "launch path" track;
* the output is capped (``max_events``): the first events are kept and the cap is recorded in
  the trace's metadata, never silently.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from aorta_tui.core.atomic import atomic_write_text

RING_PID = 1_000_000_000  # synthetic process id for ring/queue tracks (kernel side)
GPU_PID = RING_PID + 1  # synthetic process id for GPU stream tracks (CUPTI device records)
# launch -> start in three parts (issue 34), drawn end to end on the stream's "launch path" track
PART_METRICS = ("launch_host", "launch_push", "launch_gpu_queue")
DEVICE_METRICS = frozenset({"launch_to_start", "kernel_duration", "queued", "gpu_idle", *PART_METRICS})


def read_raw(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        for ln in fh:
            ln = ln.strip()
            if ln:
                yield json.loads(ln)


def to_chrome_trace(records: Iterable[dict[str, Any]], *, max_events: int = 500_000,
                    kernel_metrics: frozenset[str] = frozenset({"cs_to_run", "queue_to_run", "run_to_done"}),
                    ) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    rings: dict[str, int] = {}
    total = exported = 0
    flow_id = 0
    truncated = False
    gpu_tracks: dict[str, int] = {}
    launch_tid: dict[tuple[int, int], int] = {}  # (launch ts, stream) -> launching thread
    parts_at: dict[tuple[int, int], int] = {}  # (launch ts, stream) -> ns of its parts drawn so far
    for rec in records:
        total += 1
        if len(events) >= max_events:
            truncated = True
            continue
        exported += 1
        ts_us = rec["ts_ns"] / 1000.0
        name = f"{rec['set']}.{rec['metric']}"
        args = {"key": hex(rec["key"] & 0xFFFFFFFFFFFFFFFF), "aux": rec["aux"]}
        if rec.get("label") not in (None, "-"):
            args["label"] = rec["label"]
        if rec["metric"] == "launch" and rec.get("tid") is not None:
            launch_tid[(rec["ts_ns"], rec["key"])] = rec["tid"]
        if rec["metric"] in DEVICE_METRICS and rec.get("tid") is None:
            flow_id += 1
            if rec["metric"] in PART_METRICS:
                events.append(_part_event(rec, name, args, gpu_tracks, parts_at))
                continue
            events.extend(_device_events(rec, name, args, ts_us, gpu_tracks, launch_tid, flow_id))
            continue
        if rec["metric"] in kernel_metrics:
            ring_tid = rings.setdefault(rec.get("label") or "ring", len(rings) + 1)
            flow_id += 1
            events.extend(_ring_events(rec, name, args, ts_us, ring_tid, flow_id))
        elif rec.get("kind") != "duration":
            events.append({"ph": "i", "s": "t", "name": name, "ts": ts_us, "pid": rec["pid"],
                           "tid": rec["tid"], "args": args})
        else:
            events.append({"ph": "X", "name": name, "ts": ts_us, "dur": max(rec["value"], 1) / 1000.0,
                           "pid": rec["pid"], "tid": rec["tid"], "args": args})
    return {
        "traceEvents": _track_names(rings, gpu_tracks) + events,
        "displayTimeUnit": "ns",
        "metadata": {"source": "aorta-tui trace", "records": total,
                     "records_exported": exported,
                     "truncated": truncated, "max_events": max_events,
                     "clock": "CLOCK_MONOTONIC (bpftrace nsecs), microseconds"},
    }


def _ring_events(rec: dict[str, Any], name: str, args: dict[str, Any], ts_us: float, ring_tid: int,
                 flow_id: int) -> list[dict[str, Any]]:
    """A kernel-side record (submit -> run on a GPU ring): a mark on the submitting thread, the
    span on the ring's track, and the flow arrow between them."""
    return [
        {"ph": "X", "name": f"{name} submit", "ts": ts_us, "dur": 0.001,
         "pid": rec["pid"], "tid": rec["tid"], "args": args},
        {"ph": "s", "id": flow_id, "name": "submit->dispatch", "cat": "flow",
         "ts": ts_us, "pid": rec["pid"], "tid": rec["tid"]},
        {"ph": "X", "name": name, "ts": ts_us, "dur": rec["value"] / 1000.0,
         "pid": RING_PID, "tid": ring_tid, "args": args},
        {"ph": "f", "bp": "e", "id": flow_id, "name": "submit->dispatch",
         "cat": "flow", "ts": ts_us + rec["value"] / 1000.0, "pid": RING_PID, "tid": ring_tid},
    ]


def _track_names(rings: dict[str, int], gpu_tracks: dict[str, int]) -> list[dict[str, Any]]:
    """The metadata events that name the GPU rings' and the GPU streams' tracks."""
    meta: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": RING_PID, "args": {"name": "GPU rings / queues"}}]
    meta += [{"ph": "M", "name": "thread_name", "pid": RING_PID, "tid": t, "args": {"name": r}}
             for r, t in rings.items()]
    if gpu_tracks:
        meta.append({"ph": "M", "name": "process_name", "pid": GPU_PID,
                     "args": {"name": "GPU streams (CUPTI, on CLOCK_MONOTONIC)"}})
        meta += [{"ph": "M", "name": "thread_name", "pid": GPU_PID, "tid": t, "args": {"name": r}}
                 for r, t in gpu_tracks.items()]
    return meta


def _part_event(rec: dict[str, Any], name: str, args: dict[str, Any], tracks: dict[str, int],
                parts_at: dict[tuple[int, int], int]) -> dict[str, Any]:
    """One part of a launch's path as a slice that starts where the part before it ended (the
    join writes every launch's host, then push, then GPU queue, all stamped at the launch)."""
    key = (rec["ts_ns"], rec["key"])
    offset = parts_at.pop(key, 0)
    if rec["metric"] != PART_METRICS[-1]:
        parts_at[key] = offset + max(rec["value"], 0)
        if len(parts_at) > 200_000:  # a launch whose last part never came: bounded memory
            parts_at.pop(next(iter(parts_at)))
    tid = tracks.setdefault(f"stream {args['key']} launch path", len(tracks) + 1)
    return {"ph": "X", "name": name, "ts": (rec["ts_ns"] + offset) / 1000.0, "dur": max(rec["value"], 1) / 1000.0,
            "pid": GPU_PID, "tid": tid, "args": {**args, "part_us": rec["value"] / 1000.0}}


def _device_events(rec: dict[str, Any], name: str, args: dict[str, Any], ts_us: float,
                   tracks: dict[str, int], launch_tid: dict[tuple[int, int], int], flow_id: int,
                   ) -> list[dict[str, Any]]:
    metric = rec["metric"]
    where = f"device {rec['key']} idle" if metric == "gpu_idle" else f"stream {args['key']}"
    tid = tracks.setdefault(where, len(tracks) + 1)
    if metric == "queued":
        return [{"ph": "C", "name": f"queued {args['key']}", "ts": ts_us, "pid": GPU_PID,
                 "args": {"kernels": rec["value"]}}]
    if metric in ("kernel_duration", "gpu_idle"):
        return [{"ph": "X", "name": name, "ts": ts_us, "dur": max(rec["value"], 1) / 1000.0,
                 "pid": GPU_PID, "tid": tid, "args": args}]
    # launch_to_start: an arrow from the launch call to the start of its kernel
    start_us = ts_us + rec["value"] / 1000.0
    host_tid = launch_tid.get((rec["ts_ns"], rec["key"]), rec["pid"])
    return [
        {"ph": "s", "id": flow_id, "name": "launch->start", "cat": "flow", "ts": ts_us,
         "pid": rec["pid"], "tid": host_tid},
        {"ph": "i", "s": "t", "name": name, "ts": start_us, "pid": GPU_PID, "tid": tid,
         "args": {**args, "launch_to_start_us": rec["value"] / 1000.0}},
        {"ph": "f", "bp": "e", "id": flow_id, "name": "launch->start", "cat": "flow",
         "ts": start_us, "pid": GPU_PID, "tid": tid},
    ]


def export_perfetto(raw_path: Path, out_path: Path, *, max_events: int = 500_000) -> dict[str, Any]:
    trace = to_chrome_trace(read_raw(raw_path), max_events=max_events)
    atomic_write_text(out_path, json.dumps(trace, separators=(",", ":")))
    return trace["metadata"]
