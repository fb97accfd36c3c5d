"""Stream sweeps: the same workload at several stream counts, with scaling analysis.

* scaling efficiency at N = (throughput(N) / throughput(N0)) / (N / N0), N0 the smallest count;
* peak = the stream count with the highest throughput;
* knee = the last stream count before the marginal gain of the next step falls below
  ``knee_gain`` (10% by default): adding streams past it buys little.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.errors import UsageError
from aorta_tui.core.events import Event, Measurement, Progress, ResultWritten
from aorta_tui.hwqueue.result import SCHEMA_VERSION, new_run_id

SWEEP_KIND = "aorta-tui/queue-sweep"


def parse_stream_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--streams {text!r} is not a comma-separated list of integers",
                         hint="e.g. --streams 1,2,4,8,16,32,64") from None
    if not counts or any(c < 1 for c in counts):
        raise UsageError(f"--streams {text!r} needs positive counts", hint="e.g. --streams 1,2,4,8")
    return sorted(set(counts))


def check_counts(workload: str, counts: Sequence[int]) -> None:
    from aorta_tui.hwqueue.workloads import streams_out_of_range

    info, bad = streams_out_of_range(workload, counts)
    if bad:
        ok = [c for c in counts if c not in bad]
        raise UsageError(
            f"workload {workload!r} runs with {info.min_streams}..{info.max_streams} streams; "
            f"out of range: {', '.join(map(str, bad))}",
            hint=(f"use --streams {','.join(map(str, ok))}" if ok else
                  f"pick counts between {info.min_streams} and {info.max_streams}"),
        )


def analyse(points: Sequence[tuple[int, float | None]], knee_gain: float = 0.10) -> dict[str, Any]:
    """Scaling efficiency per point, peak and knee from (streams, throughput) pairs."""
    valid = [(n, t) for n, t in sorted(points) if t is not None and t > 0]
    if not valid:
        return {"efficiency": {}, "peak_streams": None, "peak_throughput": None,
                "knee_streams": None, "reason": "no point has a throughput"}
    n0, t0 = valid[0]
    eff = {str(n): (t / t0) / (n / n0) for n, t in valid}
    peak_n, peak_t = max(valid, key=lambda p: p[1])
    knee = valid[-1][0]
    for (n_a, t_a), (_, t_b) in zip(valid, valid[1:], strict=False):
        if t_b / t_a - 1.0 < knee_gain:
            knee = n_a
            break
    return {"efficiency": eff, "peak_streams": peak_n, "peak_throughput": peak_t,
            "knee_streams": knee, "knee_gain": knee_gain}


Runner = Callable[[Any, str], dict[str, Any]]  # (QueueRunConfig, what) -> queue result


def run_sweep(base: Any, counts: Sequence[int], on_event: Callable[[Event], None] | None = None,
              knee_gain: float = 0.10, output: str | os.PathLike[str] | None = None,
              isolate: bool = True, runner: Runner | None = None) -> dict[str, Any]:
    """Run ``base`` (a QueueRunConfig) at each stream count; returns the sweep document.

    ``isolate`` (default): every point is a fresh ``queue run`` process, so no state (CUDA
    context, allocator cache, a finished profiler session) carries from one point to the next,
    and a point that fails (say, out of memory at 64 streams) is recorded in ``failed_points``
    while the sweep goes on. Otherwise all points run in this process and a failure ends the
    sweep. With ``output`` the document is also written atomically and ``ResultWritten`` emitted.
    """
    from aorta_tui.core.errors import AortaError
    from aorta_tui.hwqueue.repeat import refuse_shared_trace, run_isolated
    from aorta_tui.hwqueue.run import run_queue

    refuse_shared_trace(base, "a sweep")
    check_counts(base.workload, counts)
    base.validate()
    sweep_id = base.run_id or new_run_id()
    run: Runner = runner or (run_isolated if isolate else
                             (lambda cfg, _what: run_queue(cfg, on_event=on_event)))
    results: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    first_error: AortaError | None = None
    for k, n in enumerate(counts):
        cfg = dataclasses.replace(base, streams=n, run_id=f"{sweep_id}-s{n}")
        try:
            result = run(cfg, f"the {n}-stream point")
        except AortaError as exc:
            if not isolate:
                raise
            first_error = first_error or exc
            failed.append({"streams": n, "reason": exc.render()})
            message = f"{n} streams failed"
        else:
            results.append(result)
            message = f"{n} streams done"
            if isolate and on_event is not None:  # the child's own events stayed in the child
                on_event(Measurement(cfg.run_id, source="queue", name=base.workload,
                                     values=dict(result["summary"]),
                                     reasons=dict(result["unavailable"])))
        if on_event is not None:
            on_event(Progress(sweep_id, done=k + 1, total=len(counts), message=message))
    if not results:
        assert first_error is not None
        raise first_error
    analysis = analyse([(r["config"]["streams"], r["summary"]["throughput"]) for r in results],
                       knee_gain)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "kind": SWEEP_KIND,
        "run_id": sweep_id,
        "workload": results[0]["workload"],
        "emulated": results[0]["emulated"],
        "platform": results[0]["platform"],
        "stream_counts": list(counts),
        "isolation": "a fresh process per point" if isolate else "all points in one process",
        "failed_points": failed,
        "analysis": analysis,
        "points": results,
    }
    if output is not None:
        atomic_write_json(output, doc)
        if on_event is not None:
            on_event(ResultWritten(sweep_id, path=str(output), what="queue sweep"))
    return doc
