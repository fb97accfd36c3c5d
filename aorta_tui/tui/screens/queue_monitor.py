"""Queue monitor: a live submit -> dispatch latency histogram from the trace engine.

The tracer runs in a worker process (``aorta_tui.tui.trace_worker``) that streams the trace
engine's ``HistogramSnapshot`` events as JSON lines, so parsing 100k events/s never costs the
TUI's process, and a lost TUI takes its tracer with it. The screen never redraws per event:
``offer`` (any thread) only keeps the newest snapshot per metric; a timer checks ``CHECK_HZ``
times a second and redraws, at most ``REDRAW_HZ`` times a second, when a newer one arrived,
updating widgets in place.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Label, Select, Sparkline, Static

from aorta_tui.core.events import Event, HistogramSnapshot, Measurement, Warning, event_from_dict
from aorta_tui.tui import engines
from aorta_tui.tui.screens.base import AortaScreen
from aorta_tui.tui.widgets.histogram import LogHistogram, fmt_latency

REDRAW_HZ = 12  # at most this many redraws a second (>= 10 sustained, with headroom)
CHECK_HZ = 24  # how often to look for a newer snapshot (cheap: two integers compared)
SNAPSHOT_S = 0.07  # a little faster than the redraw cadence, so every redraw has a new one
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
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self.attached: dict[str, Any] | None = None
        self.stderr_path: Path | None = None

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
        self._breakdown_values: dict[str, tuple[str, ...]] = {}
        self._last_header: tuple[str, ...] | None = None
        # Checking twice per redraw period keeps the rate near REDRAW_HZ when a tick is late.
        self._last_draw = 0.0
        self.set_interval(1 / CHECK_HZ, self._redraw)

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
        now = time.monotonic()
        if now - self._last_draw < 0.95 / REDRAW_HZ:
            return
        self._last_draw = now
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
        # Redraws touch only what changed, and never ask for a new layout of the screen:
        # at 10 snapshots/s a relayout per snapshot is most of the UI's CPU.
        others = len(self._latest) - 1
        more = f"  [dim](m: {others} more metric{'s' if others > 1 else ''})[/dim]" if others > 0 else ""
        header = (snap.probe_set, snap.measures, snap.unit, more)
        if header != self._last_header:
            self._last_header = header
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
            f"rate     {snap.events_per_s:,.0f}/s now",
            (f"lost     {snap.lost_events}" + ("  [b red]events lost[/]" if snap.lost_events else "")
             if snap.lost_events is not None else "lost     not known yet (no in-kernel count so far)"),
            f"bad line {snap.malformed_lines}",
            f"observer {cost_text}",
        ]
        self.query_one("#queue-stats", Static).update("\n".join(lines), layout=False)
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
            previous = self._breakdown_values.get(row_key)
            if previous is None:
                table.add_row(Text(f"{snap.probe_set} {key}"), *values, key=row_key)
            elif previous != values:
                for column, old, new in zip(table.ordered_columns[1:], previous, values, strict=True):
                    if old != new:
                        table.update_cell(row_key, column.key, new, update_width=len(new) > len(old))
            self._breakdown_values[row_key] = values

    # --- starting and stopping the tracer ------------------------------------------------

    @property
    def tracing(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def action_toggle_trace(self) -> None:
        if self.tracing:
            self.stop_trace()
            self.notify("tracer stopped and detached")
            return
        missing = engines.available(engines.trace)
        if missing:
            self.notify(missing, severity="error")
            return
        try:
            target = parse_target(self.query_one("#trace-target", Input).value)
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        probes = str(self.query_one("#probe-set", Select).value)
        args = ["--probes", probes]
        args += ["--pid", str(target["pid"])] if "pid" in target else ["--", *target["command"]]
        self.start_worker(args)
        self.notify(f"starting the {probes} tracer on {target}")

    def start_worker(self, args: list[str]) -> None:
        """Start ``trace_worker`` with ``args`` and follow its events (the benchmark uses this)."""
        argv = [sys.executable, "-m", "aorta_tui.tui.trace_worker", "--interval", str(SNAPSHOT_S), *args]
        self.stderr_path = Path(tempfile.gettempdir()) / f"aorta-tui-trace-{os.getpid()}.log"
        self._latest.clear()
        self.attached = None
        with open(self.stderr_path, "wb") as err:
            # Own session: a Ctrl-C meant for the TUI never reaches the tracer unasked.
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=err, start_new_session=True)
        self._reader = threading.Thread(target=self._read_worker, args=(self._proc,), name="queue-trace",
                                        daemon=True)
        self._reader.start()

    def _read_worker(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                event = event_from_dict(json.loads(raw))
            except (ValueError, TypeError, AttributeError):
                continue
            if isinstance(event, HistogramSnapshot):
                self.offer(event)  # coalesced: no call into the UI per snapshot
            elif isinstance(event, Measurement) and event.name == "attached":
                self.attached = dict(event.values)
                self.from_thread(self.notify, f"attached: {event.values}")
            elif isinstance(event, Warning):
                self.from_thread(self.notify, event.message, title="trace",
                                 severity="error" if event.code == "error" else "warning", timeout=12)
        code = proc.wait()
        if code not in (0, -signal.SIGINT):
            self.from_thread(self.notify, f"the tracer exited with {code} (log: {self.stderr_path})",
                             severity="error")

    def stop_trace(self, timeout: float = 10.0) -> None:
        """Stop the tracer worker and wait until it has detached bpftrace and exited."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGINT)  # the worker stops its session cleanly
                proc.wait(timeout)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        if self._reader is not None:
            self._reader.join(2)
        self._proc = None

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
