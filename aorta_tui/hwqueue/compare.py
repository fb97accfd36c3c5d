"""Noise-aware comparison of two queue results.

Each figure gets, per side, a 95% bootstrap confidence interval. A result of
``queue run --repeat K`` (K >= 3) gives the run-to-run interval: the median over its
repetitions. A single run gives the within-run interval from its per-iteration samples
(throughput from iteration periods, latency statistics from iteration latencies, concurrency,
launch delay and switch overhead from their per-iteration values).

One rule decides "changed" for every figure (:data:`RULE`, printed by ``queue compare --help``):
a figure changed when its relative change is at least ``min_change`` and, where both runs
recorded a spread, their intervals do not overlap. A changed figure is ``improved`` or
``regressed`` by its direction when both spreads are known, and ``changed`` when it has no
better direction (``wall_s``, ``queue_depth_max``) or no spread was recorded (it cannot be
judged against noise: ``spread: none recorded``). Every other figure is ``unchanged``. The
direction never decides *whether* a figure changed (it once did: ``wall_s`` at -16.5% was
``unchanged`` while ``cost_us_per_kernel`` at -16.5% was ``changed``).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.stats import percentile
from aorta_tui.hwqueue.repeat import MIN_REPEATS_FOR_SPREAD
from aorta_tui.hwqueue.result import summary_reason
from aorta_tui.hwqueue.result_doc import KIND, SWEEP_KIND, QueueResult, QueueSweepDoc, as_result

# A document as compare takes it: the typed value, or its JSON (read by the one reader first).
Doc = QueueResult | dict[str, Any]

RULE = ("A figure changed when |relative change| >= --min-change and, where both runs recorded "
        "a spread (95% bootstrap interval), the intervals do not overlap; the same rule for "
        "every figure. A changed figure is 'improved' or 'regressed' by its direction when "
        "both spreads are known, else 'changed' (no better direction, such as wall_s, or no "
        "spread recorded). Everything else is 'unchanged'.")

_LATENCY = {"latency_mean_ms": None, "latency_p50_ms": 50.0, "latency_p95_ms": 95.0,
            "latency_p99_ms": 99.0}


def bootstrap_ci(values: Sequence[float], stat: Callable[[list[float]], float],
                 resamples: int = 1000, seed: int = 7) -> tuple[float, float] | None:
    if len(values) < 2:
        return None
    rng = random.Random(seed)
    xs = list(values)
    est = sorted(stat([rng.choice(xs) for _ in xs]) for _ in range(resamples))
    return percentile(est, 2.5), percentile(est, 97.5)


def _mean(xs: list[float]) -> float:
    return math.fsum(xs) / len(xs)


def _runs(result: QueueResult, key: str) -> list[float] | None:
    """The figure in each repetition of a ``--repeat`` result (None: not a repeated result)."""
    summaries = result.repeats.summaries if result.repeats is not None else None
    if not summaries or len(summaries) < MIN_REPEATS_FOR_SPREAD:
        return None
    return [v for v in (s.get(key) for s in summaries) if v is not None]


def _interval(result: QueueResult, key: str) -> tuple[float, float] | None:
    runs = _runs(result, key)
    if runs is not None:  # run-to-run: the interval of the median over the repetitions
        return bootstrap_ci(runs, statistics.median) if len(runs) >= MIN_REPEATS_FOR_SPREAD else None
    if key == "throughput":
        periods = result.sample("iteration_period_ms")
        value = result.summary.value("throughput")
        ci = bootstrap_ci(periods, _mean)
        if ci is None or value is None or ci[0] <= 0:
            return None
        m = _mean(periods)  # throughput is inversely proportional to the mean period
        return value * m / ci[1], value * m / ci[0]
    per_iter = {"achieved_concurrency": "iteration_concurrency",
                "launch_delay_mean_us": "iteration_launch_delay_mean_us",
                "switch_overhead_us": "iteration_switch_overhead_us",
                "host_us_per_kernel": "iteration_host_us_per_kernel"}
    if key in per_iter:
        return bootstrap_ci(result.sample(per_iter[key]), _mean)
    if key in _LATENCY:
        lat = result.sample("iteration_latency_ms")
        q = _LATENCY[key]
        return bootstrap_ci(lat, _mean if q is None else (lambda xs: percentile(sorted(xs), q)))
    return None


def _missing(key: str, base: QueueResult, test: QueueResult) -> str:
    """Which run lacks the figure, with each such run's own reason for it."""
    lacking = [(name, summary_reason(doc.unavailable, key))
               for name, doc in (("BASE", base), ("TEST", test)) if doc.summary.value(key) is None]
    if len(lacking) == 1:
        name, why = lacking[0]
        return f"not available in {name}" + (f" ({why})" if why else "")
    reasons = "; ".join(f"{name}: {why}" for name, why in lacking if why)
    return "not available in both" + (f" ({reasons})" if reasons else "")


def compare_files(base: QueueResult | QueueSweepDoc | dict[str, Any],
                  test: QueueResult | QueueSweepDoc | dict[str, Any],
                  min_change: float = 0.05) -> dict[str, Any]:
    """Two run results, or two sweeps point by point (the stream counts both measured).
    A document still in its JSON form is read by its type's reader first."""
    if _is_sweep(base) and _is_sweep(test):
        return compare_sweeps(_as_sweep(base, "BASE"), _as_sweep(test, "TEST"), min_change)
    if isinstance(base, QueueSweepDoc) or isinstance(test, QueueSweepDoc) or _is_sweep(base) or _is_sweep(test):
        raise UsageError("one file is a stream sweep and the other a single run",
                         hint="compare two `queue run -o` results or two `queue sweep -o` files")
    return compare(base, test, min_change)


def _is_sweep(doc: QueueResult | QueueSweepDoc | dict[str, Any]) -> bool:
    return isinstance(doc, QueueSweepDoc) or (isinstance(doc, dict) and doc.get("kind") == SWEEP_KIND)


def _as_sweep(doc: QueueResult | QueueSweepDoc | dict[str, Any], name: str) -> QueueSweepDoc:
    if isinstance(doc, QueueSweepDoc):
        return doc
    assert isinstance(doc, dict)  # _is_sweep said so
    return QueueSweepDoc.from_json(doc, name)


def compare_sweeps(base: QueueSweepDoc, test: QueueSweepDoc, min_change: float = 0.05) -> dict[str, Any]:
    """Every stream count measured by both sweeps, compared like two runs; rows carry ``streams``."""
    by_n = [{p.config.streams: p for p in doc.points} for doc in (base, test)]
    common = sorted(set(by_n[0]) & set(by_n[1]))
    if not common:
        raise UsageError(f"the sweeps share no stream count (BASE {sorted(by_n[0])}, TEST {sorted(by_n[1])})",
                         hint="sweep both with the same --streams list")
    notes: list[str] = []
    only = sorted(set(by_n[0]) ^ set(by_n[1]))
    if only:
        notes.append(f"stream counts in only one sweep, not compared: {', '.join(map(str, only))}")
    rows: list[dict[str, Any]] = []
    for n in common:
        one = compare(by_n[0][n], by_n[1][n], min_change)
        rows += [{**r, "streams": n} for r in one["rows"]]
        notes += [f"{n} streams: {note}" for note in one["notes"] if "stream counts" not in note]
    ab, at = base.analysis, test.analysis
    for what, was, now in (("peak streams", ab.peak_streams, at.peak_streams),
                           ("knee streams", ab.knee_streams, at.knee_streams)):
        if was != now:
            notes.append(f"{what}: {was} -> {now}")
    return {
        "base": base.name, "test": test.name,
        "min_change": min_change, "notes": notes, "rows": rows, "streams": common,
        "regressions": [f"{r['metric']}@{r['streams']}" for r in rows if r["verdict"] == "regressed"],
        "improvements": [f"{r['metric']}@{r['streams']}" for r in rows if r["verdict"] == "improved"],
    }


def _spread_kind(base: QueueResult, test: QueueResult, key: str) -> str:
    kinds = ["run-to-run" if _runs(d, key) is not None else "within-run" for d in (base, test)]
    if kinds[0] == kinds[1]:
        return f"95% bootstrap CI, {kinds[0]}"
    return f"95% bootstrap CI, BASE {kinds[0]}, TEST {kinds[1]}"


# Each interval is 1000 resamples of a sample list: 1000 x 100k draws is a minute per figure,
# so a longer list (a hostile file, or a run of more iterations) is refused, not a hang.
MAX_BOOTSTRAP_SAMPLES = 100_000


def _why_unchanged(big: bool, min_change: float, ib: tuple[float, float] | None,
                   it: tuple[float, float] | None) -> str:
    """Why a figure is ``unchanged``: a "-90.8% unchanged" reads as wrong without it."""
    if not big or ib is None or it is None:  # no interval: only the size can say unchanged
        return f"|change| < {min_change:.0%}"
    return f"95% CIs overlap: base {_g(ib[0])}-{_g(ib[1])}, test {_g(it[0])}-{_g(it[1])}"


def _g(value: float) -> str:
    return f"{value:.3g}"


def compare(base_doc: Doc, test_doc: Doc, min_change: float = 0.05) -> dict[str, Any]:
    """Two run results, figure by figure (module docstring: :data:`RULE`)."""
    base, test = (_comparable(name, doc) for name, doc in (("BASE", base_doc), ("TEST", test_doc)))
    notes = _setup_notes(base, test)
    rows = [_compare_row(key, direction, base, test, min_change)
            for key, direction in base.summary.better.items()]
    counts = [d.repeats.count if d.repeats is not None else 1 for d in (base, test)]
    if min(counts) < MIN_REPEATS_FOR_SPREAD:
        notes.append(
            f"spread: BASE has {counts[0]} run(s), TEST {counts[1]}; with fewer than "
            f"{MIN_REPEATS_FOR_SPREAD} repetitions a side's interval comes from its per-iteration "
            "samples (within-run noise only, which can be smaller than the run-to-run spread); "
            f"`queue run --repeat {MIN_REPEATS_FOR_SPREAD}` on both sides gives run-to-run intervals")
    return {
        "base": base.run_id, "test": test.run_id, "min_change": min_change,
        "notes": notes, "rows": rows,
        "regressions": [r["metric"] for r in rows if r["verdict"] == "regressed"],
        "improvements": [r["metric"] for r in rows if r["verdict"] == "improved"],
    }


def _comparable(name: str, doc: Doc) -> QueueResult:
    """``doc`` as a queue run result (not another document, such as a sweep) whose sample
    lists are small enough to bootstrap."""
    kind = doc.get("kind") if isinstance(doc, dict) else KIND
    if kind != KIND:
        raise UsageError(f"{name} is a {kind}, not a queue run result",
                         hint="compare two files written by `queue run -o`")
    result = as_result(doc, name)
    _check_comparable(name, result)
    return result


def _check_comparable(name: str, doc: QueueResult) -> None:
    """A queue run result whose sample lists are small enough to bootstrap."""
    lists: dict[str, object] = {f"samples.{k}": v for k, v in doc.samples.items()}
    lists["repeats.summaries"] = doc.repeats.summaries if doc.repeats is not None else None
    for key, values in lists.items():
        if isinstance(values, (list, tuple)) and len(values) > MAX_BOOTSTRAP_SAMPLES:
            raise UsageError(
                f"{name}: {key} holds {len(values)} samples; queue compare "
                f"bootstraps at most {MAX_BOOTSTRAP_SAMPLES}",
                hint="compare runs of fewer iterations (or --repeat runs, judged by "
                     "their repetitions)")


def _setup_notes(base: QueueResult, test: QueueResult) -> list[str]:
    """How the two runs were set up differently (workload, streams, priorities, graphs)."""
    notes = []
    if base.workload.name != test.workload.name:
        notes.append(f"different workloads: {base.workload.name} vs {test.workload.name}")
    if base.config.streams != test.config.streams:
        notes.append(f"different stream counts: {base.config.streams} vs {test.config.streams}")
    # results from before --stream-priority existed ran everything at the default priority
    # (ConfigFacts reads a missing mode as that default)
    bp, tp = base.config.stream_priority, test.config.stream_priority
    if bp != tp:
        notes.append(f"different stream priorities: {bp} vs {tp}")
    # results from before --graph existed launched eagerly
    bg, tg = base.config.graph, test.config.graph
    if bg != tg:
        notes.append(f"launch mode: BASE {'CUDA-graph replay' if bg else 'eager launches'}, "
                     f"TEST {'CUDA-graph replay' if tg else 'eager launches'} (--graph): the rows "
                     "show what graphs change")
    if base.emulated != test.emulated:
        notes.append("one run is CPU-emulated, the other is not")
    return notes


def _compare_row(key: str, direction: str, base: QueueResult, test: QueueResult,
                 min_change: float) -> dict[str, Any]:
    """One summary figure of both runs: its change, intervals and verdict."""
    b, t = base.summary.value(key), test.summary.value(key)
    row: dict[str, Any] = {"metric": key, "base": b, "test": t, "unit": base.summary.unit(key)}
    if b is None or t is None:
        row.update(change=None, verdict="not comparable", reason=_missing(key, base, test))
        return row
    if key == "throughput" and base.summary.unit(key) != test.summary.unit(key):
        row.update(change=None, verdict="not comparable", reason="different units")
        return row
    # From a base of 0 there is no relative change (it would be infinite, and `Infinity` is
    # not JSON): the row says so, and the verdict rests on the sign and the intervals.
    change = (t - b) / abs(b) if b != 0 else (0.0 if t == 0 else None)
    big = abs(change) >= min_change if change is not None else t != b
    ib, it = _interval(base, key), _interval(test, key)
    row["change"] = change
    if change is None:
        row["change_reason"] = "the base value is 0: no relative change"
    row["base_ci"], row["test_ci"] = ib, it
    if ib is not None and it is not None:
        overlap = ib[0] <= it[1] and it[0] <= ib[1]
        row["spread"] = _spread_kind(base, test, key)
    else:
        overlap = False
        row["spread"] = "none recorded"
    if not big or overlap:  # RULE: whether it changed, the same for every figure
        row["verdict"] = "unchanged"
        row["why"] = _why_unchanged(big, min_change, ib, it)
    elif direction == "neither" or row["spread"] == "none recorded":
        row["verdict"] = "changed"  # which way is better is unknown, or the noise is
    else:
        up_is_good = direction == "higher"
        row["verdict"] = "improved" if (t > b) == up_is_good else "regressed"
    return row
