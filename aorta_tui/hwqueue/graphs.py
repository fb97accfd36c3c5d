"""CUDA/HIP graphs for ``queue run --graph``, and the launch floors every GPU run is set against.

``capture`` records one iteration of a workload as graphs and returns launches that replay
them, so both passes of the harness issue replays exactly as they issue eager launches:

* ``per_stream``: the iteration has no cross-stream waits, so each stream's launches are
  captured on that stream as one graph and replayed on it (the queue dimension stays: N
  streams, each replaying its own graph).
* ``whole_iteration``: launches wait on other streams' launches, which separate per-stream
  graphs cannot express; the iteration is captured once from stream 0, the other streams
  forked from it and joined back (CUDA's multi-stream capture), and replayed on stream 0.
  The graph's branches then run on streams the runtime picks: the result says so.

``measure_floors`` times, in this process and on this device, the same launch callables of one
iteration in a bare Python loop on one stream (``eager``: nothing but the calls, then one
synchronise) and as one graph replayed (``graph``). The run's per-launch cost divided by them
says how far the configuration is from the machine's limit. torch is only touched through the
backend passed in (HIP builds of torch serve HIP graphs through the same ``torch.cuda`` API).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import EnvironmentProblem
from aorta_tui.hwqueue.workloads.base import Launch, LaunchCall

if TYPE_CHECKING:  # torch is imported where a run starts, not to name its types
    import torch
    from torch.cuda import Event as CudaEvent  # where a parameter ``torch`` hides the module

    from aorta_tui.hwqueue.backends import Backend, StreamHandle

FLOOR_MIN_LAUNCHES = 256  # launch calls per floor round: a few hundred launches
FLOOR_ROUNDS = 5  # the floor is the fastest round
FLOOR_MAX_ROUND_S = 0.05  # one round longer than this: the work is not launch-bound
CPU_FLOOR_REASON = "CPU emulation has no device kernel launches to set a floor for"


@dataclass
class Captured:
    """One workload iteration as graphs: ``plan`` replays them (one launch per graph)."""

    plan: list[Launch]
    info: dict[str, Any]
    graphs: list[torch.cuda.CUDAGraph] = field(default_factory=list)  # kept alive as long as the plan is used


def declared_kernels(plan: list[Launch]) -> int | None:
    """Kernels the launches declare they issue; None when any launch does not say."""
    counts = [la.kernels for la in plan if la.kernels is not None]
    return sum(counts) if len(counts) == len(plan) else None


def capture(backend: Backend, streams: list[StreamHandle], plan: list[Launch]) -> Captured:
    """Capture ``plan`` (one iteration, already warmed up eagerly) and warm the replays up."""
    torch = backend.torch
    # --graph is refused on --device cpu (QueueRunConfig.validate), so every stream is torch's
    gpu_streams = [s for s in streams if s is not None]
    assert len(gpu_streams) == len(streams), "--graph captures on a GPU's streams only"
    t0 = time.perf_counter()
    saved = backend.save_streams()
    try:
        if any(la.waits for la in plan):
            captured = _capture_whole(torch, gpu_streams, plan)
        else:
            captured = _capture_per_stream(torch, gpu_streams, plan)
        for la in captured.plan:  # the first replay uploads the graph: keep it out of the timing
            with torch.cuda.stream(streams[la.stream]):
                la.fn()
        backend.synchronize()
    except RuntimeError as exc:
        raise EnvironmentProblem(
            f"--graph: torch could not capture an iteration of this workload as a CUDA/HIP graph: "
            f"{str(exc).strip().splitlines()[0][:300]}",
            hint="run without --graph; if the workload is declared capturable, this is a bug "
            "worth reporting with the message above") from None
    finally:
        backend.restore_streams(saved)
    captured.info.update(capture_s=time.perf_counter() - t0, launches_captured=len(plan),
                         kernels_declared=declared_kernels(plan), replay_launches=len(captured.plan))
    return captured


def _capture_per_stream(torch: ModuleType, streams: list[torch.cuda.Stream], plan: list[Launch]) -> Captured:
    by_stream: dict[int, list[Launch]] = {}
    for la in plan:
        by_stream.setdefault(la.stream, []).append(la)
    out = Captured(plan=[], info={
        "mode": "per_stream",
        "meaning": "each stream's launches of one iteration captured on that stream as one graph "
                   "and replayed on it",
    })
    for s, launches in sorted(by_stream.items()):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=streams[s]):
            for la in launches:
                la.fn()
        out.graphs.append(g)
        out.plan.append(Launch(s, "graph_replay", g.replay, kernels=declared_kernels(launches)))
    out.info["graphs"] = len(out.graphs)
    return out


def _capture_whole(torch: ModuleType, streams: list[torch.cuda.Stream], plan: list[Launch]) -> Captured:
    """Stream 0 begins the capture; every other stream forks from it, waits through events as
    the plan says, and joins back before the capture ends (it must end on stream 0)."""
    root = streams[0]
    used = sorted({la.stream for la in plan} - {0})
    needed = {w for la in plan for w in la.waits}
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=root):
        fork = torch.cuda.Event()
        fork.record(root)
        for s in used:
            streams[s].wait_event(fork)
        done: dict[int, CudaEvent] = {}
        for j, la in enumerate(plan):
            stream = streams[la.stream]
            for w in la.waits:
                stream.wait_event(done[w])
            torch.cuda.set_stream(stream)
            la.fn()
            if j in needed:
                done[j] = torch.cuda.Event()
                done[j].record(stream)
        torch.cuda.set_stream(root)
        for s in used:
            join = torch.cuda.Event()
            join.record(streams[s])
            root.wait_event(join)
    return Captured(plan=[Launch(0, "graph_replay", g.replay, kernels=declared_kernels(plan))],
                    graphs=[g], info={
        "mode": "whole_iteration", "graphs": 1,
        "meaning": "the iteration has cross-stream waits, which per-stream graphs cannot hold: it "
                   "is captured once from stream 0 (the other streams forked and joined) and "
                   "replayed on stream 0; its branches run on streams the runtime chooses",
    })


def measure_floors(backend: Backend, plan: list[Launch], stream_devices: list[str],
                   graph_reason: str | None) -> dict[str, Any]:
    """The eager and graph-replay floors of ``plan``'s launch calls on stream 0's device (the
    launches of streams on other devices are left out: one stream cannot issue them).

    Each is the fastest of ``FLOOR_ROUNDS`` rounds of at least ``FLOOR_MIN_LAUNCHES`` calls
    followed by one synchronise, per launch call (and per kernel where the launches declare
    their kernels). A figure that cannot be measured is the string ``"not available: ..."``.
    """
    if backend.emulated:
        na = f"not available: {CPU_FLOOR_REASON}"
        return {"eager_us_per_launch": na, "graph_us_per_launch": na,
                "eager_us_per_kernel": na, "graph_us_per_kernel": na}
    torch = backend.torch
    plan = [la for la in plan if stream_devices[la.stream] == stream_devices[0]]
    fns = [la.fn for la in plan]
    kernels = declared_kernels(plan)
    stream = torch.cuda.Stream(device=stream_devices[0])
    out: dict[str, Any] = {"launches_per_iteration": len(fns), "kernels_per_iteration": kernels,
                           "stream": "one fresh stream on " + stream_devices[0]}
    if not fns:
        na = "not available: the iteration issues no launch on the first stream's device"
        out.update(eager_us_per_launch=na, graph_us_per_launch=na)
        return _per_kernel(out, kernels)
    saved = backend.save_streams()
    try:
        torch.cuda.set_stream(stream)
        one = _round(backend, lambda: _call_all(fns))  # warm (and sized) first
        if one > FLOOR_MAX_ROUND_S:
            reason = (f"not available: one iteration's launches take {one * 1e3:.1f} ms with "
                      "nothing else running: the device's work, not the launches, sets this "
                      "workload's pace, so a launch floor says nothing about it")
            out.update(eager_us_per_launch=reason, graph_us_per_launch=reason)
            return _per_kernel(out, kernels)
        reps = max(1, min(math.ceil(FLOOR_MIN_LAUNCHES / max(1, len(fns))),
                          int(FLOOR_MAX_ROUND_S / max(one, 1e-9))))
        calls = fns * reps
        eager = min(_round(backend, lambda: _call_all(calls)) for _ in range(FLOOR_ROUNDS))
        out["launches_per_round"] = len(calls)
        out["eager_us_per_launch"] = eager / len(calls) * 1e6
        if graph_reason is not None:
            out["graph_us_per_launch"] = f"not available: {graph_reason}"
        else:
            out["graph_us_per_launch"] = _graph_floor(backend, stream, fns, reps)
    except RuntimeError as exc:  # a floor must never lose the run it describes
        why = f"not available: the floor could not be measured: {str(exc).splitlines()[0][:200]}"
        for key in ("eager_us_per_launch", "graph_us_per_launch"):
            if not isinstance(out.get(key), (int, float, str)):
                out[key] = why
    finally:
        backend.restore_streams(saved)
        backend.synchronize()
    return _per_kernel(out, kernels)


def _graph_floor(backend: Backend, stream: torch.cuda.Stream, fns: list[LaunchCall], reps: int) -> float | str:
    torch = backend.torch
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g, stream=stream):
            for fn in fns:
                fn()
    except RuntimeError as exc:
        return f"not available: capture failed: {str(exc).splitlines()[0][:200]}"
    torch.cuda.set_stream(stream)
    g.replay()  # upload
    backend.synchronize()
    replay = g.replay

    def replays() -> None:
        for _ in range(reps):
            replay()

    best = min(_round(backend, replays) for _ in range(FLOOR_ROUNDS))
    return best / (len(fns) * reps) * 1e6


def _per_kernel(out: dict[str, Any], kernels: int | None) -> dict[str, Any]:
    per_launch = None if not kernels or not out.get("launches_per_iteration") else (
        kernels / out["launches_per_iteration"])
    for kind in ("eager", "graph"):
        value = out.get(f"{kind}_us_per_launch")
        if isinstance(value, (int, float)):
            out[f"{kind}_us_per_kernel"] = (value / per_launch if per_launch else
                                            "not available: the workload's launches do not "
                                            "declare their kernel count")
        else:
            out[f"{kind}_us_per_kernel"] = value
    return out


def _call_all(fns: list[LaunchCall]) -> None:
    for fn in fns:
        fn()


def _round(backend: Backend, issue: Callable[[], object]) -> float:
    backend.synchronize()
    t0 = time.perf_counter()
    issue()
    backend.synchronize()
    return time.perf_counter() - t0
