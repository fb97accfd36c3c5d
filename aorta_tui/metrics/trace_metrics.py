"""A trace session's figures as Prometheus series (``trace queue --metrics``).

Fed from the session's own snapshot thread (``on_event``, once per ``--interval`` and once
after the final drain): each snapshot is turned into ready series there and swapped in under a
short lock, so a scrape only copies what is ready and never touches the session. The figures
are the ones ``-o`` writes: ``aorta_trace_events_total`` is the result's ``count``, the
histograms' ``_count`` the result's histogram count.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from aorta_tui.metrics import buckets
from aorta_tui.metrics.labels import MAX_KEYS, OTHER, LabelSanitiser, capped

if TYPE_CHECKING:
    from aorta_tui.core.events import Event, HistogramSnapshot
    from aorta_tui.trace.session import TraceSession

PREFIX = "aorta_trace"
CAP_TEXT = (f"at most {MAX_KEYS} keys (streams, devices, ioctl commands) per metric and process: "
            f"the {MAX_KEYS - 1} busiest, the rest summed into key=\"{OTHER}\"")
_NAME_RE = re.compile(r"[^a-zA-Z0-9_]")


def family_name(metric: str, kind: str, unit: str) -> str:
    """``aorta_trace_launch_to_start_seconds``; an occurrence metric's histogram holds the
    interval between events: ``aorta_trace_launch_interval_seconds``."""
    base = _NAME_RE.sub("_", metric).strip("_") or "metric"
    if kind == "point":
        base += "_interval"
    return f"{PREFIX}_{base}_{buckets.exported_unit('us' if kind == 'point' else unit)}"


@dataclass
class _Hist:
    """One metric's ready series (one per key), built in the snapshot thread."""

    name: str
    help: str
    bounds: tuple[float, ...]
    series: list[tuple[list[str], list[int], float]] = field(default_factory=list)  # labels, cumulative, sum


@dataclass
class _State:
    hists: dict[tuple[str, str], _Hist] = field(default_factory=dict)  # (set, metric) -> series
    events: dict[tuple[str, str], int] = field(default_factory=dict)
    key_events: dict[tuple[str, str], list[tuple[str, int]]] = field(default_factory=dict)
    lost: dict[tuple[str, str], int] = field(default_factory=dict)
    clock: dict[tuple[str, str], float] = field(default_factory=dict)
    cost: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    # probe set -> the program's cost share (median, 95% low, 95% high): trace/cost.py
    program_cost: dict[str, tuple[float, float | None, float | None]] = field(default_factory=dict)
    units: dict[tuple[str, str], str] = field(default_factory=dict)
    malformed: int = 0
    bpftrace_lost: int = 0


class TraceMetrics:
    """A prometheus_client collector of one trace session; its :meth:`on_event` is a sink."""

    def __init__(self, *, mode: str, probe_sets: list[str], process: str = "",
                 sanitise: LabelSanitiser | None = None) -> None:
        self.mode = mode
        self.probe_sets = list(probe_sets)
        self.process = process
        self.running = True
        self.launch_source = ""
        self.session: TraceSession | None = None
        self._clean = sanitise or LabelSanitiser()
        self._lock = threading.Lock()
        self._state = _State()

    def attach(self, session: TraceSession) -> None:
        """The session whose per-key histograms the snapshots are completed with."""
        self.session = session
        self.probe_sets = list(getattr(session, "probe_names", self.probe_sets))  # after auto-selection
        target = session.pid if session.pid is not None else session.child_pid
        self.process = str(target) if target is not None else ""
        device = getattr(session, "device", None)
        src = device.launch_source_info() if device is not None else None
        self.launch_source = str(src["mode"]) if src else ""

    def finished(self) -> None:
        self.running = False

    # -- feeding (the session's snapshot thread) -----------------------------------------------
    def on_event(self, event: Event) -> None:
        if event.kind != "histogram_snapshot":
            return
        event = cast("HistogramSnapshot", event)  # the one event of that kind
        set_name, _, metric = event.probe_set.partition(".")
        key = (set_name, metric)
        kind, rows = (self.session.histograms_by_key(event.probe_set) if self.session is not None
                      else ("", []))
        hist = self._histogram(set_name, metric, kind or _kind_of(event), event, rows)
        # two keys may scrub to one label (two secrets both "<redacted:secret>"): one series,
        # summed, never two series with the same labels (Prometheus refuses such a scrape)
        per_key_sums: dict[str, int] = {}
        for k, n, _c, _s in rows or []:
            label = self._clean(k)
            per_key_sums[label] = per_key_sums.get(label, 0) + n
        per_key = list(per_key_sums.items())
        cost = event.observer_cost or {}
        per_hit = cost.get("per_hit_us")
        uncertainty = (event.clock or {}).get("uncertainty_ns")
        with self._lock:
            state = self._state
            if hist is not None:
                state.hists[key] = hist
            state.events[key] = int(event.count)
            state.key_events[key] = per_key
            if event.lost_events is not None:
                state.lost[key] = int(event.lost_events)
            if uncertainty is not None:
                state.clock[key] = float(uncertainty) / 1e9
            state.cost[set_name] = (cost.get("cpu_fraction"),
                                    None if per_hit is None else float(per_hit) / 1e6)
            pc = cost.get("program_cost") or {}
            if pc.get("share") is not None:
                ci = pc.get("share_ci95") or [None, None]
                state.program_cost[set_name] = (float(pc["share"]), ci[0], ci[1])
            state.units[key] = event.unit
            state.malformed = int(event.malformed_lines)
            if self.session is not None:
                state.bpftrace_lost = int(getattr(self.session, "lost_reported", 0) or 0)

    def _histogram(self, set_name: str, metric: str, kind: str, event: HistogramSnapshot,
                   rows: list[Any]) -> _Hist | None:
        unit = "us" if kind == "point" else event.unit
        bounds, per_unit, bounds_text = buckets.bounds_for(unit)
        name = family_name(metric, kind, event.unit)
        help_text = (f"{event.measures}; classic histogram (prometheus_client has no native ones), "
                     f"buckets {bounds_text}; exact percentiles are in the tool's -o result; {CAP_TEXT}")
        hist = _Hist(name, help_text, bounds)
        kept, rest = capped([(k, c) for k, _n, c, _s in _hist_rows(rows)])
        by_key = {k: (counts, total) for k, counts, total in _merged(rows)}
        # one series per label as scraped: keys that scrub to one label, and the keys past the
        # cap (OTHER), are summed into it (Prometheus refuses two series with the same labels)
        merged: dict[str, tuple[dict[int, int], float]] = {}
        for label, k in [*((self._clean(k), k) for k in kept), *((OTHER, k) for k in rest)]:
            counts, total = by_key[k]
            acc, acc_total = merged.get(label, ({}, 0.0))
            for i, c in counts.items():
                acc[i] = acc.get(i, 0) + c
            merged[label] = (acc, acc_total + total)
        for label, (label_counts, label_total) in merged.items():
            hist.series.append(([set_name, self.process, label],
                                buckets.rebucket(label_counts, bounds, per_unit),
                                label_total / per_unit))
        return hist if hist.series else None

    # -- scraping (the server's threads) -------------------------------------------------------
    def collect(self) -> Iterator[Any]:
        with self._lock:  # a consistent copy; the families are built outside the lock
            s = self._state
            snap = _State(hists=dict(s.hists), events=dict(s.events),
                          key_events=dict(s.key_events), lost=dict(s.lost), clock=dict(s.clock),
                          cost=dict(s.cost), program_cost=dict(s.program_cost),
                          units=dict(s.units), malformed=s.malformed,
                          bpftrace_lost=s.bpftrace_lost)
        yield from self._trace_families(snap)
        yield from _histogram_families(snap)
        yield from self._event_families(snap)
        yield from self._cost_families(snap)

    def _trace_families(self, snap: _State) -> Iterator[Any]:
        """The trace's info, whether it is running, and each metric's probe set and unit."""
        from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

        clean = self._clean
        info = InfoMetricFamily(PREFIX, "the trace: its mode, probe sets and where launches come from",
                                labels=[])
        info.add_metric([], {"mode": clean(self.mode), "probe_sets": clean(",".join(self.probe_sets)),
                             "launch_source": clean(self.launch_source or "n/a")})
        yield info
        yield GaugeMetricFamily(f"{PREFIX}_running", "1 while tracing, 0 once the trace has ended "
                                "(served a little longer with --metrics-linger)", value=1 if self.running else 0)
        src = InfoMetricFamily(f"{PREFIX}_source", "each traced metric: its probe set and unit",
                               labels=["probe_set", "metric"])
        for (ps, m), unit in sorted(snap.units.items()):
            src.add_metric([clean(ps), clean(m)], {"unit": clean(unit)})
        yield src

    def _event_families(self, snap: _State) -> Iterator[Any]:
        """Events per metric and per key, lost events, dropped records."""
        from prometheus_client.core import CounterMetricFamily

        clean = self._clean
        ev = CounterMetricFamily(f"{PREFIX}_events", "events each metric recorded (the -o result's count)",
                                 labels=["probe_set", "metric"])
        for (ps, m), n in sorted(snap.events.items()):
            ev.add_metric([clean(ps), clean(m)], n)
        yield ev
        kev = CounterMetricFamily(f"{PREFIX}_key_events", f"events per key (the -o breakdown's count); {CAP_TEXT}",
                                  labels=["probe_set", "metric", "process", "key"])
        for (ps, m), rows in sorted(snap.key_events.items()):
            kept, rest = capped(rows)
            counts = dict(rows)  # one entry per label: on_event summed what scrubs alike
            summed = {k: counts[k] for k in kept}
            if rest:
                summed[OTHER] = summed.get(OTHER, 0) + sum(counts[k] for k in rest)
            for k, n in summed.items():
                kev.add_metric([clean(ps), clean(m), self.process, k], n)
        yield kev
        lo = CounterMetricFamily(f"{PREFIX}_lost_events", "records the kernel (or the CUPTI collector) produced "
                                 "that never reached the tracer; absent until known", labels=["probe_set", "metric"])
        for (ps, m), n in sorted(snap.lost.items()):
            lo.add_metric([clean(ps), clean(m)], n)
        yield lo
        dr = CounterMetricFamily(f"{PREFIX}_dropped_records", "records dropped on the way: bpftrace's reported "
                                 "perf-buffer losses (reason=bpftrace_lost) and lines that did not parse "
                                 "(reason=malformed)", labels=["reason"])
        dr.add_metric(["bpftrace_lost"], snap.bpftrace_lost)
        dr.add_metric(["malformed"], snap.malformed)
        yield dr

    def _cost_families(self, snap: _State) -> Iterator[Any]:
        """The observer's CPU cost, the traced program's cost share, the clock uncertainty."""
        from prometheus_client.core import GaugeMetricFamily

        clean = self._clean
        cpu = GaugeMetricFamily(f"{PREFIX}_observer_cpu_fraction", "estimated CPU the probes take (records x "
                                "the calibrated cost per probe hit), as a fraction of one CPU", labels=["probe_set"])
        hit = GaugeMetricFamily(f"{PREFIX}_observer_per_hit_seconds", "calibrated cost of one probe hit",
                                labels=["probe_set"])
        for ps, (fraction, per_hit) in sorted(snap.cost.items()):
            if fraction is not None:
                cpu.add_metric([clean(ps)], float(fraction))
            if per_hit is not None:
                hit.add_metric([clean(ps)], per_hit)
        yield cpu
        yield hit
        share = GaugeMetricFamily(f"{PREFIX}_program_cost_share", "what the traced program pays: added time per "
                                  "launch x launches seen, as a share of its wall time (a lower bound; bound=low/"
                                  "high: the 95% interval of the per-launch measurement)",
                                  labels=["probe_set", "bound"])
        for ps, figures in sorted(snap.program_cost.items()):
            for bound, v in zip(("median", "low", "high"), figures, strict=True):
                if v is not None:
                    share.add_metric([clean(ps), bound], float(v))
        yield share
        ck = GaugeMetricFamily(f"{PREFIX}_clock_uncertainty_seconds", "uncertainty of the host/device clock "
                               "alignment of a two-clock metric (launch_to_start)", labels=["probe_set", "metric"])
        for (ps, m), v in sorted(snap.clock.items()):
            ck.add_metric([clean(ps), clean(m)], v)
        yield ck


def _histogram_families(snap: _State) -> Iterator[Any]:
    """One histogram family per metric name, a series per probe set, process and key."""
    from prometheus_client.core import HistogramMetricFamily

    families: dict[str, Any] = {}
    for (_ps, _m), h in snap.hists.items():
        fam = families.get(h.name)
        if fam is None:
            fam = families[h.name] = HistogramMetricFamily(h.name, h.help, labels=["probe_set", "process", "key"])
        for labels, cumulative, total in h.series:
            pairs = [(_le(b), float(c)) for b, c in zip(h.bounds, cumulative, strict=False)]
            pairs.append(("+Inf", float(cumulative[-1])))
            fam.add_metric(labels, pairs, sum_value=total)
    yield from families.values()


def _kind_of(event: HistogramSnapshot) -> str:
    """A snapshot's metric kind from its unit (a session always says it; a replay may not)."""
    return {"bytes": "size", "us": "duration"}.get(event.unit, "count")


def _le(bound: float) -> str:
    return f"{bound:.9g}"


def _hist_rows(rows: list[Any]) -> list[tuple[str, int, int, int]]:
    """(key, events, values in its histogram, sum) of the rows whose histogram holds values."""
    return [(k, n, sum(counts.values()), total) for k, n, counts, total in rows if counts]


def _merged(rows: list[Any]) -> list[tuple[str, dict[int, int], int]]:
    return [(k, counts, total) for k, _n, counts, total in rows if counts]
