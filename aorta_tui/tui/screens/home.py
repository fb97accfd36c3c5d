"""Home: what this machine has, the runs in the output directory, recipes nearby."""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import DataTable, Static
from textual.worker import Worker

from aorta_tui.tui.machine import MachineFacts, gather_machine_facts
from aorta_tui.tui.recipe_files import find_recipes
from aorta_tui.tui.screens.base import AortaScreen, busy

LIST_EVERY_S = 3.0

# What Home lists: (run directory, its row's cells) per run, a note on the runs, the recipes.
Listing = tuple[list[tuple[Path, tuple[str, ...]]], str, list[Path]]

NAV_ITEMS = (("1", "home"), ("2", "recipe editor"), ("3", "matrix"), ("4", "trace monitor"),
             ("5", "env diff"), ("6", "policy"), ("?", "help"), ("ctrl+p", "commands"), ("ctrl+q", "quit"))
NAV_TEXT = "  ".join(f"[b]{key}[/b] {label}" for key, label in NAV_ITEMS)


def nav_text(width: int) -> str:
    """The nav items in lines of at most ``width`` cells, broken between items, never inside
    one ("? / help" split over two lines read as two keys)."""
    lines: list[list[tuple[str, str]]] = [[]]
    used = 0
    for key, label in NAV_ITEMS:
        size = len(key) + 1 + len(label)
        if lines[-1] and used + 2 + size > width:
            lines.append([])
            used = 0
        used += size + (2 if lines[-1] else 0)
        lines[-1].append((key, label))
    return "\n".join("  ".join(f"[b]{k}[/b] {label}" for k, label in line) for line in lines)


class HomeScreen(AortaScreen):
    TITLE_TEXT = "Home"
    MAIN_WIDGET = "#runs"
    BINDINGS = [
        Binding("escape", "focus_main", "Leave field", show=False),
        Binding("enter", "open_selected", "Open", show=True),
        Binding("r", "refresh", "Refresh"),
        Binding("n", "new_recipe", "New recipe"),
        # priority: the tables would otherwise never see tab reach the screen
        Binding("tab", "next_pane", "Next pane", show=False, priority=True),
        Binding("shift+tab", "next_pane", "Previous pane", show=False, priority=True),
    ]

    # The newest listing (None before the first). Reactive: the tables are drawn by its
    # watcher, and only when it changed (a var compares old and new), so a re-list that found
    # nothing new keeps the tables and their cursors as they are.
    listing: var[Listing | None] = var(None, init=False)

    def compose_body(self) -> ComposeResult:
        with Vertical(id="home"):
            # laid out for the terminal from the first frame (on_resize keeps it so)
            yield Static(nav_text(max(20, self.app.size.width - 2)), id="home-nav")
            yield Static("gathering machine facts…", id="machine")
            with Horizontal(id="home-lists"):
                with Vertical(id="runs-pane"):
                    yield Static("Runs", classes="pane-title", id="runs-title")
                    yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
                with Vertical(id="recipes-pane"):
                    yield Static("Recipes nearby", classes="pane-title", id="recipes-title")
                    yield DataTable(id="recipes", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        super().on_mount()
        runs = self.query_one("#runs", DataTable)
        runs.add_columns("state", "ticket / run", "done", "failed", "started")
        recipes = self.query_one("#recipes", DataTable)
        recipes.add_columns("recipe")
        self._run_paths: list[Path] = []
        self._recipe_paths: list[Path] = []
        self._list_worker: Worker[None] | None = None
        self._facts_worker: Worker[None] | None = None
        # After the first frame: gathering facts must not delay it (nor compete for the GIL).
        self.call_after_refresh(self.action_refresh)
        # Run states change (a sweep finishes, another starts): re-list while Home is shown.
        self.set_interval(LIST_EVERY_S, self._relist)

    def _relist(self) -> None:
        if self.is_current and not busy(self._list_worker):  # a listing still under way: skip this tick
            # Why a worker: listing stats every run's journal (and parses the changed ones)
            # and walks for recipes; the tables are drawn when the listing comes back.
            self._list_worker = self.run_worker(self._list_runs_if_changed, thread=True, exit_on_error=False,
                                                name="list runs", group="list")

    def action_refresh(self) -> None:
        if self.aorta.fixed_machine_facts is not None:
            self._show_facts(self.aorta.fixed_machine_facts)
        elif not busy(self._facts_worker):
            # Why a worker: the facts come from sysfs, nvidia-smi and bpftrace (subprocesses
            # with timeouts of seconds). ``r`` while they (or a listing) run asks nothing twice.
            self._facts_worker = self.run_worker(self._gather_facts, thread=True, exit_on_error=False,
                                                 name="machine facts")
        if not busy(self._list_worker):  # the listing under way answers (the timer lists again)
            # Why a worker: a full listing parses every journal and walks for recipes.
            self._list_worker = self.run_worker(self._list_everything, thread=True, exit_on_error=False,
                                                name="list runs", group="list")

    def _gather_facts(self) -> None:
        facts = gather_machine_facts()
        self.from_thread(self._show_facts, facts)

    def _show_facts(self, facts: MachineFacts) -> None:
        gpus = ", ".join(facts.gpus) if facts.gpus else "none found (CPU-only: workloads run on CPU)"
        text = (
            f"[b]GPUs[/b]       {gpus}  [dim]({facts.gpu_source})[/dim]\n"
            f"[b]bpftrace[/b]   {facts.bpftrace}\n"
            f"[b]privileges[/b] {facts.privileges}\n"
            f"[b]output[/b]     {self.display_path(self.aorta.output_dir)}"
        )
        self.query_one("#machine", Static).update(text)

    def _list_runs_if_changed(self) -> None:
        """The timer's re-list: ``list_runs`` parses every journal whole, so skip it while no
        journal changed and none was running (a running run can stop without writing)."""
        from aorta_tui.store.naming import JOURNAL

        signature = _journal_signature(self.aorta.output_dir, JOURNAL)
        last = self.listing  # read here, set only on the event loop
        if (
            signature is not None
            and signature == getattr(self, "_journals_seen", None)
            and last is not None
            and not any(row[0] == "running" for _path, row in last[0])
        ):
            self.from_thread(self._show_lists, last[0], last[1], find_recipes(self.aorta.cwd))
            return
        self._list_everything()

    def _list_everything(self) -> None:
        runs_rows: list[tuple[Path, tuple[str, ...]]] = []
        runs_note = ""
        from aorta_tui.store import run_list
        from aorta_tui.store.naming import JOURNAL

        self._journals_seen = _journal_signature(self.aorta.output_dir, JOURNAL)
        for info in run_list.list_runs(self.aorta.output_dir):
            started = _fmt_time(info.started_at)
            runs_rows.append(
                (
                    Path(info.path),
                    (info.state, f"{info.ticket}/{info.run_id}", f"{info.done}/{info.total}",
                     failure_counts(getattr(info, "failed", 0), getattr(info, "errored", 0)), started),
                )
            )
        recipes = find_recipes(self.aorta.cwd)
        self.from_thread(self._show_lists, runs_rows, runs_note, recipes)

    def _show_lists(
        self, runs_rows: list[tuple[Path, tuple[str, ...]]], runs_note: str, recipes: list[Path]
    ) -> None:
        self.listing = (runs_rows, runs_note, recipes)

    def watch_listing(self, listing: Listing | None) -> None:
        if listing is None:
            return
        runs_rows, runs_note, recipes = listing
        runs = self.query_one("#runs", DataTable)
        selected = self._run_paths[runs.cursor_row] if self._run_paths and runs.cursor_row < len(self._run_paths) else None
        runs.clear()
        self._run_paths = [path for path, _row in runs_rows]
        for _path, row in runs_rows:
            state = row[0]
            style = {"running": "bold green", "interrupted": "yellow"}.get(state, "")
            runs.add_row(Text(state, style=style), *(Text(cell, style="bold red" if i == 2 and cell != "—" else "")
                                                     for i, cell in enumerate(row[1:])))
        if selected in self._run_paths:
            runs.move_cursor(row=self._run_paths.index(selected), animate=False)
        title = f"Runs in {self.display_path(self.aorta.output_dir)}"
        if runs_note:
            title += f" — {runs_note}"
        elif not runs_rows:
            title += " — none yet (write a recipe, press 2)"
        self.query_one("#runs-title", Static).update(title)
        table = self.query_one("#recipes", DataTable)
        recipe_row = table.cursor_row
        table.clear()
        self._recipe_paths = recipes
        for path in recipes:
            table.add_row(Text(self.display_path(path)))
        if recipes:
            table.move_cursor(row=min(recipe_row, len(recipes) - 1), animate=False)
        if not recipes:
            self.query_one("#recipes-title", Static).update("Recipes nearby — none here or under ./recipes")

    def action_open_selected(self) -> None:
        focused = self.focused
        if isinstance(focused, DataTable) and focused.id == "recipes" and self._recipe_paths:
            self.aorta.open_recipe(self._recipe_paths[focused.cursor_row])
        elif isinstance(focused, DataTable) and focused.id == "runs" and self._run_paths:
            self.aorta.open_run(self._run_paths[focused.cursor_row])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "recipes" and self._recipe_paths:
            self.aorta.open_recipe(self._recipe_paths[event.cursor_row])
        elif event.data_table.id == "runs" and self._run_paths:
            self.aorta.open_run(self._run_paths[event.cursor_row])

    def on_resize(self, event: events.Resize) -> None:
        # the nav spans the screen, less its padding (1 each side)
        self.query_one("#home-nav", Static).update(nav_text(max(20, event.size.width - 2)))

    def action_next_pane(self) -> None:
        """Between the runs and the recipes lists (the two panes there are), either way round."""
        panes = [self.query_one("#runs", DataTable), self.query_one("#recipes", DataTable)]
        current = self.focused
        target = panes[1] if current is panes[0] else panes[0]
        target.focus()

    def action_new_recipe(self) -> None:
        self.aorta.open_recipe(None)


def failure_counts(failed: int, errored: int) -> str:
    """``3 fail, 1 error`` (only what is there), or ``—``: a run "finished" all the same."""
    parts = [f"{failed} fail"] * bool(failed) + [f"{errored} error"] * bool(errored)
    return ", ".join(parts) or "—"


def _journal_signature(output_dir: Path, journal: str) -> tuple[tuple[str, int, int], ...]:
    """(path, mtime, size) of every run's journal: what ``list_runs`` would find changed."""
    found = []
    for path in sorted(Path(output_dir).glob(f"*/*/{journal}")):
        try:
            stat = path.stat()
        except OSError:
            continue
        found.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(found)


def _fmt_time(ts: float | None) -> str:
    if not ts:
        return "—"
    # the run id beside it carries the year: the column fits 80 columns whole (issue 38)
    return time.strftime("%m-%d %H:%M", time.localtime(ts))
