"""Matrix progress: a run's cells x trials as its journal reports them, live or finished.

The sweep runs in its own detached process; this screen only follows ``journal.jsonl``
(re-reading it from the start whenever a run is opened, which is how re-attaching works) and
sends commands: cancel (signal the orchestrator) and resume (launch it again detached).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import var
from textual.widgets import Static
from textual.worker import Worker

from aorta_tui.core.events import Event
from aorta_tui.tui.bridge import EngineBridge, JournalFailed, JournalGrew, PendingEvents
from aorta_tui.tui.matrix_state import MatrixState, TrialView, read_placement_file
from aorta_tui.tui.screens.base import AortaScreen, answer_from_worker, busy
from aorta_tui.tui.screens.bundle_review import BundleReviewScreen
from aorta_tui.tui.screens.dialogs import ConfirmScreen, WarningsScreen
from aorta_tui.tui.screens.latest_read import LatestRead
from aorta_tui.tui.screens.pickers import PathPicker
from aorta_tui.tui.screens.trial import TrialDetailScreen, TrialLogScreen, tail_text, trial_facts
from aorta_tui.tui.widgets.matrix_grid import MatrixGrid, confound_legend

REDRAW_S = 0.25  # the grid redraws at most 4 times a second however fast trials finish


def fmt_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class OrchestratorProbed(Message):
    """Whether a process holds ``run_dir``'s lock (it runs the sweep), from the probe worker."""

    def __init__(self, run_dir: Path, alive: bool) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.alive = alive


class TailRead(Message):
    """The last ``budget`` lines of a trial's logs, read by the tail worker (``tail`` is None
    when reading failed: the worker's error is shown as a notification)."""

    def __init__(self, trial_dir: Path | None, budget: int, tail: Text | None) -> None:
        super().__init__()
        self.trial_dir = trial_dir
        self.budget = budget
        self.tail = tail


class RunRead(Message):
    """What the open worker read of ``run_dir`` (given as ``given``): a fresh state from its
    plan; ``state`` None when it is no run directory, ``failed`` when the read raised (the
    worker's error is shown as a notification)."""

    def __init__(self, run_dir: Path, given: Path, state: MatrixState | None, failed: bool) -> None:
        super().__init__()
        self.run_dir, self.given, self.state, self.failed = run_dir, given, state, failed


class NodesRead(Message):
    """A finished Slurm run's per-node line (empty for a local run), from the node worker."""

    def __init__(self, run_dir: Path, line: str) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.line = line


class PlacementRead(Message):
    """``slurm/jobs.json`` read anew by the placement worker: (stamp, trial -> (node, state))."""

    def __init__(self, run_dir: Path, read: tuple[tuple[int, int], dict[str, tuple[str | None, str | None]]]) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.read = read


class EnvSnapshotsListed(Message):
    """The env snapshots of ``run_dir`` (sorted), listed by the env-diff worker."""

    def __init__(self, run_dir: Path, snapshots: list[Path]) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.snapshots = snapshots


def read_run(run_dir: Path) -> MatrixState | None:
    """A fresh state of ``run_dir`` from its plan (pending trials show before they start), or
    None when it is no run directory. File reads: the open worker calls this."""
    if not (run_dir / "journal.jsonl").exists() and not run_dir.is_dir():
        return None
    return MatrixState.for_run(run_dir)


def node_line(run_dir: Path) -> str:
    """A finished Slurm run's per-node failure summary as one line of markup ("" for a local
    run). Reads every trial's result.json: the node worker calls this."""
    from rich.markup import escape

    from aorta_tui.executor.placement import node_summary

    lines = node_summary(run_dir)
    return escape("; ".join(ln.strip() for ln in lines)).replace("per node (Slurm):;", "per node (Slurm):", 1)


def env_snapshots(run_dir: Path) -> list[Path]:
    """The run's env snapshots, sorted (a directory listing: the env-diff worker calls this)."""
    return sorted((run_dir / "env").glob("*.json"))


class MatrixScreen(EngineBridge, AortaScreen):
    TITLE_TEXT = "Matrix"
    MAIN_WIDGET = "#matrix-grid"
    BINDINGS = [
        Binding("escape", "focus_main", "Leave field", show=False),
        # the footer holds these at 80 columns whole; w (the summary says "N warnings (w)")
        # and E are in `?`, the palette and docs/tui.md
        Binding("o", "open_run", "Open run"),
        Binding("enter", "detail", "Trial detail"),
        Binding("l", "logs", "Logs"),
        Binding("c", "cancel_run", "Cancel"),
        Binding("w", "warnings", "Warnings", show=False),
        Binding("R", "resume_run", "Resume"),
        Binding("E", "diff_env", "Diff the run's env snapshots", show=False),
        Binding("b", "bundle", "Bundle"),
    ]

    # Whether a process holds the open run's lock (None: not asked yet). Reactive: a change
    # redraws the summary on the next tick, whoever set it (the probe, opening another run).
    orchestrator_alive: var[bool | None] = var(None, init=False)

    def __init__(self) -> None:
        super().__init__()
        self.run_dir: Path | None = None
        self.state: MatrixState | None = None
        self._pending: PendingEvents | None = None  # what the journal worker read, not yet shown
        self._dirty = False
        self.events_seen = 0
        self._per_node: tuple[Path, str] | None = None  # a finished Slurm run's per-node line
        self._probe_worker: Worker[None] | None = None
        # The detail pane's log tail: what it should show (trial directory, lines); the tail
        # worker reads one at a time and answers with TailRead.
        self._tail: LatestRead[tuple[Path | None, int]] = LatestRead(self._read_tail)
        # The run to open (absolute, as given); the open worker reads one at a time and
        # answers with RunRead. Both: the newest request wins.
        self._open: LatestRead[tuple[Path, Path]] = LatestRead(self._read_run)
        self._nodes_reading = False  # the node worker reads; its NodesRead answers
        self._placement_worker: Worker[None] | None = None
        self._env_worker: Worker[None] | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="matrix"):
            yield Static("no run open: press o to pick one, or open one from Home (1)", id="matrix-summary")
            yield MatrixGrid(id="matrix-grid")
            yield Static("", id="trial-detail")

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(REDRAW_S, self._redraw)
        self.set_interval(1.0, self._check_orchestrator)

    def _check_orchestrator(self) -> None:
        """Is a process still running this sweep? (its flock on ``.lock``, via the engine)."""
        if self.run_dir is None:
            return
        view = self._selected_view()
        if view is not None and view.state == "running":
            self._show_detail()  # its logs grow while it runs (the tail worker reads them)
        self._read_placement()
        if busy(self._probe_worker):
            return  # the last probe still waits: one at a time, never a pile of threads
        # Why a worker: the lock probe may wait on a dying holder (0.2 s) or a stalled
        # filesystem; a worker thread asks, the answer comes back as a message
        # (OrchestratorProbed), and the event loop never waits on it.
        run_dir = self.run_dir
        self._probe_worker = self.run_worker(lambda: self._probe_lock(run_dir), thread=True, group="lock-probe",
                                             exit_on_error=False, name="lock probe")

    def _probe_lock(self, run_dir: Path | None) -> None:
        from aorta_tui.store.lock import lock_holder

        if run_dir is not None:
            self.post_message(OrchestratorProbed(run_dir, lock_holder(run_dir) is not None))

    @on(OrchestratorProbed)
    def _orchestrator_probed(self, message: OrchestratorProbed) -> None:
        if message.run_dir == self.run_dir:
            self.orchestrator_alive = message.alive

    def watch_orchestrator_alive(self) -> None:
        self._dirty = True

    def on_unmount(self) -> None:
        self._stop_follower()

    # --- following a run -----------------------------------------------------------------

    def open_run(self, run_dir: Path) -> None:
        """Show ``run_dir``: the open worker reads its plan (RunRead), then its whole journal is
        read and followed (re-attach). The run shown so far stays until the new one is read."""
        # Absolute now: the path was given relative to this process's working directory
        # (``aorta-out/...`` by default), and everything below reads files under it.
        self._open.want((Path(run_dir).absolute(), Path(run_dir)))  # read now, or after the read under way
        if self.state is None:
            self.query_one("#matrix-summary", Static).update(f"opening {self.display_path(run_dir)}…")

    def _read_run(self, asked: tuple[Path, Path]) -> None:
        run_dir, given = asked

        # Why a worker: plan.json and the directory checks are reads in the run directory (a
        # network filesystem can stall); the keys keep working while they are read.
        answer_from_worker(self, lambda: RunRead(run_dir, given, read_run(run_dir), False),
                           lambda: RunRead(run_dir, given, None, True), group="open-run", name="open run")

    @on(RunRead)
    def _run_read(self, message: RunRead) -> None:
        if not self._open.answered((message.run_dir, message.given)):
            return  # another run was asked for meanwhile: the newest wins (it is read now)
        if message.failed or message.state is None:
            if not message.failed:  # a failed read: the worker's error is the notification
                self.notify(f"{message.given} is not a run directory (no journal.jsonl)", severity="error")
            if self.state is None:  # "opening …" no more
                self.query_one("#matrix-summary", Static).update(
                    "no run open: press o to pick one, or open one from Home (1)")
            return
        self._show_run(message.run_dir, message.state)

    def _show_run(self, run_dir: Path, state: MatrixState) -> None:
        """Switch to ``run_dir`` (its plan read into ``state``) and follow its journal."""
        self._stop_follower()
        self.run_dir = run_dir
        if self.run_dir not in self.aorta.opened_runs:
            self.aorta.opened_runs.append(self.run_dir)
        self.state = state
        self.events_seen = 0
        self.sub_title = self.display_path(self.run_dir)
        self.orchestrator_alive = None
        self._check_orchestrator()
        self._pending = PendingEvents(self.run_dir)
        self.follow_journal(self._pending)
        self._dirty = True

    def _stop_follower(self) -> None:
        if self._pending is not None:
            self._pending.stop.set()  # the worker's watch ends within its step
            self._pending = None

    @on(JournalGrew)
    def _journal_grew(self, message: JournalGrew) -> None:
        """New journal events (coalesced messages: one call takes every batch read so far)."""
        if message.pending is self._pending:
            self._fold(message.pending.take())

    @on(JournalFailed)
    def _journal_failed(self, message: JournalFailed) -> None:
        if message.pending is self._pending:
            self.notify(f"following the journal failed: {message.error}", severity="error", timeout=12)

    def _fold(self, batch: list[Event]) -> None:
        if self.state is None or not batch:
            return
        finished_before = self.state.status
        first_batch = self.events_seen == 0  # the history, read when the run was opened
        self.state.apply_all(batch)
        self.events_seen += len(batch)
        if self.state.status is not None and finished_before is None and not first_batch:
            # Draw now, before the toast: a "run completed" toast over a summary still saying
            # 9/10 done (the timer's next tick) shows two figures that disagree.
            self.refresh_view()
            self._on_run_finished()  # it finished while we watched
            return
        self._dirty = True

    def _redraw(self) -> None:
        """The timer: draw at most every REDRAW_S, however fast the journal grows."""
        if self.state is None:
            return
        if self._dirty:
            self._dirty = False
            self.refresh_view()

    def _on_run_finished(self) -> None:
        assert self.state is not None and self.run_dir is not None
        failing = self.state.count("fail") + self.state.count("error")
        self.notify(
            f"run {self.state.status}: {self.state.done}/{self.state.total} trials, {failing} failed or errored",
            severity="warning" if failing or self.state.status != "completed" else "information",
        )

    def refresh_view(self) -> None:
        """Render the state now (the timer calls this; tests may call it directly)."""
        if self.state is None:
            return
        state = self.state
        grid = self.query_one(MatrixGrid)
        grid.sync(state)
        self.query_one("#matrix-summary", Static).update(self._summary(state))
        self._show_detail()

    def _summary(self, state: MatrixState) -> str:
        counts = (
            f"[green]✓ {state.count('pass')}[/]  [red]✗ {state.count('fail')}[/]  "
            f"[yellow]! {state.count('error')}[/]  [cyan]▶ {len(state.running)}[/]"
        )
        if state.status is not None:
            where = f"[b]{state.status}[/b] (exit code {state.exit_code})"
        elif self.orchestrator_alive is False:
            where = "[b yellow]stopped without finishing[/] (no orchestrator holds the run: R resumes it)"
        else:
            eta = state.eta_s()
            where = "[b]running[/b]" + (
                f"  ETA ~{fmt_duration(eta)} (pace since start)" if eta is not None else "  ETA after the first trial"
            )
        n_warn = len(state.warnings)
        warn = f"  [yellow]{n_warn} warning{'s' if n_warn != 1 else ''} (w)[/]" if n_warn else ""
        run = state.run_id or (self.run_dir.name if self.run_dir else "")
        legend = confound_legend(state) if state.status is not None else ""
        nodes = self._node_text() if state.status is not None else ""
        return (f"[b]{run}[/b]  {state.done}/{state.total or len(state.trials)} done  {counts}  {where}{warn}"
                + (f"\n[dim]{legend}[/dim]" if legend else "") + (f"\n{nodes}" if nodes else ""))

    def _node_text(self) -> str:
        """Where a finished Slurm run's trials failed, per node (read once per run, by the node
        worker: until it answers, nothing)."""
        if self.run_dir is None:
            return ""
        if self._per_node is not None and self._per_node[0] == self.run_dir:
            return self._per_node[1]
        self._read_nodes()
        return ""

    def _read_nodes(self) -> None:
        if self._nodes_reading or self.run_dir is None:
            return  # one read at a time: its answer redraws, and the redraw asks again if need be
        run_dir = self.run_dir
        self._nodes_reading = True

        # Why a worker: the summary reads every trial's result.json (hundreds of files on a
        # network filesystem); it is drawn when read.
        def read() -> None:
            line = ""
            try:
                line = node_line(run_dir)
            finally:  # a failed read is no summary (its error is notified once), never a retry per redraw
                self.post_message(NodesRead(run_dir, line))

        self.run_worker(read, thread=True, group="node-summary", exit_on_error=False, name="node summary")

    @on(NodesRead)
    def _nodes_read(self, message: NodesRead) -> None:
        self._nodes_reading = False
        if message.run_dir != self.run_dir:
            self._dirty = True  # the run before's: the redraw asks for this run's line
            return
        self._per_node = (message.run_dir, message.line)
        if message.line:
            self._dirty = True

    def _read_placement(self) -> None:
        """Ask the placement worker whether ``slurm/jobs.json`` changed (each tick, one at a time)."""
        if self.state is None or self.run_dir is None or busy(self._placement_worker):
            return
        run_dir, stamp = self.run_dir, self.state.placement_stamp

        # Why a worker: a stat and, when it changed, a read of the job map in the run directory.
        def read() -> None:
            answer = read_placement_file(run_dir, stamp)
            if answer is not None:
                self.post_message(PlacementRead(run_dir, answer))

        self._placement_worker = self.run_worker(read, thread=True, group="placement", exit_on_error=False,
                                                 name="Slurm placement")

    @on(PlacementRead)
    def _placement_read(self, message: PlacementRead) -> None:
        if message.run_dir == self.run_dir and self.state is not None:
            self.state.set_placement(*message.read)
            self._dirty = True

    # --- trial detail --------------------------------------------------------------------

    def _selected_view(self) -> TrialView | None:
        if self.state is None:
            return None
        picked = self.query_one(MatrixGrid).selected()
        return self.state.trials.get(picked) if picked else None

    def on_data_table_cell_highlighted(self, _event: object) -> None:
        self._show_detail()

    def on_data_table_cell_selected(self, _event: object) -> None:
        # The grid (a DataTable) takes ``enter`` itself, as "select this cell": open it.
        self.action_detail()

    def on_resize(self, _event: object) -> None:
        self.call_after_refresh(self._show_detail)  # the tail takes the height there is

    def _show_detail(self) -> None:
        """Ask for the selected trial's detail: its facts are in memory, its logs' tails are
        read by the tail worker; the pane is drawn, facts and tail together, when it answers."""
        view = self._selected_view()
        detail = self.query_one("#trial-detail", Static)
        if view is None:
            self._tail.drop()
            detail.update("move onto a trial to see its detectors, exit status and log tail "
                          "(enter: detail, l: full logs)")
            return
        # the tail takes every row the facts leave: a larger terminal shows more
        budget = max(0, detail.content_region.height - len(self._facts(view)))
        self._tail.want((self._trial_dir(view), budget))  # read now, or after the read under way

    def _read_tail(self, asked: tuple[Path | None, int]) -> None:
        trial_dir, budget = asked

        # Why a worker: the tails are file reads in the run directory (a network filesystem
        # can stall), asked on every cursor move and every second for a running trial. One
        # read at a time; the newest request wins (see _tail_read).
        answer_from_worker(self, lambda: TailRead(trial_dir, budget, tail_text(trial_dir, budget)),
                           lambda: TailRead(trial_dir, budget, None), group="log-tail", name="log tail")

    @on(TailRead)
    def _tail_read(self, message: TailRead) -> None:
        if not self._tail.answered((message.trial_dir, message.budget)):
            return  # the cursor moved (or the pane resized) meanwhile: that tail is read now
        view = self._selected_view()
        if view is not None and message.tail is not None and self._trial_dir(view) == message.trial_dir:
            self.query_one("#trial-detail", Static).update(self._detail_text(view, message.tail))

    def _trial_dir(self, view: TrialView) -> Path | None:
        return self.state.trial_path(view) if self.state is not None else None

    @staticmethod
    def _facts(view: TrialView) -> list[str]:
        return trial_facts(view, None)[:3]

    def _detail_text(self, view: TrialView, tail: Text) -> Text:
        """The trial's facts (one line each, cut at the width), then its logs' tails in every
        row left."""
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, line in enumerate(self._facts(view)):
            text.append_text(Text.from_markup(("\n" if i else "") + line))
        if tail:
            text.append("\n")
            text.append_text(tail)
        return text

    def _shown_dir(self, view: TrialView) -> str:
        trial_dir = self._trial_dir(view)
        return self.display_path(trial_dir) if trial_dir is not None else "(no directory)"

    def action_detail(self) -> None:
        view = self._selected_view()
        if view is None or self.run_dir is None:
            self.notify("move the cursor onto a trial column", severity="warning")
            return
        self.app.push_screen(TrialDetailScreen(self.run_dir, view, self._trial_dir(view), self._shown_dir(view)))

    def action_logs(self) -> None:
        view = self._selected_view()
        if view is None:
            self.notify("move the cursor onto a trial column", severity="warning")
            return
        self.app.push_screen(TrialLogScreen(view, self._trial_dir(view), self._shown_dir(view)))

    # --- commands ------------------------------------------------------------------------

    def action_open_run(self) -> None:
        output_dir, cwd = self.aorta.output_dir, self.aorta.cwd

        def list_them() -> list[Path]:  # the picker's worker: parses every run's journal whole
            from aorta_tui.store.run_list import list_runs

            return [Path(info.path) for info in list_runs(output_dir)]

        def chosen(paths: list[Path] | None) -> None:
            if paths:
                self.open_run(paths[0])

        # base: a typed relative path is the App's working directory's (as every other picker
        # takes it), not this process's
        self.app.push_screen(PathPicker("Open a run directory", list_them, base=cwd), chosen)

    def action_cancel_run(self) -> None:
        if self.run_dir is None:
            self.notify("no run open", severity="warning")
            return
        run_dir = self.run_dir
        if self.state is not None and self.state.status is not None:
            self.notify(f"{run_dir.name} is not running (it {self.state.status}): nothing to cancel",
                        severity="warning")
            return

        def cancel() -> None:
            from aorta_tui.relay.launch import cancel_run

            cancel_run(run_dir)
            self.from_thread(self.notify, f"cancel sent to the orchestrator of {run_dir.name}")

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(cancel, thread=True, exit_on_error=False, name="cancel run")

        def detail() -> str:  # read again while the question is open: trials keep finishing
            state = self.state
            left = (state.total - state.done) if state is not None and state.total else None
            return ("The running trial is stopped; " + (f"{left} trial(s) stay undone; " if left
                                                        else "") + "R resumes the run later.")

        self.app.push_screen(ConfirmScreen(f"Cancel the sweep {run_dir.name}?", detail), answered)

    def action_warnings(self) -> None:
        state = self.state
        if state is None or not state.warnings:
            self.notify("no warnings in this run" if state is not None else "no run open")
            return
        self.app.push_screen(WarningsScreen(f"Warnings of {state.run_id or self.run_dir}", state.warnings))

    def action_resume_run(self) -> None:
        if self.run_dir is None:
            self.notify("no run open", severity="warning")
            return
        if self.state is not None and self.state.status is None and self.state.running:
            self.notify("the run is still running: nothing to resume", severity="warning")
            return
        run_dir = self.run_dir

        def resume() -> None:
            from aorta_tui.relay.launch import launch_detached

            launch_detached(None, run_dir.parent.parent, resume=run_dir)
            self.from_thread(self.notify, f"resuming {run_dir.name}")

        self.run_worker(resume, thread=True, exit_on_error=False, name="resume run")

    def action_bundle(self) -> None:
        """What a bundle of this run would redact; ``w`` in the review writes it."""
        if self.run_dir is None:
            self.notify("no run open: press o to pick one", severity="warning")
            return
        self.app.push_screen(BundleReviewScreen(self.run_dir, self.aorta.cwd, self.display_path(self.run_dir)))

    def action_diff_env(self) -> None:
        if self.run_dir is None or busy(self._env_worker):
            return  # no run, or the listing under way answers (a second E starts none)
        run_dir = self.run_dir

        # Why a worker: a listing of the run's env/ directory (a network filesystem can stall).
        def listing() -> None:
            self.post_message(EnvSnapshotsListed(run_dir, env_snapshots(run_dir)))

        self._env_worker = self.run_worker(listing, thread=True, group="env-snapshots", exit_on_error=False,
                                           name="env snapshots")

    @on(EnvSnapshotsListed)
    def _env_snapshots_listed(self, message: EnvSnapshotsListed) -> None:
        if message.run_dir != self.run_dir:
            return  # another run was opened meanwhile: E asked about the one before
        snapshots = message.snapshots
        if len(snapshots) >= 2:
            from aorta_tui.tui.screens.env_diff import EnvDiffScreen

            screen = self.app.get_screen("envdiff", EnvDiffScreen)
            self.aorta.action_goto("envdiff")
            self.app.call_after_refresh(screen.set_paths, snapshots[0], snapshots[1])
        else:
            self.notify("this run holds fewer than two env snapshots", severity="warning")
