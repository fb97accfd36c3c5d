"""One trial, opened from the matrix: its detail (``enter``) and its full logs (``l``).

Both read the trial's own directory, ``<run>/trials/<cell>/trial-<NNN>/``, found from the run
directory's layout (``MatrixState.trial_path``), so they work wherever the TUI was started.
Both fill the terminal and grow with it; the logs view follows a running trial's files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Footer, Log, Static, TabbedContent, TabPane
from textual.worker import Worker

from aorta_tui.core.errors import UsageError
from aorta_tui.core.process_record import ProcessRecord, read_process_record
from aorta_tui.core.trial_contract import RESULT_FILE
from aorta_tui.tui.logs import LOG_NAMES, LogText, read_log, read_more, split_budget, tail_lines
from aorta_tui.tui.matrix_state import TrialView
from aorta_tui.tui.screens.base import answer_from_worker, busy
from aorta_tui.tui.screens.latest_read import LatestRead
from aorta_tui.tui.widgets.matrix_grid import fmt_seconds

FOLLOW_S = 1.0  # the logs view checks a running trial's files this often


def hang_text(process: ProcessRecord) -> str | None:
    """Tier 2's report as its one line (``hang after 95.2 s: output silence 31.0 s, ...``): the
    screen printed the report's raw dict until the process record typed it. A damaged report
    (read as not recorded, its value kept) says why it cannot be shown; no hang: None."""
    if process.hang is not None:
        return process.hang.summary()
    if "hang" not in process.extra or process.extra["hang"] is None:
        return None
    try:  # the strict reading names the damaged field
        read_process_record({"hang": process.extra["hang"]}, where=RESULT_FILE)
    except UsageError as exc:
        return f"hang (its report is damaged: {exc.message})"
    return None


def trial_facts(view: TrialView, result: dict[str, Any] | None) -> list[str]:
    """Markup lines: verdict, process outcome, timings, and every detection with its evidence."""
    starting = " (starting)" if view.state == "running" and view.launching else ""
    parts = [f"[b]{escape(view.trial_id)}[/b]  {view.state}{starting}"]
    if view.attempt > 1:
        parts.append(f"attempt {view.attempt}")
    if view.exit_code is not None:
        parts.append(f"exit {view.exit_code}")
    if view.signal is not None:
        parts.append(f"signal {view.signal}")
    if view.wall_s is not None:
        parts.append(f"wall {fmt_seconds(view.wall_s)}")
    if view.mean_step_s is not None:
        parts.append(f"step {fmt_seconds(view.mean_step_s)}")
    lines = ["  ".join(parts)]
    if view.reason:
        lines.append(f"reason: {escape(view.reason)}")
    raw = result.get("process") if isinstance(result, dict) else None
    if isinstance(raw, dict):
        # typed as the run directory reads it: a damaged field reads as not recorded (the
        # screen shows the rest, never a traceback)
        process = read_process_record(raw, where=RESULT_FILE, strict=False)
        extras = []
        if process.timed_out:
            extras.append(f"timed out after {process.timeout_s} s")
        hang = hang_text(process)
        if hang is not None:
            extras.append(hang)
        if process.peak_rss_kb:
            extras.append(f"peak RSS {process.peak_rss_kb // 1024} MiB")
        if process.truncated:
            extras.append("logs truncated (head + tail kept)")
        if extras:
            lines.append(escape("; ".join(str(e) for e in extras)))
        from aorta_tui.executor.placement import placement_text

        where = placement_text(result)  # a Slurm trial: job, node, GPU, state, queue wait
        if where:
            lines.append("ran as " + escape(where.strip(" []")))
    detections = result.get("detections") if isinstance(result, dict) else None
    if isinstance(detections, list) and detections:
        lines.append("[b]detections[/b]")
        for det in detections:
            if not isinstance(det, dict):
                continue
            where = f" ({det.get('stream')}:{det.get('line_no')})" if det.get("line_no") else ""
            lines.append(f"  tier {det.get('tier')} [b]{escape(str(det.get('id')))}[/b]: "
                         f"{escape(str(det.get('message', '')))}{escape(where)}")
            if det.get("evidence"):
                lines.append(f"    [dim]{escape(str(det['evidence']))}[/dim]")
    elif view.detectors:
        lines.append("detectors: " + escape(", ".join(view.detectors)))
    return lines


def timeline_facts(result: dict[str, Any] | None) -> list[str]:
    """One line: where the trial's time went (the largest phases), and how many marks are
    missing and why, in short; every phase is in result.json's ``timeline`` (docs/run-directory.md).
    One line because the logs' tail below needs the rows."""
    if not (isinstance(result, dict) and result.get("timeline")):
        return []
    from aorta_tui.trial.timeline import timeline_lines

    lines = timeline_lines(result)
    missing: dict[str, list[str]] = {}  # reason -> the marks it took
    for line in lines[1:]:
        name, sep, reason = line.strip().partition(" not available: ")
        if sep:
            missing.setdefault(reason.split(":")[0].split(";")[0], []).append(name.strip())
    text = lines[0] if lines else "timeline"
    for reason, names in missing.items():
        text += f"; {len(names)} marks not available ({reason})"
    return [f"[dim]{escape(text)}[/dim]"]


def tail_text(trial_dir: Path | None, budget: int) -> Text:
    """The tails of stderr.log and stdout.log in ``budget`` lines, shared between them."""
    if trial_dir is None or budget <= 0:
        return Text("")
    tails = [tail_lines(trial_dir / name, budget) for name in LOG_NAMES]
    shares = split_budget(budget, [len(t) for t in tails])
    out = Text(no_wrap=True, overflow="ellipsis")
    for name, tail, share in zip(LOG_NAMES, tails, shares, strict=True):
        if share == 0:
            continue
        if out:
            out.append("\n")
        out.append(f"── {name} (last {share}; l: the whole log) ──", style="dim")
        for line in tail[-share:]:
            out.append("\n" + line)
    if not out:
        out.append("no output in stderr.log or stdout.log yet", style="dim")
    return out


def read_result(run_dir: Path, view: TrialView) -> dict[str, Any] | None:
    from aorta_tui.store.resume import read_trial_result

    return read_trial_result(run_dir, view.trial_id)


class LogsGrew(Message):
    """What the follow worker read of each followed log: (name, the log it read, new lines)."""

    def __init__(self, grown: list[tuple[str, LogText, list[str]]]) -> None:
        super().__init__()
        self.grown = grown


class LogsRead(Message):
    """The trial's logs read whole (name -> log) by the reload worker."""

    def __init__(self, logs: dict[str, LogText]) -> None:
        super().__init__()
        self.logs = logs


def read_logs(trial_dir: Path | None) -> dict[str, LogText]:
    """stderr.log and stdout.log of ``trial_dir`` for the full-log view (file reads: the
    reload worker calls this)."""
    if trial_dir is None:
        return {name: LogText(Path(name), [], 0, "this trial has no directory in the run", 0) for name in LOG_NAMES}
    return {name: read_log(trial_dir / name) for name in LOG_NAMES}


class TrialRead(Message):
    """What the detail's worker read: result.json (when ``with_result``), else the logs' tails
    in ``budget`` lines (``tail`` None when reading failed)."""

    def __init__(self, budget: int, with_result: bool, result: dict[str, Any] | None, tail: Text | None) -> None:
        super().__init__()
        self.budget = budget
        self.with_result = with_result
        self.result = result
        self.tail = tail


class TrialDetailScreen(ModalScreen[None]):
    """``enter`` on a trial: everything the run recorded about it, then its logs' tails."""

    BINDINGS = [
        Binding("escape,q,enter", "dismiss", "Close"),
        Binding("l", "logs", "Full logs"),
    ]

    def __init__(self, run_dir: Path, view: TrialView, trial_dir: Path | None, shown_dir: str) -> None:
        super().__init__()
        self.run_dir, self.view, self.trial_dir, self.shown_dir = run_dir, view, trial_dir, shown_dir
        self._result_read = False  # result.json's detail is read once, before the first tail
        # The lines the tail pane holds now; the worker reads one at a time (TrialRead
        # answers) and the newest height wins.
        self._tail: LatestRead[int] = LatestRead(self._read)

    def compose(self) -> ComposeResult:
        with Vertical(id="trial-box"):
            with VerticalScroll(id="trial-facts"):
                # what the journal said, at once; result.json's detail follows from the worker
                yield Static(self._facts(None), id="trial-facts-text")
            yield Static("", id="trial-tail")
        yield Footer()

    def _facts(self, result: dict[str, Any] | None) -> str:
        lines = trial_facts(self.view, result)
        lines.append(f"[dim]directory: {escape(self.shown_dir)}[/dim]")
        lines += timeline_facts(result)  # last: the facts box scrolls, the directory stays in view
        return "\n".join(lines)

    def on_mount(self) -> None:
        self.call_after_refresh(self._show_tail)

    def on_resize(self, _event: object) -> None:
        self.call_after_refresh(self._show_tail)

    def _show_tail(self) -> None:
        # read now, or after the read under way
        self._tail.want(self.query_one("#trial-tail", Static).content_region.height)

    def _read(self, budget: int) -> None:
        with_result = not self._result_read

        # Why a worker: result.json and the logs are files in the run directory (a network
        # filesystem can stall); the box opens at once and fills in when they are read.
        def read() -> TrialRead:  # result.json first: its facts take rows from the tail, measured after they are drawn
            if with_result:
                return TrialRead(budget, True, read_result(self.run_dir, self.view), None)
            return TrialRead(budget, False, None, tail_text(self.trial_dir, budget))

        answer_from_worker(self, read, lambda: TrialRead(budget, with_result, None, None), group="trial-read",
                           name="read trial")

    @on(TrialRead)
    def _trial_read(self, message: TrialRead) -> None:
        if message.with_result:  # shown whatever the height: the tail is asked for once it is drawn
            self._tail.drop()  # (so nothing is read before that)
            self._tail.answered(message.budget)
            self._result_read = True
            self.query_one("#trial-facts-text", Static).update(self._facts(message.result))
            self.call_after_refresh(self._show_tail)  # the rows the facts left, now they are drawn
        elif self._tail.answered(message.budget) and message.tail is not None:
            self.query_one("#trial-tail", Static).update(message.tail)
        # (not answered: resized meanwhile, and the tail for the new height is read now)

    def action_logs(self) -> None:
        self.app.push_screen(TrialLogScreen(self.view, self.trial_dir, self.shown_dir))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)


class TrialLogScreen(ModalScreen[None]):
    """``l``: the trial's stderr.log and stdout.log, whole (a huge one: head and tail),
    scrollable, filling the terminal, and followed while the trial writes."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("s", "switch", "stderr/stdout"),
        Binding("r", "reload", "Reload"),
        Binding("g", "top", "Top", show=False),
        Binding("G", "bottom", "End", show=False),
    ]

    def __init__(self, view: TrialView, trial_dir: Path | None, shown_dir: str) -> None:
        super().__init__()
        self.view, self.trial_dir, self.shown_dir = view, trial_dir, shown_dir
        self.logs: dict[str, LogText] = {}
        self._follow_worker: Worker[None] | None = None
        self._reload_worker: Worker[None] | None = None
        self._tab_chosen = False  # the user switched tabs: the first read no longer picks one

    def compose(self) -> ComposeResult:
        with Vertical(id="log-box"):
            yield Static("", id="log-title")
            with TabbedContent(id="log-tabs"):
                for name in LOG_NAMES:
                    with TabPane(name, id=_pane_id(name)):
                        yield Log(id=_log_id(name), highlight=False, auto_scroll=False)
        yield Footer()

    def on_mount(self) -> None:
        # A failing trial's story is usually on stderr; the first read corrects this guess
        # (see _logs_read) unless the user switched meanwhile.
        self.show("stderr.log" if self.view.state in ("fail", "error") else "stdout.log")
        for name in LOG_NAMES:
            self.query_one(f"#{_log_id(name)}", Log).write_line(f"({name}: reading…)")
        self.action_reload()
        self.set_interval(FOLLOW_S, self._follow)

    def show(self, name: str) -> None:
        self.query_one(TabbedContent).active = _pane_id(name)
        self.query_one(f"#{_log_id(name)}", Log).focus()
        self._title()

    @property
    def current(self) -> str:
        active = self.query_one(TabbedContent).active
        return next((n for n in LOG_NAMES if _pane_id(n) == active), LOG_NAMES[0])

    def _title(self) -> None:
        log = self.logs.get(self.current)
        parts = [f"[b]{escape(self.view.trial_id)}[/b]  {self.view.state}"]
        if log is not None:
            parts.append(f"{len(log.lines)} lines, {log.size} bytes" + (f" ({escape(log.note)})" if log.note else ""))
        self.query_one("#log-title", Static).update("  ".join(parts) + f"\n[dim]{escape(self.shown_dir)}[/dim]")

    def action_reload(self) -> None:
        """Read both logs anew, in the reload worker; they are drawn when it answers (LogsRead)."""
        if busy(self._reload_worker):
            return  # the read under way answers: a second r starts none
        trial_dir = self.trial_dir

        # Why a worker: the logs are files in the run directory, read whole up to a few MiB (a
        # network filesystem can stall); the keys keep working while they are read.
        def read() -> None:
            self.post_message(LogsRead(read_logs(trial_dir)))

        self._reload_worker = self.run_worker(read, thread=True, group="log-reload", exit_on_error=False,
                                              name="read logs")

    @on(LogsRead)
    def _logs_read(self, message: LogsRead) -> None:
        first = not self.logs
        self.logs = message.logs  # a follow read of the logs before is dropped (see _logs_grew)
        for name, log in self.logs.items():
            widget = self.query_one(f"#{_log_id(name)}", Log)
            widget.clear()
            widget.write_lines(log.lines or [f"({name}: {log.note or 'empty'})"])
            widget.scroll_end(animate=False)
        if first and not self._tab_chosen:
            self.show(self._first_tab())
        self._title()

    def _first_tab(self) -> str:
        """A failing trial's story is usually on stderr; otherwise stdout is what it printed."""
        stderr = self.logs["stderr.log"].lines
        first = "stderr.log" if self.view.state in ("fail", "error") and stderr else "stdout.log"
        return "stderr.log" if not self.logs[first].lines and stderr else first

    def _follow(self) -> None:
        """The timer: ask the follow worker for what the trial wrote since the last read."""
        if self.trial_dir is None or busy(self._follow_worker) or busy(self._reload_worker):
            return  # no files to follow, or the last read (or a reload) still waits: skip this tick
        followed = [(name, log) for name, log in self.logs.items() if log.path.name]

        # Why a worker: these are reads of files a running trial writes (on a network
        # filesystem a read can stall for seconds), once a second; the lines come back in a
        # LogsGrew message and only the drawing happens on the event loop.
        def read() -> None:
            self.post_message(LogsGrew([(name, log, read_more(log)) for name, log in followed]))

        self._follow_worker = self.run_worker(read, thread=True, group="log-follow", exit_on_error=False,
                                              name="follow logs")

    @on(LogsGrew)
    def _logs_grew(self, message: LogsGrew) -> None:
        for name, log, more in message.grown:
            if not more or self.logs.get(name) is not log:
                continue  # nothing new, or a reload replaced that log meanwhile
            widget = self.query_one(f"#{_log_id(name)}", Log)
            at_end = widget.scroll_offset.y >= widget.max_scroll_y
            if not log.lines:
                widget.clear()
            log.lines.extend(more)
            widget.write_lines(more)
            if at_end:
                widget.scroll_end(animate=False)
        self._title()

    def on_tabbed_content_tab_activated(self, _event: TabbedContent.TabActivated) -> None:
        self._title()

    def action_switch(self) -> None:
        self._tab_chosen = True
        names = list(LOG_NAMES)
        self.show(names[(names.index(self.current) + 1) % len(names)])

    def action_top(self) -> None:
        self.query_one(f"#{_log_id(self.current)}", Log).scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.query_one(f"#{_log_id(self.current)}", Log).scroll_end(animate=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)


def _pane_id(name: str) -> str:
    return "pane-" + name.replace(".", "-")


def _log_id(name: str) -> str:
    return "log-" + name.replace(".", "-")
