"""The trace exporter's series from snapshots and per-key histograms: the key cap with `other`,
exact counts and sums, scrubbed keys, the observer cost and clock uncertainty gauges."""

from __future__ import annotations

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aorta_tui.core.events import HistogramSnapshot
from aorta_tui.metrics.labels import MAX_KEYS, OTHER
from aorta_tui.metrics.trace_metrics import TraceMetrics
from aorta_tui.trace.hdr import LogLinearHistogram

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


class Session:
    """What the exporter reads of a TraceSession: 40 streams with known values, one key a token."""

    pid, child_pid, device, lost_reported = 4242, None, None, 7

    def __init__(self) -> None:
        rng = np.random.default_rng(3)
        self.rows, self.values = [], {}
        for k in range(40):
            v = rng.integers(500, 2_000_000, size=10 + k).astype(np.int64)
            h = LogLinearHistogram()
            h.add_array(v)
            key = TOKEN if k == 39 else hex(0x1000 + k)
            self.values[key] = v
            self.rows.append((key, len(v), dict(h.counts), int(v.sum())))

    def histograms_by_key(self, name: str):
        return "duration", self.rows


def _samples(exporter: TraceMetrics) -> list:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)
    text = generate_latest(registry).decode()
    assert TOKEN not in text
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


def test_keys_are_capped_into_other_and_counts_and_sums_stay_exact() -> None:
    session = Session()
    ex = TraceMetrics(mode="events", probe_sets=["cuda"])
    ex.attach(session)
    total = sum(len(v) for v in session.values.values())
    ex.on_event(HistogramSnapshot("t", probe_set="cuda.launch_to_start", measures="launch -> start", unit="us",
                                  count=total, lost_events=3, malformed_lines=2,
                                  observer_cost={"per_hit_us": 1.5, "cpu_fraction": 0.02},
                                  clock={"uncertainty_ns": 400}))
    samples = _samples(ex)
    counts = {s.labels["key"]: s.value for s in samples if s.name == "aorta_trace_launch_to_start_seconds_count"}
    assert len(counts) == MAX_KEYS and OTHER in counts
    assert sum(counts.values()) == total
    busiest = sorted(session.values, key=lambda k: -len(session.values[k]))[: MAX_KEYS - 1]
    assert TOKEN in busiest  # the busiest key of all is a token: kept, under its scrubbed name
    assert set(counts) - {OTHER} == (set(busiest) - {TOKEN}) | {"<redacted:secret>"}
    assert counts["<redacted:secret>"] == len(session.values[TOKEN])
    sums = {s.labels["key"]: s.value for s in samples if s.name == "aorta_trace_launch_to_start_seconds_sum"}
    assert abs(sums["0x1026"] - session.values["0x1026"].sum() / 1e9) < 1e-12
    by_name = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}
    assert by_name[("aorta_trace_events_total", (("metric", "launch_to_start"), ("probe_set", "cuda")))] == total
    assert by_name[("aorta_trace_lost_events_total", (("metric", "launch_to_start"), ("probe_set", "cuda")))] == 3
    assert by_name[("aorta_trace_dropped_records_total", (("reason", "bpftrace_lost"),))] == 7
    assert by_name[("aorta_trace_dropped_records_total", (("reason", "malformed"),))] == 2
    assert by_name[("aorta_trace_observer_cpu_fraction", (("probe_set", "cuda"),))] == 0.02
    assert by_name[("aorta_trace_observer_per_hit_seconds", (("probe_set", "cuda"),))] == 1.5e-6
    assert by_name[("aorta_trace_clock_uncertainty_seconds", (("metric", "launch_to_start"), ("probe_set", "cuda")))] == 4e-7
    # every bucket series is cumulative and ends at its count
    for key, n in counts.items():
        le = [s.value for s in samples if s.name == "aorta_trace_launch_to_start_seconds_bucket" and s.labels["key"] == key]
        assert le == sorted(le) and le[-1] == n


def test_two_keys_that_scrub_to_one_label_are_one_series_summed() -> None:
    """Two tokens among the busiest keys both scrub to "<redacted:secret>": one series with
    both counts, never two series with the same labels (Prometheus refuses such a scrape)."""
    other_token = "ghp_" + "Zz9yX8wV7uT6sR5qP4oN3mL2kJ1iH0gF9eD8"
    session = Session()
    key, n, counts, total = session.rows[38]
    session.rows[38] = (other_token, n, counts, total)
    session.values[other_token] = session.values.pop(key)
    ex = TraceMetrics(mode="events", probe_sets=["cuda"])
    ex.attach(session)
    grand = sum(len(v) for v in session.values.values())
    ex.on_event(HistogramSnapshot("t", probe_set="cuda.launch_to_start", measures="launch -> start", unit="us",
                                  count=grand, lost_events=0, malformed_lines=0, observer_cost={}, clock={}))
    samples = _samples(ex)
    assert other_token not in repr(samples)
    for name in ("aorta_trace_launch_to_start_seconds_count", "aorta_trace_key_events_total"):
        labels = [tuple(sorted(s.labels.items())) for s in samples if s.name == name]
        assert len(labels) == len(set(labels)), name  # no duplicate series
        got = {s.labels["key"]: s.value for s in samples if s.name == name}
        assert got["<redacted:secret>"] == len(session.values[TOKEN]) + len(session.values[other_token])
        assert sum(got.values()) == grand


class PartsSession:
    """A session whose per-key histograms are the fake default-mode stream's (issue 34)."""

    pid, child_pid, device, lost_reported = 4242, None, None, 0

    def __init__(self) -> None:
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tui"))
        from launch_parts_stream import snapshots

        self.snaps = snapshots()

    def histograms_by_key(self, name: str):
        snap = next(s for s in self.snaps if s.probe_set == name)
        rows = []
        for key, b in snap.breakdown.items():
            h = LogLinearHistogram()
            if b["count"] and b.get("p50") is not None:
                h.add_array(np.full(b["count"], int(b["p50"] * 1000), dtype=np.int64))
            rows.append((key, b["count"], dict(h.counts), int(h.total and b["p50"] * 1000 * b["count"])))
        return ("point" if name.endswith(".launch") else "duration"), rows


def test_the_three_parts_and_the_program_cost_are_exported() -> None:
    session = PartsSession()
    ex = TraceMetrics(mode="events", probe_sets=["cuda"])
    ex.attach(session)
    for snap in session.snaps:
        ex.on_event(snap)
    samples = _samples(ex)
    by_name = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}
    counts = {s.name: s.value for s in samples if s.name.endswith("_seconds_count")}
    launches = next(s.count for s in session.snaps if s.probe_set == "cuda.launch_to_start")
    assert counts["aorta_trace_launch_push_seconds_count"] == launches
    assert counts["aorta_trace_launch_gpu_queue_seconds_count"] == launches
    share = next(s.observer_cost["program_cost"] for s in session.snaps)
    assert by_name[("aorta_trace_program_cost_share", (("bound", "median"), ("probe_set", "cuda")))] == share["share"]
    assert by_name[("aorta_trace_program_cost_share", (("bound", "high"), ("probe_set", "cuda")))] == share["share_ci95"][1]
