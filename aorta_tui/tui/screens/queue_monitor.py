"""Queue monitor: a live submit -> dispatch latency histogram from the trace engine.

The tracer can deliver 100k events/s; the screen never redraws per event. ``offer`` (any
thread) only keeps the newest ``HistogramSnapshot``; a timer redraws at ``REDRAW_HZ`` when a
newer one arrived, updating widgets in place.
"""

from __future__ import annotations

import shlex
import sys
import threading
from collections import deque
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Label, Select, Sparkline, Static

from aorta_tui.core.events import Event, HistogramSnapshot
from aorta_tui.tui import engines
from aorta_tui.tui.screens.base import AortaScreen
from aorta_tui.tui.widgets.histogram import LogHistogram, fmt_latency

REDRAW_HZ = 10
DEFAULT_PROBE_SETS = ("cuda", "hip", "amdgpu", "drm_sched", "memory")
RATE_HISTORY = 120


def probe_set_names() -> list[str]:
    try:
        trace = engines.trace()
    except engines.EngineMissing:
        return list(DEFAULT_PROBE_SETS)
    for attr in ("PROBE_SETS", "probe_set_names", "list_probe_sets"):
        found = getattr(trace, attr, None)
        if found is not None:
            names = found() if callable(found) else found
            return [str(n) for n in names]
    return list(DEFAULT_PROBE_SETS)


def parse_target(text: str) -> dict[str, Any]:
    """``1234`` or ``pid 1234`` -> pid; ``queue WORKLOAD ...`` -> a ``queue run``; else a command."""
    words = shlex.split(text)
    if not words:
        raise ValueError("give a target: a pid, a command, or `queue WORKLOAD`")
    if len(words) == 1 and words[0].isdigit():
        return {"pid": int(words[0])}
    if words[0] == "pid" and len(words) == 2 and words[1].isdigit():
        return {"pid": int(words[1])}
    if words[0] == "queue" and len(words) >= 2:
        return {"command": [sys.executable, "-m", "aorta_tui", "queue", "run", *words[1:]]}
    return {"command": words}


class QueueMonitorScreen(AortaScreen):
    TITLE_TEXT = "Queue monitor"
    MAIN_WIDGET = "#queue-breakdown"
    BINDINGS = [
        Binding("escape", "focus_main", "Leave field", show=False),
        Binding("s", "toggle_trace", "Start/stop"),
        Binding("t", "focus_target", "Target"),
        Binding("p", "focus_probes", "Probe set"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._latest: HistogramSnapshot | None = None
        self._offered = 0
        self._drawn = 0
        self.redraws = 0
        self._rates: deque[float] = deque([0.0], maxlen=RATE_HISTORY)
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="queue"):
            with Horizontal(id="queue-controls", classes="toolbar"):
                names = probe_set_names()
                yield Select([(n, n) for n in names], value=names[0], allow_blank=False, id="probe-set",
                             compact=True)
                yield Label(" target ")
                yield Input(placeholder="PID | command ... | queue WORKLOAD --streams 8", id="trace-target",
                            compact=True)
            yield Static(self._idle_text(), id="queue-measures")
            with Horizontal(id="queue-main"):
                yield LogHistogram(id="queue-hist")
                with Vertical(id="queue-side"):
                    yield Static("", id="queue-stats")
                    yield Static("events/s", classes="pane-title")
                    yield Sparkline(list(self._rates), id="queue-rate")
            yield DataTable(id="queue-breakdown", cursor_type="row", zebra_stripes=True)

    def _idle_text(self) -> str:
        missing = engines.available(engines.trace)
        return missing or "choose a probe set and a target, then s to start"

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#queue-breakdown", DataTable).add_columns("key", "count", "p50", "p99", "max")
        self._breakdown_rows: set[str] = set()
        self.set_interval(1 / REDRAW_HZ, self._redraw)

    def on_unmount(self) -> None:
        self.stop_trace()

    # --- the stream ----------------------------------------------------------------------

    def offer(self, event: Event) -> None:
        """Any thread: remember the newest histogram snapshot; drawing happens on the timer."""
        if isinstance(event, HistogramSnapshot):
            self._latest = event
            self._offered += 1

    def _redraw(self) -> None:
        if self._offered == self._drawn or self._latest is None:
            return
        self._drawn = self._offered
        self.render_snapshot(self._latest)

    def render_snapshot(self, snap: HistogramSnapshot) -> None:
        self.redraws += 1
        self.query_one("#queue-measures", Static).update(
            f"[b]{snap.probe_set}[/b]: {snap.measures}  [dim](unit {snap.unit})[/dim]"
        )
        self.query_one(LogHistogram).show(snap.buckets, snap.unit)
        pct = snap.percentiles
        cost = snap.observer_cost or {}
        cost_text = _observer_cost_text(cost)
        lines = [
            f"events   {snap.count}",
            *(f"{name:<8} {fmt_latency(pct.get(name), snap.unit)}" for name in ("p50", "p90", "p99", "max")),
            f"rate     {snap.events_per_s:,.0f}/s",
            f"lost     {snap.lost_events}" + ("  [b red]events lost[/]" if snap.lost_events else ""),
            f"bad line {snap.malformed_lines}",
            f"observer {cost_text}",
        ]
        self.query_one("#queue-stats", Static).update("\n".join(lines))
        self._rates.append(float(snap.events_per_s))
        self.query_one("#queue-rate", Sparkline).data = list(self._rates)
        self._update_breakdown(snap)

    def _update_breakdown(self, snap: HistogramSnapshot) -> None:
        """Rows keyed by ring/queue/stream; existing rows updated in place, never rebuilt."""
        table = self.query_one("#queue-breakdown", DataTable)
        for key, figures in sorted(snap.breakdown.items()):
            pct = figures.get("percentiles", figures)
            values = (
                str(figures.get("count", "")),
                fmt_latency(pct.get("p50"), snap.unit),
                fmt_latency(pct.get("p99"), snap.unit),
                fmt_latency(pct.get("max"), snap.unit),
            )
            if key not in self._breakdown_rows:
                table.add_row(key, *values, key=key)
                self._breakdown_rows.add(key)
            else:
                for column, value in zip(table.ordered_columns[1:], values, strict=False):
                    table.update_cell(key, column.key, value)

    # --- starting and stopping the tracer ------------------------------------------------

    @property
    def tracing(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def action_toggle_trace(self) -> None:
        if self.tracing:
            self.stop_trace()
            self.notify("tracer stopped and detached")
            return
        try:
            target = parse_target(self.query_one("#trace-target", Input).value)
            trace = engines.trace()
        except (ValueError, engines.EngineMissing) as exc:
            self.notify(str(exc), severity="error")
            return
        probes = str(self.query_one("#probe-set", Select).value)
        stop = threading.Event()
        self._stop = stop
        self._thread = threading.Thread(target=self._trace, args=(trace, probes, target, stop),
                                        name="queue-trace", daemon=True)
        self._thread.start()
        self.notify(f"tracing {probes} on {target}")

    def _trace(self, trace: Any, probes: str, target: dict[str, Any], stop: threading.Event) -> None:
        try:
            with trace.TraceSession([probes], interval_s=1 / REDRAW_HZ, on_event=self.offer, **target) as session:
                while not stop.wait(0.1):
                    if getattr(session, "finished", False):
                        break
        except Exception as exc:  # shown, never a crash
            render = getattr(exc, "render", None)
            message = render() if callable(render) else f"{type(exc).__name__}: {exc}"
            self.app.call_from_thread(self.notify, message, title="trace", severity="error", timeout=12)

    def stop_trace(self, timeout: float = 5.0) -> None:
        """Stop the tracer and wait until its session (and bpftrace) is gone."""
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def action_focus_target(self) -> None:
        self.query_one("#trace-target", Input).focus()

    def action_focus_probes(self) -> None:
        self.query_one("#probe-set", Select).focus()


def _observer_cost_text(cost: dict[str, Any]) -> str:
    if not cost:
        return "not available (no calibration reported)"
    fraction = cost.get("cpu_fraction", cost.get("fraction"))
    per_hit = cost.get("per_hit_ns", cost.get("per_event_ns"))
    if fraction is None and per_hit is None:
        return f"not available ({cost.get('reason', 'not measured')})"
    parts = []
    if per_hit is not None:
        parts.append(f"{per_hit:.0f}ns/event")
    if fraction is not None:
        parts.append(f"{fraction:.1%} of a core")
    return ", ".join(parts)
