"""The queue result document (``schema_version`` 1): built from a raw run, loaded back safely.

Layout and field meanings: ``docs/hwqueue.md``. Every figure that cannot be measured is
``None`` here and named in ``unavailable`` with the reason.
"""

from __future__ import annotations

import datetime as _dt
import secrets
from collections import Counter
from typing import TYPE_CHECKING, Any

from aorta_tui.hwqueue import metrics as M

# The document's type, reader and file loader live in result_doc.py; these names stay
# importable from here, where the document is built.
from aorta_tui.hwqueue.result_doc import (
    KIND,
    SCHEMA_VERSION,
    SWEEP_KIND,
    QueueResult,
    check_result,
    load_result,
)

if TYPE_CHECKING:
    from aorta_tui.hwqueue.harness import QueueRunConfig, RawRun
    from aorta_tui.hwqueue.workloads.base import QueueWorkload

__all__ = ["KIND", "SCHEMA_VERSION", "SWEEP_KIND", "QueueResult", "build_result", "check_result",
           "load_result", "queue_result"]

# summary key -> (unit or None for "the workload's unit", which direction is better)
SUMMARY_FIELDS: dict[str, tuple[str | None, str]] = {
    "throughput": (None, "higher"),
    "latency_mean_ms": ("ms", "lower"),
    "latency_p50_ms": ("ms", "lower"),
    "latency_p95_ms": ("ms", "lower"),
    "latency_p99_ms": ("ms", "lower"),
    "achieved_concurrency": ("streams", "higher"),
    "launch_delay_mean_us": ("us", "lower"),
    "launch_delay_p50_us": ("us", "lower"),
    "switch_overhead_us": ("us", "lower"),
    "queue_depth_max": ("launches", "neither"),
    "host_us_per_kernel": ("us", "lower"),  # host time issuing the iteration, per kernel
    "cost_us_per_kernel": ("us", "lower"),  # wall time per kernel: what a kernel costs the run
    "eager_floor_ratio": ("x", "lower"),  # per-launch cost over the bare eager loop's
    "graph_floor_ratio": ("x", "lower"),  # per-launch cost over the graph replay's
    "wall_s": ("s", "neither"),  # how long the measurement took; throughput judges speed
}

# summary key -> the ``unavailable`` key that explains it when it is None (others: the same key)
SUMMARY_REASON_KEY = {
    "latency_mean_ms": "iteration_latency_ms", "latency_p50_ms": "iteration_latency_ms",
    "latency_p95_ms": "iteration_latency_ms", "latency_p99_ms": "iteration_latency_ms",
    "launch_delay_mean_us": "launch_delay_us", "launch_delay_p50_us": "launch_delay_us",
    "queue_depth_max": "queue_depth",
    "host_us_per_kernel": "kernels_per_iteration", "cost_us_per_kernel": "kernels_per_iteration",
}


def summary_reason(unavailable: dict[str, str], key: str) -> str | None:
    """Why the summary figure ``key`` is None, from a result's ``unavailable`` map."""
    return unavailable.get(SUMMARY_REASON_KEY.get(key, key))


BUSY_MEANING = {  # keyed by RawRun.detail_source
    "events": ("stream occupancy: from the start event being reached to the end event being "
               "reached; includes time a kernel waited for submission or for free SMs"),
    "cupti": "kernel execution: union of the profiler's kernel intervals on the stream",
    "cpu": "host time inside the launch calls (CPU emulation)",
}


def event_metrics(recs: list[M.LaunchRecord]) -> dict[str, Any]:
    """The event-based figures of a --timing cupti run, for comparison with the kernel ones."""
    delays, unmeasurable = M.launch_delays_ns(recs)
    so = M.idle_gaps(recs).switch_overhead_ns
    return {
        "per_stream_occupied_ms": {str(s): b / 1e6 for s, b in M.per_stream_busy_ns(recs).items()},
        "achieved_concurrency": M.achieved_concurrency(recs),
        "launch_delay_us": M.scale(M.stats(delays), 1e3),
        "launch_delay_unmeasurable": unmeasurable,
        "switch_overhead_us": None if so is None else so / 1e3,
    }


def new_run_id() -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"q-{now}-{secrets.token_hex(2)}"


def queue_result(cfg: QueueRunConfig, raw: RawRun) -> QueueResult:
    """The typed result of a raw run: :func:`build_result`'s document read by the one reader,
    so what is written (``QueueResult.to_json``) is what every reader of a file gets back."""
    return QueueResult.from_json(build_result(cfg, raw), where=f"queue run {cfg.run_id}")


def build_result(cfg: QueueRunConfig, raw: RawRun) -> dict[str, Any]:
    """The result document of a raw run, as JSON (:func:`queue_result` types it)."""
    from aorta_tui.hwqueue.workloads import workload_class

    wl = workload_class(cfg.workload)
    recs = raw.records
    kernels = raw.detail_source == "cupti"
    unavailable: dict[str, str] = {}
    starts, end_ns, lat_ns = _headline_pass(raw, recs)
    wall_ns = end_ns - starts[0]
    wall_s = wall_ns / 1e9
    throughput = _throughput(raw, wl, len(starts), wall_s)
    if raw.throughput_reason is not None:
        unavailable["throughput"] = raw.throughput_reason
    elif throughput is None:
        unavailable["throughput"] = "wall time was zero"

    unit = wl.throughput_unit
    priorities = raw.stream_priorities or [None] * cfg.streams
    # with kernel records a launch (one host call) can have several kernels: count each kind
    launch_recs = raw.event_records if raw.event_records is not None else recs
    metrics = _metrics_section(cfg, raw, lat_ns, wall_s, throughput, unit, launch_recs,
                               priorities, unavailable)
    periods = M.iteration_periods_ns(starts, end_ns)
    _note_missing_sections(raw, priorities, unavailable)

    launch_cost = _launch_costs(raw, len(starts), wall_s, unavailable)
    summary = _summary(throughput, metrics, launch_cost)
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "run_id": cfg.run_id,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "emulated": raw.emulated,
        "workload": _workload_section(cfg, raw, wl),
        "config": _config_section(cfg, raw),
        "platform": raw.platform,
        "timing": _timing_section(cfg, raw, launch_recs, _passes(raw, wl, wall_s, throughput)),
        "summary": summary,
        "summary_units": _summary_units(unit, kernels),
        "summary_better": {k: b for k, (_, b) in SUMMARY_FIELDS.items()},
        "summary_source": summary_sources(raw),
        "metrics": metrics,
        "unavailable": unavailable,
        "samples": {
            "iteration_latency_ms": [x / 1e6 for x in lat_ns],
            "iteration_period_ms": [x / 1e6 for x in periods],
        },
        "ebpf": raw.ebpf,
        "stream_priority": stream_priority_section(raw.priority_info, priorities, cfg.stream_priority),
        "graph": _graph_section(raw),
        "floor": launch_cost["floor"],
    }
    _add_details(result, cfg, raw, launch_cost["host_samples"])
    return result


def _metrics_section(cfg: QueueRunConfig, raw: RawRun, lat_ns: list[float], wall_s: float,
                     throughput: float | None, unit: str, launch_recs: list[M.LaunchRecord],
                     priorities: list[int | None],
                     unavailable: dict[str, str]) -> dict[str, Any]:
    """The result's ``metrics``: latency, per-stream rows, concurrency, launch delays, queue
    depth and idle gaps; each figure that cannot be measured is noted in ``unavailable``."""
    recs = raw.records
    latency = M.scale(M.stats(lat_ns), 1e6)
    if latency is None:
        unavailable["iteration_latency_ms"] = "no device activity was recorded"
    per_stream = _per_stream_rows(cfg, raw, launch_recs, priorities, unavailable)
    concurrency = M.achieved_concurrency(recs)
    if concurrency is None:
        unavailable["achieved_concurrency"] = "device timeline has zero span"
    delay_stats, unmeasurable, depth = _delay_and_depth(raw, raw.detail_source == "cupti",
                                                        unavailable)
    intra, inter, switch_us = _idle_gap_figures(recs, unavailable)
    return {
        "wall_s": wall_s,
        "throughput": {"value": throughput, "unit": unit},
        "iteration_latency_ms": latency,
        "per_stream": per_stream,
        "achieved_concurrency": concurrency,
        "launch_delay_us": delay_stats,
        "launch_delay_unmeasurable": unmeasurable,
        "queue_depth": depth,
        "intra_stream_gap_us": intra,
        "inter_stream_gap_us": inter,
        "switch_overhead_us": switch_us,
        "memory": raw.memory,
    }


def _summary_units(unit: str, kernels: bool) -> dict[str, str]:
    """Each summary figure's unit (the workload's for throughput; kernels for queue depth
    when the records are kernels)."""
    return ({k: (u if u is not None else unit) for k, (u, _) in SUMMARY_FIELDS.items()}
            | ({"queue_depth_max": "kernels"} if kernels else {}))


def _graph_section(raw: RawRun) -> dict[str, Any]:
    return ({"requested": True, "applied": True, **raw.graph} if raw.graph is not None
            else {"requested": False, "applied": False,
                  "reason": "not requested (--graph): eager launches"})


def _add_details(result: dict[str, Any], cfg: QueueRunConfig, raw: RawRun,
                 host_samples: list[float]) -> None:
    """The per-iteration samples, the event-timed figures and (--keep-timeline) timelines."""
    kernels = raw.detail_source == "cupti"
    result["samples"].update(per_iteration_samples(raw.records, raw.emulated, kernels))
    result["samples"]["iteration_host_us_per_kernel"] = host_samples
    if raw.event_records is not None:
        result["event_metrics"] = event_metrics(raw.event_records)
    if cfg.keep_timeline:
        _add_timelines(result, raw)


def _headline_pass(raw: RawRun, recs: list[M.LaunchRecord]) -> tuple[list[float], float, list[float]]:
    """Iteration starts, end and latencies of the headline figures: from the measure pass
    when there is one, else from the only pass."""
    if raw.measure is not None:
        starts, end_ns = raw.measure.iteration_starts_ns, raw.measure.end_ns
        lat_ns = [e - s0 for s0, e in zip(starts, raw.measure.iteration_ends_ns, strict=True)]
    else:
        starts, end_ns = raw.iteration_starts_ns, raw.end_ns
        lat_ns = M.iteration_latencies_ns(recs, starts)
    return starts, end_ns, lat_ns


def _per_stream_rows(cfg: QueueRunConfig, raw: RawRun, launch_recs: list[M.LaunchRecord],
                     priorities: list[int | None],
                     unavailable: dict[str, str]) -> list[dict[str, Any]]:
    """One row per stream (launches, kernels, busy time); a stream without work is noted."""
    recs = raw.records
    busy = M.per_stream_busy_ns(recs)
    span = M.device_span_ns(recs)
    lc_streams = set(raw.priority_info.get("latency_critical_streams", ()))
    launches = Counter(r.stream for r in launch_recs)
    kernel_count = Counter(r.stream for r in recs) if raw.detail_source == "cupti" else None
    per_stream = []
    for s in range(cfg.streams):
        b = busy.get(s)
        per_stream.append({
            "stream": s, "device": raw.stream_devices[s], "launches": launches[s],
            "kernels": None if kernel_count is None else kernel_count[s],
            "busy_ms": None if b is None else b / 1e6,
            "busy_fraction": None if (b is None or span <= 0) else b / span,
            "latency_critical": s in lc_streams,
            "priority": priorities[s],
        })
        if b is None:
            unavailable[f"per_stream[{s}].busy_ms"] = (
                "--graph captured the iteration as one graph replayed on stream 0; its branches "
                "run on streams the runtime picks, so no launch is on this stream"
                if (raw.graph or {}).get("mode") == "whole_iteration" and s != 0
                else "the workload issued no launch on this stream")
    return per_stream


def _delay_and_depth(raw: RawRun, kernels: bool, unavailable: dict[str, str],
                     ) -> tuple[dict[str, Any] | None, Any, dict[str, Any] | None]:
    """Launch-delay stats, the unmeasurable count and the queue depth (None when emulated)."""
    if raw.emulated:
        unavailable["launch_delay_us"] = ("CPU emulation runs each launch synchronously inside "
                                          "the host call: there is no separate device start")
        unavailable["queue_depth"] = ("CPU emulation finishes each launch before the call "
                                      "returns: no device queue exists")
        return None, None, None
    delays, unmeasurable = M.launch_delays_ns(raw.records, keep_negative=kernels)
    delay_stats = M.scale(M.stats(delays), 1e3)
    if delay_stats is None:
        unavailable["launch_delay_us"] = (
            "no launch had its start event fire after the host call returned (streams idle "
            "at submit); events cannot time submission latency, kernel timestamps can "
            f"(--timing auto or cupti on a GPU; here: {raw.detail_reason})")
    return delay_stats, unmeasurable, M.queue_depth(raw.records)


def _idle_gap_figures(recs: list[M.LaunchRecord], unavailable: dict[str, str],
                      ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, float | None]:
    """Intra- and inter-stream idle-gap stats (us) and the switch overhead (us)."""
    gaps = M.idle_gaps(recs)
    intra = M.scale(M.stats(gaps.intra_ns), 1e3)
    inter = M.scale(M.stats(gaps.inter_ns), 1e3)
    so = gaps.switch_overhead_ns
    switch_us = None if so is None else so / 1e3
    if intra is None:
        unavailable["intra_stream_gap_us"] = "the device never went idle before work on the same stream"
    if inter is None:
        unavailable["inter_stream_gap_us"] = "the device never went idle before work on another stream"
    if switch_us is None:
        unavailable["switch_overhead_us"] = "needs both intra- and inter-stream idle gaps"
    return intra, inter, switch_us


def _note_missing_sections(raw: RawRun, priorities: list[int | None],
                           unavailable: dict[str, str]) -> None:
    """Why the stream priorities, memory and eBPF sections are missing, when they are."""
    if any(p is None for p in priorities):
        unavailable["stream_priority"] = (
            "CPU emulation has no streams, so no stream priorities (emulated run)" if raw.emulated
            else "this torch build does not expose torch.cuda.Stream.priority to read back")
    if raw.memory is None:
        unavailable["memory"] = raw.memory_reason or "not measured"
    if raw.ebpf is None:
        unavailable["ebpf"] = raw.ebpf_reason or "not requested"


def _summary(throughput: float | None, metrics: dict[str, Any],
             launch_cost: dict[str, Any]) -> dict[str, Any]:
    """The headline figures, in SUMMARY_FIELDS order, from the result's ``metrics``."""
    latency = metrics["iteration_latency_ms"]
    delay_stats = metrics["launch_delay_us"]
    depth = metrics["queue_depth"]
    return {
        "throughput": throughput,
        "latency_mean_ms": latency["mean"] if latency else None,
        "latency_p50_ms": latency["p50"] if latency else None,
        "latency_p95_ms": latency["p95"] if latency else None,
        "latency_p99_ms": latency["p99"] if latency else None,
        "achieved_concurrency": metrics["achieved_concurrency"],
        "launch_delay_mean_us": delay_stats["mean"] if delay_stats else None,
        "launch_delay_p50_us": delay_stats["p50"] if delay_stats else None,
        "switch_overhead_us": metrics["switch_overhead_us"],
        "queue_depth_max": depth["max"] if depth else None,
        "host_us_per_kernel": launch_cost["host_us_per_kernel"],
        "cost_us_per_kernel": launch_cost["cost_us_per_kernel"],
        "eager_floor_ratio": launch_cost["eager_ratio"],
        "graph_floor_ratio": launch_cost["graph_ratio"],
        "wall_s": metrics["wall_s"],
    }


def _workload_section(cfg: QueueRunConfig, raw: RawRun, wl: type[QueueWorkload]) -> dict[str, Any]:
    return {
        "name": wl.name, "category": wl.category, "size": cfg.size, "dtype": cfg.dtype,
        "params": raw.params, "throughput_unit": wl.throughput_unit,
        "work_per_iteration": raw.work_per_iteration, "work_unit": wl.work_unit,
    }


def _config_section(cfg: QueueRunConfig, raw: RawRun) -> dict[str, Any]:
    return {
        "streams": cfg.streams, "iterations": cfg.iterations, "warmup": cfg.warmup,
        "sync_mode": cfg.sync_mode, "device": cfg.device,
        "devices": sorted(set(raw.stream_devices)), "stream_devices": raw.stream_devices,
        "stream_priority": cfg.stream_priority, "graph": cfg.graph,
    }


def _timing_section(cfg: QueueRunConfig, raw: RawRun, launch_recs: list[M.LaunchRecord],
                    passes: dict[str, Any]) -> dict[str, Any]:
    kernels = raw.detail_source == "cupti"
    return {
        "device_clock": raw.device_clock,
        "host_clock": "time.perf_counter_ns",
        "clock_alignment_uncertainty_us": (None if raw.clock_uncertainty_ns is None
                                           else raw.clock_uncertainty_ns / 1e3),
        "launches_recorded": len(launch_recs),
        "kernels_recorded": len(raw.records) if kernels else None,
        "timing": cfg.timing,
        "kernel_source": raw.detail_source,
        "kernel_source_reason": raw.detail_reason,
        "busy_meaning": BUSY_MEANING[raw.detail_source],
        "profiler": raw.profiler_info,
        "passes": passes,
    }


def _add_timelines(result: dict[str, Any], raw: RawRun) -> None:
    """--keep-timeline: every launch as a row of offsets from the first iteration start."""
    t0 = raw.iteration_starts_ns[0]
    result["timeline"] = [
        [r.iteration, r.stream, r.label, r.host_start_ns - t0, r.host_end_ns - t0,
         r.gpu_start_ns - t0, r.gpu_end_ns - t0] for r in raw.records
    ]
    if raw.event_records is not None:  # the same launches timed by events, for comparison
        result["event_timeline"] = [
            [r.iteration, r.stream, r.label, r.host_start_ns - t0, r.host_end_ns - t0,
             r.gpu_start_ns - t0, r.gpu_end_ns - t0] for r in raw.event_records
        ]
    result["timeline_origin_ns"] = t0  # host perf_counter_ns of the first iteration start
    result["timeline_fields"] = ["iteration", "stream", "label", "host_start_ns",
                                 "host_end_ns", "gpu_start_ns", "gpu_end_ns"]


def _kernels_per_iteration(raw: RawRun) -> tuple[float | None, str]:
    """Kernels one iteration issues: declared by the workload's launches, else counted from the
    profiler's kernel records of the detail pass; (None, why) when neither is there."""
    if raw.kernels_declared:
        return float(raw.kernels_declared), "declared by the workload's launches"
    if raw.detail_source == "cupti" and raw.iteration_starts_ns:
        return len(raw.records) / len(raw.iteration_starts_ns), "counted from profiler kernel records"
    return None, ("the workload's launches do not declare their kernels and no profiler kernel "
                  f"records counted them (kernel source: {raw.detail_source})")


def _launch_costs(raw: RawRun, iterations: int, wall_s: float,
                  unavailable: dict[str, str]) -> dict[str, Any]:
    """Per-kernel host and wall cost of the headline pass, and its ratios to the floors."""
    kernels, how = _kernels_per_iteration(raw)
    launches = raw.launches_per_iteration
    host_samples: list[float] = []
    out: dict[str, Any] = {"host_us_per_kernel": None, "cost_us_per_kernel": None,
                           "eager_ratio": None, "graph_ratio": None}
    if kernels:
        if raw.measure is not None and raw.measure.issue_ends_ns:
            host_samples = [(e - s0) / kernels / 1e3 for s0, e in
                            zip(raw.measure.iteration_starts_ns, raw.measure.issue_ends_ns, strict=True)]
            out["host_us_per_kernel"] = M.percentile(sorted(host_samples), 50.0)
        else:
            unavailable["host_us_per_kernel"] = ("host issue time is taken by the measure pass "
                                                 "(--timing auto) only")
        out["cost_us_per_kernel"] = wall_s * 1e6 / (iterations * kernels)
    else:
        unavailable["kernels_per_iteration"] = how
    per_launch = wall_s * 1e6 / (iterations * launches) if launches else None
    floor: dict[str, Any] = dict(raw.floors)
    floor.update(kernels_per_iteration=kernels, kernels_per_iteration_from=how if kernels else None,
                 run_us_per_launch=per_launch,
                 run_us_per_launch_from=("measure pass wall / launch calls" if raw.measure
                                         else "single pass wall / launch calls"))
    for kind in ("eager", "graph"):
        value = floor.get(f"{kind}_us_per_launch")
        if isinstance(value, (int, float)) and kernels and launches:
            # the kernel count may come from the profiler, which the floor did not have
            floor[f"{kind}_us_per_kernel"] = value * launches / kernels
        if isinstance(value, (int, float)) and value > 0 and per_launch is not None:
            out[f"{kind}_ratio"] = floor[f"{kind}_ratio"] = per_launch / value
        else:
            why = str(value) if value is not None else "not available: floors were not measured"
            floor[f"{kind}_ratio"] = why
            unavailable[f"{kind}_floor_ratio"] = why.removeprefix("not available: ")
    out["floor"] = floor
    out["host_samples"] = host_samples
    return out


def _throughput(raw: RawRun, wl: type[QueueWorkload], iterations: int, wall_s: float) -> float | None:
    if wall_s <= 0 or raw.throughput_reason is not None:
        return None
    return float(raw.work_per_iteration * iterations / wall_s / wl.throughput_scale)


PASS_MEANING = {
    "measure": ("the workload's launches issued as a hand-written loop would: one device end "
                "marker per stream per iteration, events only where a launch waits on another"),
    "detail_cupti": ("every launch between two device events, under torch.profiler; kernel "
                     "timestamps from the profiler (CUPTI / roctracer)"),
    "detail_events": "every launch between two device events and two host clock reads",
    "measure_cpu": ("the workload's launches issued as a hand-written loop would; host clock at "
                    "each iteration's start and after its last launch (CPU emulation)"),
    "detail_cpu": "every launch between two host clock reads (CPU emulation)",
}


def _passes(raw: RawRun, wl: type[QueueWorkload], wall_s: float, throughput: float | None) -> dict[str, Any]:
    """What each pass did and how fast it ran: the detail pass's instrumentation cost shows as
    its throughput relative to the measure pass."""
    detail_wall = (raw.end_ns - raw.iteration_starts_ns[0]) / 1e9
    detail_throughput = _throughput(raw, wl, len(raw.iteration_starts_ns), detail_wall)
    detail = {
        "iterations": len(raw.iteration_starts_ns),
        "wall_s": detail_wall,
        "throughput": detail_throughput,
        "instrumentation": PASS_MEANING[f"detail_{raw.detail_source}"],
        "gives": "per-launch figures: busy time, concurrency, launch delay, queue depth, gaps, "
                 "switch overhead" + ("" if raw.measure else "; and throughput and latency"),
    }
    if raw.measure is None:
        return {"detail": detail}
    measure = {"iterations": len(raw.measure.iteration_starts_ns), "wall_s": wall_s,
               "throughput": throughput,
               "instrumentation": PASS_MEANING["measure_cpu" if raw.emulated else "measure"],
               "gives": "throughput, iteration latency and period, wall time"}
    relative = (None if not (detail_throughput and throughput)
                else detail_throughput / throughput)
    return {"measure": measure, "detail": detail, "detail_relative_throughput": relative}


# summary key -> which pass gives it in an auto run
_FROM_MEASURE = {"throughput", "latency_mean_ms", "latency_p50_ms", "latency_p95_ms",
                 "latency_p99_ms", "wall_s", "host_us_per_kernel", "cost_us_per_kernel"}
_FLOOR_KEYS = {"eager_floor_ratio", "graph_floor_ratio"}


def summary_sources(raw: RawRun) -> dict[str, str]:
    """Per summary figure, the pass and the clock it was computed from."""
    detail = {"cupti": "detail pass: profiler kernel timestamps",
              "events": "detail pass: per-launch device events",
              "cpu": "detail pass: host clocks (CPU emulation)"}[raw.detail_source]
    if raw.measure is None:
        detail = detail.replace("detail pass", "single pass")
    measure = ("measure pass: host clock at iteration start, device end markers"
               if not raw.emulated else "measure pass: host clocks (CPU emulation)")
    headline = measure if raw.measure is not None else detail
    floors = headline.partition(":")[0] + ": wall per launch call over the in-process floors"
    return {k: (floors if k in _FLOOR_KEYS
                else measure if raw.measure is not None and k in _FROM_MEASURE else detail)
            for k in SUMMARY_FIELDS}


def stream_priority_section(info: dict[str, Any], priorities: list[int | None],
                            requested: str) -> dict[str, Any]:
    """``--stream-priority``: what was asked, whether it changed anything (and if not, why),
    and whether the streams read back the priority they were created with."""
    out: dict[str, Any] = {"requested": requested, "applied": False, "reason": None, **info}
    lc = out.get("latency_critical_streams") or []
    highest = out.get("highest_priority")
    if out["applied"] and highest is not None:
        read = [priorities[s] for s in lc]
        out["readback_matches"] = None if None in read else all(p == highest for p in read)
    else:
        out["readback_matches"] = None
    return out


def per_iteration_samples(recs: list[M.LaunchRecord], emulated: bool,
                          keep_negative: bool = False) -> dict[str, list[float]]:
    """Per-iteration values of the figures without a natural sample, for compare's spread."""
    by_iter: dict[int, list[M.LaunchRecord]] = {}
    for r in recs:
        by_iter.setdefault(r.iteration, []).append(r)
    conc: list[float] = []
    delay: list[float] = []
    switch: list[float] = []
    for it in sorted(by_iter):
        group = by_iter[it]
        c = M.achieved_concurrency(group)
        if c is not None:
            conc.append(c)
        if not emulated:
            d, _ = M.launch_delays_ns(group, keep_negative)
            if d:
                delay.append(sum(d) / len(d) / 1e3)
        so = M.idle_gaps(group).switch_overhead_ns
        if so is not None:
            switch.append(so / 1e3)
    return {"iteration_concurrency": conc, "iteration_launch_delay_mean_us": delay,
            "iteration_switch_overhead_us": switch}
