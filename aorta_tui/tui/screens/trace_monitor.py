"""Trace monitor: a live submit -> dispatch latency histogram from the trace engine.

The tracer is ``aorta-tui trace queue --json`` in its own process group, run through
``relay.engine_run.EngineRun`` (``--replay FILE`` for a recording), so parsing 100k events/s never
costs the TUI's process, and a lost TUI takes its tracer with it. The bridge's worker
(``tui.bridge``) posts its events; snapshots arrive as ``EngineSnapshots`` messages that
supersede each other (``can_replace``), so the screen handles at most one per cycle. The
screen never redraws per event: it keeps the newest snapshot per metric (``offer``); a timer
checks ``CHECK_HZ`` times a second and redraws, at most ``REDRAW_HZ`` times a second, when a
newer one arrived, updating widgets in place. Everything shown belongs to the current trace: starting another
clears the previous one's histograms, rows and messages.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import DataTable, Input, Label, Select, Sparkline, Static

from aorta_tui.core.events import Event, HistogramSnapshot, Measurement, RunFinished, RunWarning
from aorta_tui.core.numerals import ascii_digits
from aorta_tui.relay.engine_run import EngineRun
from aorta_tui.tui.bridge import EngineBridge, EngineEnded, EngineEvent, EngineSnapshots
from aorta_tui.tui.machine import bpftrace_facts, last_gathered
from aorta_tui.tui.screens.base import AortaScreen
from aorta_tui.tui.widgets.histogram import LogHistogram, fmt_latency

REDRAW_HZ = 12  # at most this many redraws a second (>= 10 sustained, with headroom)
CHECK_HZ = 24  # how often to look for a newer snapshot (cheap: two integers compared)
SNAPSHOT_S = 0.07  # a little faster than the redraw cadence, so every redraw has a new one
RATE_HISTORY = 120
# The monitor's own metric, when the trace engine streams it: submit -> dispatch (launch call
# entry -> kernel start on the GPU). Shown first until the user picks another with m.
PREFERRED_METRIC_SUFFIX = ".launch_to_start"
# launch -> start = host + push + GPU queue (aorta_tui/trace/device/latency.py)
LAUNCH_PARTS = ("launch_host", "launch_push", "launch_gpu_queue")
# The probe set selected at start: the first of these that can attach here.
PREFERRED_PROBE_SETS = ("cuda", "hip", "amdgpu", "drm_sched", "ioctl")
UNAVAILABLE_MARK = " ✗"


def probe_set_names() -> list[str]:
    """The trace engine's probe-set catalogue (imported here: the first frame never pays)."""
    from aorta_tui.trace.probes import CATALOGUE

    return list(CATALOGUE)


def parse_target(text: str) -> dict[str, Any]:
    """``1234`` or ``pid 1234`` -> pid; ``queue WORKLOAD ...`` -> a ``queue run``; ``replay FILE``
    -> a recorded ``trace queue --json`` output; else a command."""
    words = shlex.split(text)
    if not words:
        raise ValueError("give a target: a pid, a command, `queue WORKLOAD` or `replay FILE.jsonl`")
    if len(words) == 1 and ascii_digits(words[0]):
        return {"pid": int(words[0])}
    if words[0] == "pid" and len(words) == 2 and ascii_digits(words[1]):
        return {"pid": int(words[1])}
    if words[0] == "queue" and len(words) >= 2:
        return {"command": [sys.executable, "-m", "aorta_tui", "queue", "run", *words[1:]]}
    if words[0] == "replay" and len(words) == 2:
        return {"replay": words[1]}
    return {"command": words}


def describe_target(target: dict[str, Any], limit: int = 60) -> str:
    """How a toast names a target: ``pid 754``, ``python3 my_program.py``, ``recording x.jsonl``."""
    if "pid" in target:
        return f"pid {target['pid']}"
    if "replay" in target:
        return f"the recording {target['replay']}"
    words = list(target["command"])
    if words[:3] == [sys.executable, "-m", "aorta_tui"]:
        words = ["aorta-tui", *words[3:]]
    text = shlex.join(words)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def attached_sentence(values: dict[str, Any], target_text: str, reasons: dict[str, str] | None = None) -> str:
    """The worker's ``attached`` report as a sentence, e.g. "Tracing pid 754 (python3 p.py):
    19 uprobes, 2 tracepoints attached; launches from the CUPTI collector." """
    def n(count: object, what: str) -> str:
        return f"{count} {what}{'' if count == 1 else 's'}"

    pid = values.get("pid")
    who = f"pid {pid}" if pid is not None else "the target"
    if target_text and not target_text.startswith("pid "):
        who += f" ({target_text})"
    if "replayed_from" in values:
        return f"Replaying {values['replayed_from']} (recorded snapshots, nothing is attached)."
    src = (reasons or {}).get("launch_source", "")
    launches = ("; launches from the CUPTI collector (no launch uprobe)" if src.startswith("collector")
                else "; launches from the eBPF uprobe and the collector (cross-check)" if src.startswith("cross-check")
                else "")
    return (f"Tracing {who}: {n(values.get('uprobes', 0), 'uprobe')}, "
            f"{n(values.get('tracepoints', 0), 'tracepoint')} attached{launches}.")


def clock_text(clock: dict[str, Any]) -> str:
    """How a two-clock metric's clocks were aligned: "clocks aligned ±0.4 µs (CUPTI↔CLOCK_MONOTONIC,
    12 samples)"."""
    unc = clock.get("uncertainty_ns")
    method = str(clock.get("label") or clock.get("method") or "method not named")  # label: short
    samples = clock.get("samples")
    detail = method + (f", {samples} sample{'' if samples == 1 else 's'}" if samples is not None else "")
    if not isinstance(unc, (int, float)):
        return f"clocks aligned, uncertainty not measured ({detail})" + _launch_time_text(clock)
    us = float(unc) / 1e3
    amount = f"{us:.3g} µs" if us < 1000 else f"{us / 1e3:.3g} ms"
    return f"clocks aligned ±{amount} ({detail})" + _launch_time_text(clock)


def _launch_time_text(clock: dict[str, Any]) -> str:
    """Where the launch time comes from, and (eBPF) the uprobe's calibrated cost the figure
    includes, shown beside the figure (issue 24 item 3)."""
    src = clock.get("launch_time")
    if not src:
        return ""
    cost = clock.get("probe_cost_ns")
    if isinstance(cost, (int, float)):
        return f"; launch time: {src}, includes its ~{cost / 1e3:.2f} µs (calibrated)"
    return f"; launch time: {src}"


class TraceMonitorScreen(EngineBridge, AortaScreen):
    TITLE_TEXT = "Trace monitor"
    DEFAULT_CSS = "#queue-status { height: auto; padding: 0 1; display: none; }"
    MAIN_WIDGET = "#queue-breakdown"
    BINDINGS = [
        Binding("escape", "focus_main", "Leave field", show=False),
        Binding("s", "toggle_trace", "Start/stop"),
        Binding("m", "next_metric", "Next metric"),
        Binding("t", "focus_target", "Target"),
        Binding("p", "focus_probes", "Probe set"),
        # off the footer (it would push Quit and Help off an 80-column one); in the help screen
        Binding("e", "toggle_metrics", "Metrics for Prometheus on/off", show=False),
    ]

    # --metrics ADDR for the tracer (docs/metrics.md): the setting $AORTA_TUI_METRICS turns it on
    # at start with its address (read on mount, from the App's settings); e toggles it. Reactive:
    # the status line that says so follows the value, however it was set.
    metrics_addr: var[str | None] = var(None, init=False)

    def __init__(self) -> None:
        super().__init__()
        # Newest snapshot per metric (a probe set can stream several histograms).
        self._latest: dict[str, HistogramSnapshot] = {}
        self.metric: str | None = None
        self._offered = 0
        self._drawn = 0
        self.redraws = 0
        self._rates: deque[float] = deque(maxlen=RATE_HISTORY)
        self.engine_run: EngineRun | None = None
        # tracers being stopped by a worker thread (bpftrace's detach takes seconds): the screen
        # keeps drawing meanwhile, and nothing new attaches to what they still hold
        self.detaching: set[EngineRun] = set()
        self._finished: RunFinished | None = None  # the tracer's last event, once it came
        self.attached: dict[str, Any] | None = None
        self.stderr_path: Path | None = None
        # the tracer's log is kept when leaving only where a failure shown named it (to read)
        self.keep_log = False
        self._metric_chosen = False  # the user picked a metric with m: keep it
        self._target_text = ""
        # Lines kept on screen (not only in fading toasts): why a probe set cannot attach,
        # why the tracer failed, the workload's phase. Keyed so each kind replaces its own.
        self.status: dict[str, tuple[str, str]] = {}
        # Probe set -> None (can attach here) or why not; {} while not known.
        self.probe_sets: dict[str, str | None] = {}

    def compose_body(self) -> ComposeResult:
        with Vertical(id="queue"):
            with Horizontal(id="queue-controls", classes="toolbar"):
                names = probe_set_names() or ["(trace engine missing)"]
                yield Select(self._probe_options(names), value=self._default_probe_set(names),
                             allow_blank=False, id="probe-set", compact=True)
                yield Label(" target ")
                yield Input(placeholder="PID | command ... | queue WORKLOAD --streams 8", id="trace-target",
                            compact=True)
            yield Static(self._idle_text(), id="queue-measures")
            yield Static("", id="queue-status")
            with Horizontal(id="queue-main"):
                yield LogHistogram(id="queue-hist")
                with Vertical(id="queue-side"):
                    yield Static("", id="queue-stats")
                    yield Static("events/s", classes="pane-title")
                    yield Sparkline(list(self._rates), id="queue-rate")
            yield DataTable(id="queue-breakdown", cursor_type="row", zebra_stripes=True)

    def _idle_text(self) -> str:
        return "choose a probe set and a target, then s to start"

    # --- which probe sets can attach -----------------------------------------------------

    def _known_probe_sets(self) -> dict[str, str | None] | None:
        """What Home found (or the app was given); None when nobody has looked yet."""
        fixed = self.aorta.fixed_machine_facts
        facts = fixed if fixed is not None else last_gathered()
        if facts is None:
            return None
        return dict(facts.probe_sets)

    def _probe_options(self, names: list[str]) -> list[tuple[str, str]]:
        return [(n + (UNAVAILABLE_MARK if self.probe_sets.get(n) else ""), n) for n in names]

    def _default_probe_set(self, names: list[str]) -> str:
        self.probe_sets = self._known_probe_sets() or {}
        return self._default_probe_set_from(names)

    def _check_probe_sets(self) -> None:
        """Thread: the trace engine's capability check, when Home has not run it."""
        _line, sets = bpftrace_facts()
        self.from_thread(self._apply_probe_sets, sets)

    def _apply_probe_sets(self, sets: dict[str, str | None]) -> None:
        self.probe_sets = sets
        select = self.query_one("#probe-set", Select)
        names = probe_set_names()
        if not names or self.tracing:
            return
        untouched = select.value == self._initial_probe_set
        select.set_options(self._probe_options(names))
        select.value = self._default_probe_set_from(names) if untouched else select.value
        self._show_probe_reason(str(select.value))

    def _default_probe_set_from(self, names: list[str]) -> str:
        """The first preferred set that can attach; ``cuda`` while nothing is known."""
        usable = [n for n in names if self.probe_sets.get(n, "") is None]
        for name in (*PREFERRED_PROBE_SETS, *usable):
            if name in usable:
                return name
        return "cuda" if "cuda" in names else names[0]

    def _show_probe_reason(self, name: str) -> None:
        why = self.probe_sets.get(name)
        if why:
            said = why if why.startswith("attaches") else f"cannot attach here: {why}"
            self.set_status("probe", f"{name} {said}", "yellow")
        else:
            self.set_status("probe", "")

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "probe-set":
            self._show_probe_reason(str(event.value))

    def set_status(self, kind: str, text: str, style: str = "") -> None:
        """Keep (or with ``text=""`` drop) one line of the screen's status block."""
        if text:
            self.status[kind] = (text, style)
        else:
            self.status.pop(kind, None)
        order = ("error", "exit", "probe", "phase")
        lines = [self.status[k] for k in (*order, *sorted(set(self.status) - set(order))) if k in self.status]
        out = Text()
        for i, (line, line_style) in enumerate(lines):
            out.append(("\n" if i else "") + line, style=line_style)
        widget = self.query_one("#queue-status", Static)
        widget.update(out)
        widget.display = bool(lines)  # no empty line while there is nothing to say

    def on_mount(self) -> None:
        super().on_mount()
        self.metrics_addr = self.aorta.settings.metrics_addr
        self.query_one("#queue-breakdown", DataTable).add_columns("metric / key", "count", "p50", "mean", "max")
        self._breakdown_values: dict[str, tuple[str, ...]] = {}
        self._last_header: tuple[str, ...] | None = None
        # Checking twice per redraw period keeps the rate near REDRAW_HZ when a tick is late.
        self._last_draw = 0.0
        self.set_interval(1 / CHECK_HZ, self._redraw)
        self._initial_probe_set = str(self.query_one("#probe-set", Select).value)
        if self._known_probe_sets() is None and probe_set_names():
            self.run_worker(self._check_probe_sets, thread=True, exit_on_error=False, name="probe sets")
        else:
            self._show_probe_reason(self._initial_probe_set)

    def on_unmount(self) -> None:
        # leaving: the tracer must be gone with the screen, and a worker would be cut short
        self.stop_trace()
        for run in list(self.detaching):
            run.stop(signal.SIGINT, grace_s=10.0)
        # its log (in the temporary directory, one per trace) goes too, unless a failure
        # shown named it: then the user reads it, and it stays where the message said
        if self.stderr_path is not None and not self.keep_log:
            self.stderr_path.unlink(missing_ok=True)

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
        if self.metric not in self._latest or not self._metric_chosen:
            self.metric = self._default_metric()
        self.render_snapshot(self._latest[self.metric])

    def _default_metric(self) -> str:
        """``*.launch_to_start`` when the engine streams it (submit -> dispatch), else the first."""
        names = list(self._latest)
        return next((n for n in names if n.endswith(PREFERRED_METRIC_SUFFIX)), names[0])

    def action_next_metric(self) -> None:
        names = list(self._latest)
        if len(names) < 2:
            self.notify("This probe set streams one histogram.", severity="information")
            return
        self.metric = names[(names.index(self.metric) + 1) % len(names)] if self.metric in names else names[0]
        self._metric_chosen = True
        self.render_snapshot(self._latest[self.metric])

    def render_snapshot(self, snap: HistogramSnapshot) -> None:
        self.redraws += 1
        # Redraws touch only what changed, and never ask for a new layout of the screen:
        # at 10 snapshots/s a relayout per snapshot is most of the UI's CPU.
        others = len(self._latest) - 1
        more = f"  [dim](m: {others} more metric{'s' if others > 1 else ''})[/dim]" if others > 0 else ""
        clock = clock_text(snap.clock) if snap.clock else (
            "clock alignment not reported by the trace engine"
            if snap.probe_set.endswith(PREFERRED_METRIC_SUFFIX) else "")
        header = (snap.probe_set, snap.measures, snap.unit, more, clock)
        if header != self._last_header:
            self._last_header = header
            text = Text.assemble((snap.probe_set, "bold"), f": {snap.measures}  ", (f"unit {snap.unit}", "dim"))
            text += Text.from_markup(more)
            if clock:
                text.append("\n" + clock, style="italic")
            self.query_one("#queue-measures", Static).update(text)
        self.query_one(LogHistogram).show(snap.buckets, snap.unit)
        pct = snap.percentiles
        cost = snap.observer_cost or {}
        cost_text = _observer_cost_text(cost)
        narrow = self.has_class("-narrow")
        lost = (f"lost     {snap.lost_events}" + ("  [b red]events lost[/]" if snap.lost_events else "")
                if snap.lost_events is not None else "lost     not known yet (no in-kernel count so far)")
        lines = [
            f"events   {snap.count:,}",
            *(f"{name:<8} {fmt_latency(pct.get(name), snap.unit)}" for name in ("p50", "p90", "p99", "max")),
            f"rate     {snap.events_per_s:,.0f}/s now",
            # the pane has 9 rows at 80x24 and 12 at 160x48: lost and bad lines share a row, and
            # narrow, the parts take one
            f"{lost} · bad lines {snap.malformed_lines}",
            *self._parts_lines(snap, narrow),
            f"cost     {_short_cost(cost, narrow) if cost.get('program_cost') else cost_text}",
        ]
        self.query_one("#queue-stats", Static).update("\n".join(lines), layout=False)
        self._rates.append(float(snap.events_per_s))
        self.query_one("#queue-rate", Sparkline).data = list(self._rates)
        self._update_breakdown(snap)

    def _parts_lines(self, snap: HistogramSnapshot, narrow: bool = False) -> list[str]:
        """launch -> start split live into host / push / GPU queue (p50 of each, issue 34), shown
        beside launch -> start and its parts; a part the trace cannot give says so."""
        prefix, _dot, name = snap.probe_set.rpartition(".")
        if name not in ("launch_to_start", *LAUNCH_PARTS):
            return []
        parts = {p: self._latest.get(f"{prefix}.{p}") for p in LAUNCH_PARTS}
        if not any(parts.values()):
            return []

        def p50(part: str) -> str:
            got = parts[part]
            if got is None or not got.count:
                return "n/a (no entry time)" if part == "launch_host" else "n/a"
            return fmt_latency(got.percentiles.get("p50"), got.unit)

        if narrow:  # one row: host|push|GPU queue, the order the wide layout names them
            return ["h|p|q    " + "|".join(p50(p).split(" (")[0] for p in LAUNCH_PARTS)]
        return ["split p50 of launch->start:",
                *(f"  {label:<9} {p50(part)}" for part, label in zip(LAUNCH_PARTS, ("host", "push", "GPU queue"),
                                                                  strict=True))]

    def clear_trace(self) -> None:
        """Forget everything of the previous trace: snapshots, chosen metric, rows, messages."""
        self._latest.clear()
        self.metric = None
        self._metric_chosen = False
        self._drawn = self._offered
        self._rates.clear()
        self._breakdown_values.clear()
        self._last_header = None
        self.query_one("#queue-breakdown", DataTable).clear()
        self.query_one(LogHistogram).show([], "us")
        self.query_one("#queue-stats", Static).update("")
        self.query_one("#queue-rate", Sparkline).data = []
        self.query_one("#queue-measures", Static).update("starting the tracer…")
        for kind in ("error", "exit", "phase"):
            self.set_status(kind, "")

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
        return self.engine_run is not None and self.engine_run.running

    def action_toggle_metrics(self) -> None:
        """Serve (or stop serving) the next trace's figures for Prometheus."""
        self.metrics_addr = None if self.metrics_addr else (self.aorta.settings.metrics_addr or DEFAULT_METRICS_ADDR)
        self.notify(f"Metrics {'on: ' + self.metrics_addr if self.metrics_addr else 'off'}, {self._metrics_when()}.")

    def _metrics_when(self) -> str:
        return "from the next start (s twice)" if self.tracing else "when the trace starts"

    def watch_metrics_addr(self, addr: str | None) -> None:
        """Said on screen, not only in a toast ($AORTA_TUI_METRICS at start, or e)."""
        if addr:
            self.set_status("metrics", f"metrics for Prometheus at http://{addr}/metrics "
                            f"{self._metrics_when()} (e: off)", "dim")
        else:
            self.set_status("metrics", "")

    def metrics_args(self) -> list[str]:
        """The tracer's --metrics options (a replay has no live figures to serve)."""
        if not self.metrics_addr:
            return []
        public = self.aorta.settings.metrics_public
        return ["--metrics", self.metrics_addr, *(["--metrics-public"] if public else [])]

    def action_toggle_trace(self) -> None:
        if self.tracing:
            self.stop_trace(wait=False)
            self.notify("stopping the tracer: bpftrace detaches in the background")
            return
        try:
            target = parse_target(self.query_one("#trace-target", Input).value)
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        probes = str(self.query_one("#probe-set", Select).value)
        if "replay" in target:
            args = ["--replay", target["replay"]]
        else:
            args = ["--probes", probes, *self.metrics_args()]
            args += ["--pid", str(target["pid"])] if "pid" in target else ["--", *target["command"]]
        self._target_text = describe_target(target)
        self.start_worker(args)
        what = "replay" if "replay" in target else f"{probes} tracer"
        self.notify(f"Starting the {what} on {self._target_text}.")

    def start_worker(self, args: list[str]) -> None:
        """Start ``trace queue --json`` with ``args`` and follow its events (the
        benchmark uses this, with ``--synthetic N``)."""
        self.stop_trace(wait=False)  # a previous tracer's late events are dropped (they name their run)
        self.stderr_path = self._new_log()  # this trace's log only
        self.clear_trace()
        self.attached = None
        self._finished = None
        self.keep_log = False
        self.engine_run = EngineRun(["trace", "queue", "--json", "--interval", str(SNAPSHOT_S), *args],
                                    stderr_path=self.stderr_path).start()
        self.follow_engine(self.engine_run)

    def _new_log(self) -> Path:
        """A new private file for the next tracer's log; the last one goes unless a failure
        named it. mkstemp creates it (O_EXCL, mode 0600) under a name nobody can guess: a
        fixed name in the shared /tmp let another user plant a link there that a TUI run by
        sudo would have truncated and written through."""
        if self.stderr_path is not None and not self.keep_log:
            self.stderr_path.unlink(missing_ok=True)
        fd, name = tempfile.mkstemp(prefix=f"aorta-tui-trace-{os.getpid()}-", suffix=".log")
        os.close(fd)
        return Path(name)

    @on(EngineSnapshots)
    def _snapshots(self, message: EngineSnapshots) -> None:
        """The newest snapshot per metric (superseded messages were dropped on the way)."""
        if message.run is self.engine_run:
            self._latest.update(message.latest)
            self._offered += 1

    @on(EngineEvent)
    def _engine_event(self, message: EngineEvent) -> None:
        if message.run is not self.engine_run:
            return  # a previous trace's late line
        event = message.event
        if isinstance(event, Measurement) and event.name == "attached":
            self.attached = dict(event.values)
            self.notify(attached_sentence(event.values, self._target_text, dict(event.reasons)))
        elif isinstance(event, Measurement) and event.name == "phase":
            self._show_phase(dict(event.values))
        elif isinstance(event, RunWarning):
            self._show_warning(event)
        elif isinstance(event, RunFinished):
            self._finished = event

    @on(EngineEnded)
    def _engine_ended(self, message: EngineEnded) -> None:
        if message.run is not self.engine_run:
            return
        if message.error:  # it never started: a bad option, a missing tool
            self.keep_log = True  # the error names the log its stderr is in
            self.set_status("error", f"The tracer failed: {message.error}", "bold red")
            self.notify(message.error, title="trace", severity="error", timeout=12)
            return
        code = message.exit_code
        # A trace that finished is no failure whatever its status (a traced command's own).
        clean = code in (0, 130, -signal.SIGINT) or (self._finished is not None
                                                     and self._finished.status != "failed")
        if not clean and code is not None:
            self._show_exit(code)

    def _show_warning(self, event: RunWarning) -> None:
        error = event.code == "error"
        if error:  # stays on the screen until the next trace: a toast fades
            self.set_status("error", f"The tracer failed: {event.message}", "bold red")
        elif event.code == "target_exited":
            self.set_status("exit", event.message.rstrip(".") + ".", "yellow")
        self.notify(event.message, title="trace", severity="error" if error else "warning", timeout=12)

    def _show_exit(self, code: int) -> None:
        text = f"The tracer exited with status {code}; its log is {self.stderr_path} (kept after the TUI exits)."
        self.keep_log = True
        if "error" not in self.status:
            self.set_status("error", text, "bold red")
        self.notify(text, severity="error")

    def _show_phase(self, values: dict[str, Any]) -> None:
        """The workload's phase (``queue WORKLOAD`` announces warm-up, measure, detail)."""
        phase = values.get("phase") or "?"
        left_out = int(values.get("intervals_left_out") or 0)
        seen = " → ".join(values.get("phases") or [phase])
        self.set_status("phase", (
            f"phase {phase} ({seen}); intervals are within a phase: "
            f"{left_out} spanning a pause between phases left out"), "dim")

    def stop_trace(self, timeout: float = 10.0, *, wait: bool = True) -> None:
        """Stop the tracer (SIGINT to its group: it detaches bpftrace). ``wait``: until it exited,
        on this thread (leaving the screen: nothing may outlive it); otherwise a worker thread
        waits, so the event loop never blocks on a detach (``detaching`` holds the run until then)."""
        run, self.engine_run = self.engine_run, None
        if run is None:
            return
        if wait:
            run.stop(signal.SIGINT, grace_s=timeout)
            return
        self.detaching.add(run)
        self.run_worker(lambda: self._stop_in_worker(run, timeout), thread=True, exit_on_error=False,
                        name="stop tracer", group="stop-tracer")

    def _stop_in_worker(self, run: EngineRun, timeout: float) -> None:
        try:
            run.stop(signal.SIGINT, grace_s=timeout)
        finally:
            # one atomic set operation (the GIL): the loop only reads the set to draw it
            self.detaching.discard(run)

    def action_focus_target(self) -> None:
        self.query_one("#trace-target", Input).focus()

    def action_focus_probes(self) -> None:
        self.query_one("#probe-set", Select).focus()


DEFAULT_METRICS_ADDR = "127.0.0.1:9477"


def _short_cost(cost: dict[str, Any], narrow: bool) -> str:
    """The program's cost share on one row of the stats pane (the result and the CLI carry the
    sentence with its source): the figure with its interval, or 'n/a' and, wide, why."""
    pc = cost.get("program_cost") or {}
    share = pc.get("share")
    if share is None:
        return "n/a" if narrow else f"n/a: {str(pc.get('reason', ''))[:40]}"
    if narrow:
        return f"≥{share:.1%} of run"
    ci = pc.get("share_ci95")
    ci_text = f" [{ci[0]:.1%}, {ci[1]:.1%}]" if ci else ""
    return f"≥{share:.1%}{ci_text} of run ({pc.get('added_per_launch_us', 0):.2f}µs×{pc.get('launches', 0):,})"


def _observer_cost_text(cost: dict[str, Any]) -> str:
    """What the traced program pays (issue 34: a share of its time, with its interval), else the
    probes' own estimate, or why there is none."""
    if not cost:
        return "not available (the trace engine reported none)"
    if cost.get("program_cost"):
        from aorta_tui.trace.cost import share_text

        return share_text(cost["program_cost"])
    per_hit = cost.get("per_hit_us")
    fraction = cost.get("cpu_fraction")
    if per_hit is None or fraction is None:
        return f"not available ({cost.get('reason', 'not measured')})"
    return f"{per_hit:.2f}µs/probe hit ≈ {fraction:.1%} of a core"
