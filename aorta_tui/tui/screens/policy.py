"""Policy comparison: run one workload under several policies, show the engine's statistics.

The sweep is ``aorta-tui policy sweep ... --json`` run through ``relay.engine_run.EngineRun`` (its
own process group; its stderr goes to a file, never to the terminal); progress comes from its
events, posted by the bridge's worker (``tui.bridge``); the table and the bars come from
the ``policy.json`` it writes. A winner is named only where the engine called the difference.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Label, Static
from textual.worker import Worker

from aorta_tui.core.events import Event, Progress, RunFinished
from aorta_tui.policy.comparison import Comparison
from aorta_tui.policy.report import versus_text
from aorta_tui.policy.report_doc import MetricSummary, PolicyReport
from aorta_tui.relay.engine_run import EngineRun
from aorta_tui.tui.bridge import EngineBridge, EngineEnded, EngineEvent
from aorta_tui.tui.screens.base import AortaScreen, busy
from aorta_tui.tui.screens.pickers import PathPicker
from aorta_tui.tui.widgets.bars import render_interval_bars


def _num(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else "n/a"


Row = tuple[str, str, MetricSummary, Comparison | None]  # metric, policy, summary, call


def report_rows(report: PolicyReport) -> list[Row]:
    """(metric, policy, summary, comparison) for every metric and policy of a report."""
    return [(m.name, p.name, p.summary(m.name), p.vs_reference.get(m.name))
            for m in report.metrics for p in report.policies]


def winner_text(report: PolicyReport | Mapping[str, Any], metric: str) -> str:
    """Who the engine called better than the reference on ``metric`` (a report, or the JSON
    of one as policy.json holds it); nobody is named on a difference within noise."""
    if not isinstance(report, PolicyReport):
        report = PolicyReport.from_dict(report, where="policy report")
    better = [p.name for p in report.policies
              if (c := p.vs_reference.get(metric)) is not None and c.assessment == "better"]
    if better:
        return f"[b green]better than {report.reference}: {', '.join(better)}[/]"
    return f"no policy is significantly better than {report.reference} on {metric}"


class ReportRead(Message):
    """What the report worker read at ``path``: the report, or why not (``problem``, the
    loader's located message); ``found`` False when a sweep's end found no policy.json at all,
    ``tail`` the end of a failed sweep's stderr. ``ask`` names the request, so an answer asked for before a newer one is dropped."""

    def __init__(self, ask: int, path: Path, report: PolicyReport | None = None, problem: str = "",
                 found: bool = True, ended: EngineEnded | None = None, tail: str = "") -> None:
        super().__init__()
        self.ask, self.path, self.report, self.problem = ask, path, report, problem
        self.found, self.ended, self.tail = found, ended, tail


def read_report(ask: int, path: Path, *, ended: EngineEnded | None = None) -> ReportRead:
    """``path`` (policy.json or its run directory) read as a report (file reads: the report
    worker calls this). At a sweep's end (``ended``) a missing file is no error: the answer
    says it was not found, and the screen says why the sweep wrote none."""
    from aorta_tui.core.errors import UsageError

    path = path / "policy.json" if path.is_dir() else path
    # a failed sweep's stderr (a file the engine wrote) is read here too, not on the loop
    tail = ended.run.stderr_tail(600) if ended is not None and ended.exit_code != 0 else ""
    if ended is not None and not path.is_file():
        return ReportRead(ask, path, found=False, ended=ended, tail=tail)
    try:  # bounded and regular files only: a FIFO here would hold the worker, never the keys
        return ReportRead(ask, path, PolicyReport.from_json(path), ended=ended, tail=tail)
    except UsageError as exc:
        return ReportRead(ask, path, problem=exc.render(), ended=ended, tail=tail)


def check_report_shape(report: object, where: str) -> PolicyReport:
    """The report the screen shows, every field typed; a damaged policy.json is a UsageError."""
    return PolicyReport.from_dict(report, where=where)


class PolicyScreen(EngineBridge, AortaScreen):
    TITLE_TEXT = "Policy comparison"
    MAIN_WIDGET = "#policy-table"
    BINDINGS = [
        Binding("escape", "focus_main", "Leave field", show=False),
        Binding("r", "run_sweep", "Run"),
        Binding("x", "stop_sweep", "Stop"),
        Binding("o", "open_report", "Open report"),
        Binding("f", "focus_form", "Form"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.report: PolicyReport | None = None
        self._rows: list[Row] = []
        self._row_metric: list[str] = []
        self.engine_run: EngineRun | None = None
        self._output: Path | None = None
        self.events: list[Event] = []
        # The report worker (ReportRead answers); ``_asked`` counts the requests, so a report
        # read for an earlier one (an open before r started a sweep) is not shown over it.
        self._report_worker: Worker[None] | None = None
        self._asked = 0

    def compose_body(self) -> ComposeResult:
        with Vertical(id="policy"):
            with Horizontal(classes="toolbar"):
                yield Label("workload ")
                yield Input("tiny_kernel_stress", placeholder="workload", id="pol-workload", compact=True)
                yield Label(" policies ")
                yield Input("baseline,cuda_max_connections_1", placeholder="policies", id="pol-policies",
                            compact=True)
            with Horizontal(classes="toolbar"):
                yield Label("streams ")
                yield Input("4", id="pol-streams", compact=True, classes="short", type="integer")
                yield Label(" trials ")
                yield Input("5", id="pol-trials", compact=True, classes="short", type="integer")
                yield Label(" more ")
                yield Input("", placeholder="e.g. --size tiny --device cpu", id="pol-extra", compact=True)
            yield Static("r runs the sweep, o opens a saved policy.json", id="policy-status")
            yield DataTable(id="policy-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="policy-bars")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#policy-table", DataTable).add_columns("metric / policy", "median", "vs reference", "95% CI")

    def on_unmount(self) -> None:
        self.action_stop_sweep(wait=True)

    # --- showing a report ----------------------------------------------------------------

    def show_report(self, report: PolicyReport, source: str) -> None:
        self.report = report
        self._rows = report_rows(report)
        self._row_metric = []  # the metric of each table row (heading rows included)
        table = self.query_one("#policy-table", DataTable)
        table.clear()
        current = None
        for metric, policy, summary, versus in self._rows:
            if metric != current:  # one heading row per metric keeps the table narrow
                current = metric
                table.add_row(Text(f"{metric} ({report.metric(metric).unit})",
                                   style="bold underline"), Text(""), Text(""), Text(""))
                self._row_metric.append(metric)
            ci = (f"[{_num(summary.ci_low)}, {_num(summary.ci_high)}]"
                  if summary.ci_low is not None else f"n/a ({summary.reason or 'no interval'})")
            # the words of policy.md, from one place
            vs = "reference" if policy == report.reference else versus_text(versus)
            assessment = versus.assessment if versus is not None else ""
            style = {"better": "bold green", "worse": "red"}.get(assessment, "")
            mark = " ✓" if assessment == "better" else ""
            table.add_row(Text("  " + policy), Text(_num(summary.median)),
                          Text(vs + mark, style=style), Text(ci))
            self._row_metric.append(metric)
        self._show_status(report, source)
        self._fill_form(report)
        self._show_bars()

    def _show_status(self, report: PolicyReport, source: str) -> None:
        emulated = " [b yellow]CPU emulation[/]" if report.emulated else ""
        notes = [f"[b]{_esc(p.name)}[/b]: {_esc('; '.join(p.notes))}"
                 for p in report.policies if p.notes]
        self.query_one("#policy-status", Static).update(
            f"[b]{report.workload}[/b], {report.streams} streams, "
            f"{report.trials_per_policy} trials/policy, {report.status}  "
            f"[dim]{report.platform.get('backend', '')} · {self.display_path(source)}[/dim]"
            f"{emulated}" + "".join(f"\n[dim]note[/dim] {n}" for n in notes)
        )

    def _fill_form(self, report: PolicyReport) -> None:
        """The form says what made the report shown: r re-runs that, not the defaults."""
        names = [p.name for p in report.policies]
        if report.reference_added and names and names[0] == report.reference:
            names = names[1:]  # the engine added the reference itself; it will again
        extra = []
        for flag, value in (("--device", report.device), ("--iterations", report.iterations)):
            if value is not None:
                extra += [flag, str(value)]
        values = {"#pol-workload": report.workload, "#pol-policies": ",".join(names),
                  "#pol-streams": report.streams, "#pol-trials": report.trials_per_policy,
                  "#pol-extra": shlex.join(extra)}
        for widget_id, value in values.items():
            if value not in (None, ""):
                self.query_one(widget_id, Input).value = str(value)

    def _clear_report(self) -> None:
        """No table left up from an earlier report while a new sweep runs (or after it failed)."""
        self.report = None
        self._rows, self._row_metric = [], []
        self.query_one("#policy-table", DataTable).clear()
        self.query_one("#policy-bars", Static).update("")

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_bars()

    def _show_bars(self) -> None:
        if self.report is None or not self._rows:
            return
        row = min(self.query_one("#policy-table", DataTable).cursor_row, len(self._row_metric) - 1)
        metric = self._row_metric[row]
        info = self.report.metric(metric)
        bars = [(policy, s.median, s.ci_low, s.ci_high, s.reason)
                for m, policy, s, _v in self._rows if m == metric]
        text = render_interval_bars(bars, info.unit, max(30, self.size.width - 2))
        text.append("\n")
        better = {"higher": " (higher is better)", "lower": " (lower is better)"}.get(info.better, "")
        text.append(f"{metric}{better}: ", style="bold")
        text.append_text(_markup(winner_text(self.report, metric)))
        self.query_one("#policy-bars", Static).update(text)

    def load_report(self, path: Path) -> None:
        """Show the report at ``path`` once the report worker has read it (ReportRead)."""
        if busy(self._report_worker):
            return  # the read under way answers: a second open while it reads starts none
        self._read_report(path)

    def _read_report(self, path: Path, ended: EngineEnded | None = None) -> None:
        self._asked += 1
        ask = self._asked

        # Why a worker: policy.json is a file (bounded, but on a network filesystem a stat or a
        # read can stall); the keys keep working while it is read.
        def read() -> None:
            self.post_message(read_report(ask, path, ended=ended))

        self._report_worker = self.run_worker(read, thread=True, group="policy-report", exit_on_error=False,
                                              name="read policy report")

    @on(ReportRead)
    def _report_read(self, message: ReportRead) -> None:
        if message.ask != self._asked:
            return  # asked before a newer request (a sweep started, or ended): not shown over it
        if message.report is not None:
            self.show_report(message.report, str(message.path))
        elif message.problem:
            self.notify(message.problem, severity="error")
        if message.ended is not None:
            self._sweep_ended(message.ended.exit_code, message.found, message.tail)

    def action_open_report(self) -> None:
        cwd = self.aorta.cwd

        def chosen(paths: list[Path] | None) -> None:
            if paths:
                self.load_report(paths[0])

        self.app.push_screen(PathPicker(  # the glob runs in the picker's worker: a directory walk
            "Open a policy report (policy.json or its run dir)",
            lambda: sorted(cwd.glob("aorta-policy/*/policy.json"), reverse=True)), chosen)

    def action_focus_form(self) -> None:
        self.query_one("#pol-workload", Input).focus()

    # --- running a sweep -----------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.engine_run is not None and self.engine_run.running

    def sweep_args(self, output: Path) -> list[str]:
        def value(widget_id: str) -> str:
            return self.query_one(widget_id, Input).value.strip()

        args = ["policy", "sweep", value("#pol-workload"),
                "--policies", value("#pol-policies"), "--streams", value("#pol-streams"),
                "--trials", value("#pol-trials"), "--json", "--output", str(output)]
        return args + shlex.split(value("#pol-extra"))

    def action_run_sweep(self) -> None:
        if self.running:
            self.notify("a policy sweep is already running (x stops it)", severity="warning")
            return
        workload = self.query_one("#pol-workload", Input).value.strip() or "sweep"
        output = self.aorta.cwd / "aorta-policy" / f"{workload}-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            args = self.sweep_args(output)
        except ValueError as exc:
            self.notify(f"bad options: {exc}", severity="error")
            return
        output.parent.mkdir(parents=True, exist_ok=True)
        self._output = output
        self.engine_run = EngineRun(args, stderr_path=output.parent / f".{output.name}.stderr.log").start()
        self.events = []
        self._asked += 1  # a report still being read is not shown over the new sweep
        self._clear_report()
        self.query_one("#policy-status", Static).update(f"starting: {_esc(' '.join(args[1:]))}")
        self.follow_engine(self.engine_run)

    @on(EngineEvent)
    def _on_event(self, message: EngineEvent) -> None:
        if message.run is not self.engine_run:
            return
        event = message.event
        self.events.append(event)
        if isinstance(event, Progress):
            total = f"/{event.total}" if event.total else ""
            self.query_one("#policy-status", Static).update(f"running: {event.done}{total} trials  {event.message}")
        elif isinstance(event, RunFinished):
            self.query_one("#policy-status", Static).update(f"sweep {event.status}")

    @on(EngineEnded)
    def _on_exit(self, message: EngineEnded) -> None:
        if message.run is not self.engine_run or self._output is None:
            return
        self._read_report(self._output, ended=message)  # its answer goes on in _sweep_ended

    def _sweep_ended(self, code: int | None, found: bool, stderr_tail: str) -> None:
        """After the sweep's report was read (``found``: it wrote one): say how it ended."""
        if code != 0:
            tail = _esc(stderr_tail)
            if not found:
                self._clear_report()
                self.query_one("#policy-status", Static).update(
                    f"[b red]sweep failed (exit {code})[/], no report written: {tail or 'no message'}")
            self.notify(f"policy sweep exited {code}: {tail}", title="policy sweep",
                        severity="error", timeout=15)

    def action_stop_sweep(self, wait: bool = False) -> None:
        run = self.engine_run
        if run is None or not run.running:
            return
        if wait:
            run.stop(grace_s=5)  # SIGINT, then SIGKILL: nothing of the group is left behind
        else:
            run.send_signal()  # SIGINT: the engine writes a report of the finished trials


def _esc(text: str) -> str:
    return text.replace("[", r"\[")


def _markup(text: str) -> Text:
    return Text.from_markup(text)
