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
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Label, Select, Sparkline, Static

from aorta_tui.core.events import Event, HistogramSnapshot
from aorta_tui.tui import engines
from aorta_tui.tui.screens.base import AortaScreen
from aorta_tui.tui.widgets.histogram import LogHistogram, fmt_latency

REDRAW_HZ = 10
RATE_HISTORY = 120


def probe_set_names() -> list[str]:
    """The trace engine's probe-set catalogue (empty when the engine is missing)."""
    try:
        probes = engines.engine_module("aorta_tui.trace.probes", "trace", "CATALOGUE")
    except engines.EngineMissing:
        return []
    return list(probes.CATALOGUE)


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
        Binding("m", "next_metric", "Next metric"),
        Binding("t", "focus_target", "Target"),
        Binding("p", "focus_probes", "Probe set"),
    ]

    def __init__(self) -> None:
        super().__init__()
        # Newest snapshot per metric (a probe set can stream several histograms).
        self._latest: dict[str, HistogramSnapshot] = {}
        self.metric: str | None = None
        self._offered = 0
        self._drawn = 0
        self.redraws = 0
        self._rates: deque[float] = deque(maxlen=RATE_HISTORY)
        self._stop: threading.Event | None = None
        self.session: Any = None
        self._thread: threading.Thread | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="queue"):
            with Horizontal(id="queue-controls", classes="toolbar"):
                names = probe_set_names() or ["(trace engine missing)"]
                default = "cuda" if "cuda" in names else names[0]
                yield Select([(n, n) for n in names], value=default, allow_blank=False, id="probe-set",
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
        self.query_one("#queue-breakdown", DataTable).add_columns("metric / key", "count", "p50", "mean", "max")
        self._breakdown_rows: set[str] = set()
        self.set_interval(1 / REDRAW_HZ, self._redraw)

    def on_unmount(self) -> None:
        self.stop_trace()

    # --- the stream ----------------------------------------------------------------------

    def offer(self, event: Event) -> None:
        """Any thread: remember the newest histogram snapshot; drawing happens on the timer."""
        if isinstance(event, HistogramSnapshot):
            self._latest[event.probe_set] = event
            self._offered += 1

    def _redraw(self) -> None:
        if self._offered == self._drawn or not self._latest:
            return
        self._drawn = self._offered
        if self.metric not in self._latest:
            self.metric = next(iter(self._latest))
        self.render_snapshot(self._latest[self.metric])

    def action_next_metric(self) -> None:
        names = list(self._latest)
        if len(names) < 2:
            self.notify("this probe set streams one histogram", severity="information")
            return
        self.metric = names[(names.index(self.metric) + 1) % len(names)] if self.metric in names else names[0]
        self.render_snapshot(self._latest[self.metric])

    def render_snapshot(self, snap: HistogramSnapshot) -> None:
        self.redraws += 1
        others = len(self._latest) - 1
        more = f"  [dim](m: {others} more metric{'s' if others > 1 else ''})[/dim]" if others > 0 else ""
        self.query_one("#queue-measures", Static).update(
            Text.assemble((snap.probe_set, "bold"), f": {snap.measures}  ", (f"unit {snap.unit}", "dim"))
            + Text.from_markup(more)
        )
        self.query_one(LogHistogram).show(snap.buckets, snap.unit)
        pct = snap.percentiles
        cost = snap.observer_cost or {}
        cost_text = _observer_cost_text(cost)
        lines = [
            f"events   {snap.count:,}",
            *(f"{name:<8} {fmt_latency(pct.get(name), snap.unit)}" for name in ("p50", "p90", "p99", "max")),
            f"rate     {snap.events_per_s:,.0f}/s (last interval)",
            f"lost     {snap.lost_events}" + ("  [b red]events lost[/]" if snap.lost_events else ""),
            f"bad line {snap.malformed_lines}",
            f"observer {cost_text}",
        ]
        self.query_one("#queue-stats", Static).update("\n".join(lines))
        self._rates.append(float(snap.events_per_s))
        self.query_one("#queue-rate", Sparkline).data = list(self._rates)
        self._update_breakdown(snap)

    def _update_breakdown(self, snap: HistogramSnapshot) -> None:
        """Rows keyed by metric and ring/queue/stream/cmd; updated in place, never rebuilt."""
        table = self.query_one("#queue-breakdown", DataTable)
        for key, figures in snap.breakdown.items():
            row_key = f"{snap.probe_set}\0{key}"
            values = (
                f"{figures.get('count', 0):,}",
                fmt_latency(figures.get("p50"), snap.unit),
                fmt_latency(figures.get("mean"), snap.unit),
                fmt_latency(figures.get("max"), snap.unit),
            )
            if row_key not in self._breakdown_rows:
                table.add_row(Text(f"{snap.probe_set} {key}"), *values, key=row_key)
                self._breakdown_rows.add(row_key)
            else:
                for column, value in zip(table.ordered_columns[1:], values, strict=True):
                    table.update_cell(row_key, column.key, value)

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
        pid = target.get("pid")
        try:
            # The snapshot interval matches the redraw cadence; the session's stop() detaches
            # bpftrace (and ends a command it started) when the with-block exits.
            with trace.TraceSession([probes], interval_s=1 / REDRAW_HZ, on_event=self.offer,
                                    run_id="tui-queue", **target) as session:
                self.session = session
                while not stop.wait(0.2):
                    if session.command and session.wait(0) is not None:
                        self.from_thread(self.notify, f"the traced command exited ({session.child_returncode})")
                        break
                    if pid is not None and not Path(f"/proc/{pid}").exists():
                        self.from_thread(self.notify, f"process {pid} exited")
                        break
                warnings = list(session.warnings)
            for warning in warnings:
                self.from_thread(self.notify, warning, title="trace", severity="warning")
        except Exception as exc:  # shown, never a crash
            render = getattr(exc, "render", None)
            message = render() if callable(render) else f"{type(exc).__name__}: {exc}"
            self.from_thread(self.notify, message, title="trace", severity="error", timeout=12)

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
    """The trace engine's observer-cost estimate, or why it has none."""
    if not cost:
        return "not available (the trace engine reported none)"
    per_hit = cost.get("per_hit_us")
    fraction = cost.get("cpu_fraction")
    if per_hit is None or fraction is None:
        return f"not available ({cost.get('reason', 'not measured')})"
    return f"{per_hit:.2f}µs/probe hit ≈ {fraction:.1%} of a core"
