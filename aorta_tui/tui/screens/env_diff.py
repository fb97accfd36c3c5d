"""Env diff: two snapshots, their differences grouped by section and ranked by the engine."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Label, Static

from aorta_tui.tui.screens.base import AortaScreen, answer_from_worker
from aorta_tui.tui.screens.latest_read import LatestRead
from aorta_tui.tui.screens.pickers import PathPicker, same_file

if TYPE_CHECKING:
    from aorta_tui.envsnap.diff import DiffReport

RANKS = ("numerics", "scheduling", "informational")
RANK_STYLE = {"numerics": "bold red", "scheduling": "bold yellow", "informational": "dim"}


@dataclass(frozen=True)
class DiffRow:
    """One difference as the engine reported it, flattened for display."""

    path: str
    section: str
    change: str
    rank: str
    a: str
    b: str
    provenance: str


Asked = tuple[str, str, bool]  # snapshot A and B as typed, and whether volatile fields are shown


class DiffRead(Message):
    """The diff worker's answer for ``asked``: the rows and the report's facts, or why there are
    none (``problem``: A and B the same file, or the loader's located message); ``failed`` when
    the diff raised (the worker's error is the notification)."""

    def __init__(self, asked: Asked, rows: list[DiffRow] | None = None, hidden_volatile: int = 0,
                 notes: list[str] | None = None, mode: str = "", problem: str = "", same: bool = False,
                 failed: bool = False) -> None:
        super().__init__()
        self.asked, self.rows, self.hidden_volatile = asked, rows, hidden_volatile
        self.notes, self.mode, self.problem, self.same = notes or [], mode, problem, same
        self.failed = failed


def diff_at(cwd: Path, asked: Asked) -> DiffRead:
    """Diff the snapshots ``asked`` names under ``cwd`` (a run directory stands for its host
    snapshot). File reads, stats and resolves: the diff worker calls this."""
    from aorta_tui import envsnap as module
    from aorta_tui.core.errors import AortaError

    a, b, include_volatile = asked
    path_a, path_b = _resolve_snapshot(cwd / a), _resolve_snapshot(cwd / b)
    if same_file(path_a, path_b):
        return DiffRead(asked, problem=f"A and B are the same file ({a}): give two different snapshots", same=True)
    try:
        snap_a, snap_b = module.load_snapshot(path_a), module.load_snapshot(path_b)
    except AortaError as exc:  # its located message, in the summary and notified
        return DiffRead(asked, problem=exc.render())
    report = module.diff_snapshots(snap_a, snap_b, include_volatile=include_volatile)
    return DiffRead(asked, rows_from_report(report), report.hidden_volatile, list(report.notes), report.mode)


def _short(value: object, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _value(value: object, state: str | None, missing: bool) -> str:
    if missing:
        return "—"
    if state and state != "ok":
        return f"({state})"
    return "unset" if value is None else _short(value, 40)


def rows_from_report(report: DiffReport) -> list[DiffRow]:
    """Flatten the engine's ``DiffReport`` entries; the ranking is the engine's, not ours."""
    rows = []
    for entry in report.entries:
        prov = [f"A: {entry.provenance_a or 'not recorded'}" + (f" [{entry.a_state}]" if entry.a_state else ""),
                f"B: {entry.provenance_b or 'not recorded'}" + (f" [{entry.b_state}]" if entry.b_state else "")]
        if entry.volatile:
            prov.append("volatile: changes between any two captures")
        rows.append(
            DiffRow(
                path=entry.path,
                section=entry.section,
                change=entry.change,
                rank=entry.rank,
                a=_value(entry.a_value, entry.a_state, entry.change == "added"),
                b=_value(entry.b_value, entry.b_state, entry.change == "removed"),
                provenance="\n".join(prov),
            )
        )
    return rows


def group_rows(rows: list[DiffRow]) -> list[tuple[str, list[DiffRow]]]:
    """Sections ordered by their most relevant difference; inside, by rank then path."""
    order = {rank: i for i, rank in enumerate(RANKS)}
    sections: dict[str, list[DiffRow]] = {}
    for row in rows:
        sections.setdefault(row.section, []).append(row)
    grouped = [
        (name, sorted(items, key=lambda r: (order.get(r.rank, len(RANKS)), r.path)))
        for name, items in sections.items()
    ]
    grouped.sort(key=lambda g: (min(order.get(r.rank, len(RANKS)) for r in g[1]), g[0]))
    return grouped


class EnvDiffScreen(AortaScreen):
    TITLE_TEXT = "Env diff"
    MAIN_WIDGET = "#diff-table"
    BINDINGS = [
        Binding("escape", "focus_main", "Leave field", show=False),
        # the footer holds these at 80 columns whole; n/s/i (the rank toggles, named on the
        # screen's rank line) are in `?`, the palette and docs/tui.md
        Binding("d", "diff", "Diff"),
        Binding("o", "pick", "Pick"),
        Binding("slash", "search", "Search", key_display="/"),
        Binding("n", "toggle_rank('numerics')", "Numerics", show=False),
        Binding("s", "toggle_rank('scheduling')", "Scheduling", show=False),
        Binding("i", "toggle_rank('informational')", "Info", show=False),
        Binding("v", "toggle_volatile", "Volatile"),
        Binding("p", "provenance", "Provenance"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[DiffRow] = []
        self._shown: list[DiffRow | None] = []
        self.shown_ranks: set[str] = set(RANKS)
        self.include_volatile = False
        self.search_text = ""
        self.hidden_volatile = 0
        self.report_notes: list[str] = []
        self.report_mode = ""
        # The diff to show (A, B, volatile); the diff worker reads one at a time (DiffRead
        # answers): the newest asked for wins, a second d while it reads starts no second worker.
        self._diff: LatestRead[Asked] = LatestRead(self._read_diff)

    def compose_body(self) -> ComposeResult:
        with Vertical(id="envdiff"):
            with Horizontal(id="envdiff-paths", classes="toolbar"):
                yield Label("A ")
                yield Input(placeholder="snapshot A (env.json or run dir)", id="snap-a", compact=True)
                yield Label(" B ")
                yield Input(placeholder="snapshot B", id="snap-b", compact=True)
                yield Button("Diff", id="diff-button", variant="primary", compact=True)
            with Horizontal(id="envdiff-filters", classes="toolbar"):
                yield Input(placeholder="/ search paths and values", id="diff-search", compact=True)
                yield Static("", id="diff-filters")
            yield Static("pick two snapshots (o) or type their paths, then d", id="diff-summary")
            yield DataTable(id="diff-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="diff-detail")

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one("#diff-table", DataTable)
        table.add_columns("rank", "field", "change", "A", "B")
        self._show_filters()

    def set_paths(self, a: Path, b: Path, *, run: bool = True) -> None:
        self.query_one("#snap-a", Input).value = self.display_path(a)
        self.query_one("#snap-b", Input).value = self.display_path(b)
        if run:
            self.action_diff()

    # --- actions -------------------------------------------------------------------------

    def action_diff(self) -> None:
        a = self.query_one("#snap-a", Input).value.strip()
        b = self.query_one("#snap-b", Input).value.strip()
        if not a or not b:
            self.notify("give two snapshots: press o to pick them", severity="warning")
            return
        self._diff.want((a, b, self.include_volatile))  # read now, or after the read under way
        self.query_one("#diff-summary", Static).update(f"diffing {escape(a)} and {escape(b)}…")

    def _read_diff(self, asked: Asked) -> None:
        cwd = self.aorta.cwd

        # Why a worker: the same-file check stats and resolves both paths, and the diff loads
        # both snapshots (a network filesystem can stall); the keys keep working meanwhile.
        answer_from_worker(self, lambda: diff_at(cwd, asked),
                           lambda: DiffRead(asked, problem="the diff failed (see the error)", failed=True),
                           group="diff", name="env diff")

    @on(DiffRead)
    def _diff_read(self, message: DiffRead) -> None:
        if not self._diff.answered(message.asked):
            return  # other snapshots were asked for meanwhile: the newest wins (they are read now)
        if message.rows is not None:
            self._show(message.rows, message.hidden_volatile, message.notes, message.mode)
            return
        if message.same:
            self.query_one("#diff-summary", Static).update(f"[yellow]{escape(message.problem)}[/]")
            self.notify(message.problem, severity="warning", markup=False)
            return
        self.query_one("#diff-summary", Static).update(escape(message.problem))
        if not message.failed:  # (a failed one: the worker's error was notified)
            self.notify(message.problem, title="env diff", severity="error", timeout=12,
                        markup=False)

    def _show(self, rows: list[DiffRow], hidden_volatile: int = 0, notes: list[str] | None = None,
              mode: str = "") -> None:
        self._rows = rows
        self.hidden_volatile = hidden_volatile
        self.report_notes = notes or []
        self.report_mode = mode
        self._refill()
        self.query_one("#diff-table", DataTable).focus()

    def _refill(self) -> None:
        table = self.query_one("#diff-table", DataTable)
        table.clear()
        self._shown = []
        needle = self.search_text.lower()
        visible = [
            r for r in self._rows
            if r.rank in self.shown_ranks
            and (not needle or needle in r.path.lower() or needle in r.a.lower() or needle in r.b.lower())
        ]
        for section, items in group_rows(visible):
            table.add_row("", Text(f"{section} ({len(items)})", style="bold underline"), "", "", "")
            self._shown.append(None)
            for row in items:
                table.add_row(Text(row.rank, style=RANK_STYLE.get(row.rank, "")), Text("  " + row.path),
                              Text(row.change), Text(row.a), Text(row.b))
                self._shown.append(row)
        counts = {rank: sum(1 for r in self._rows if r.rank == rank) for rank in RANKS}
        summary = (
            f"{len(self._rows)} differences: {counts['numerics']} numerics-relevant, "
            f"{counts['scheduling']} scheduling-relevant, {counts['informational']} informational; "
            f"showing {len(visible)}"
        )
        if not self._rows:
            summary = "no differences"
        if self.hidden_volatile:
            summary += f" ({self.hidden_volatile} volatile hidden: v shows them)"
        if self.report_mode and self.report_mode != "aorta-tui":
            summary += f" [{self.report_mode} snapshots]"
        for note in self.report_notes:
            summary += f"\n[dim]{note}[/dim]"
        self.query_one("#diff-summary", Static).update(summary)
        self._show_filters()

    def _show_filters(self) -> None:
        marks = " ".join(
            f"[{'b' if r in self.shown_ranks else 'dim strike'}]{r[0]}:{r}[/]" for r in RANKS
        )
        vol = "volatile shown" if self.include_volatile else "volatile hidden"
        self.query_one("#diff-filters", Static).update(f"{marks}  v:{vol}")

    def action_toggle_rank(self, rank: str) -> None:
        self.shown_ranks ^= {rank}
        self._refill()

    def action_toggle_volatile(self) -> None:
        self.include_volatile = not self.include_volatile
        self._show_filters()
        if self.query_one("#snap-a", Input).value and self.query_one("#snap-b", Input).value:
            self.action_diff()

    def action_search(self) -> None:
        self.query_one("#diff-search", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "diff-search":
            self.search_text = event.value
            self._refill()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id in ("snap-a", "snap-b"):
            self.action_diff()
        elif event.input.id == "diff-search":
            self.query_one("#diff-table", DataTable).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "diff-button":
            self.action_diff()

    def selected_row(self) -> DiffRow | None:
        table = self.query_one("#diff-table", DataTable)
        if not self._shown or table.cursor_row >= len(self._shown):
            return None
        return self._shown[table.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = self.selected_row()
        detail = self.query_one("#diff-detail", Static)
        if row is None:
            detail.update("")
        else:
            detail.update(Text.assemble((row.path, "bold"), f" ({row.rank}, {row.change})\n{row.provenance}"))

    def action_provenance(self) -> None:
        row = self.selected_row()
        if row is None:
            self.notify("select a field first", severity="warning")
            return
        self.notify(f"{row.path}\nA: {row.a}\nB: {row.b}\n{row.provenance}", title="provenance", timeout=15,
                    markup=False)

    def action_pick(self) -> None:
        cwd, output_dir = self.aorta.cwd, self.aorta.output_dir

        def chosen(paths: list[Path] | None) -> None:
            if paths and len(paths) >= 2:
                self.set_paths(paths[0], paths[1])
            elif paths:
                self.query_one("#snap-a", Input).value = self.display_path(paths[0])
                self.notify("pick a second snapshot for B", severity="warning")

        self.app.push_screen(
            PathPicker("Pick snapshot A, then B (type a path or move onto one; enter picks, esc cancels)",
                       lambda: find_snapshots(cwd, output_dir),  # in the picker's worker: globs every run's env/
                       pick=2, base=cwd, distinct=True, validate=snapshot_problem, labels=self.display_path),
            chosen,
        )


def _resolve_snapshot(path: Path) -> Path:
    """A run directory stands for its host snapshot."""
    if path.is_dir():
        for candidate in (path / "env" / "host_env.json", path / "host_env.json", path / "env.json"):
            if candidate.is_file():
                return candidate
    return path


def snapshot_problem(path: Path) -> str | None:
    """Why ``path`` cannot be diffed (the snapshot loader's own located message), or None.

    Called only for the file the user picks: the list holds every JSON file nearby (a
    snapshot is named by whoever wrote it, ``-o h200.json``) and opens none of them.
    """
    from aorta_tui.core.errors import AortaError
    from aorta_tui.envsnap import load_snapshot

    target = _resolve_snapshot(path)
    if not target.exists():
        return f"{path}: no such file"
    try:
        load_snapshot(target)
    except AortaError as exc:
        return exc.render()
    return None


# Directories under the working directory that hold no snapshots (or far too many files).
_SKIP_DIRS = {"node_modules", "__pycache__", "site-packages"}


def find_snapshots(cwd: Path, output_dir: Path, limit: int = 200) -> list[Path]:
    """JSON files nearby, which may be snapshots: every ``*.json`` here and one directory
    down (not hidden ones), and the env/ snapshots inside runs. None is parsed here; the
    tool's own other files (queue results, policy reports: their first bytes say so) are left
    out."""
    found: list[Path] = sorted(cwd.glob("*.json"))
    try:
        subdirs = sorted(d for d in cwd.iterdir() if d.is_dir() and not d.name.startswith(".")
                         and d.name not in _SKIP_DIRS)
    except OSError:
        subdirs = []
    output = output_dir if output_dir.is_absolute() else cwd / output_dir
    for directory in subdirs:
        if len(found) >= limit:
            break
        if same_file(directory, output):
            continue  # runs are listed below, newest first
        found.extend(sorted(directory.glob("*.json"))[:limit])
    output_dir = output
    if output_dir.is_dir():
        found.extend(sorted(output_dir.glob("*/*/env/*.json"), reverse=True))
        found.extend(sorted(output_dir.glob("*/*/host_env.json"), reverse=True))
    from aorta_tui.envsnap.schema import other_kind_of_file

    seen: set[Path] = set()
    unique = []
    for path in found:
        if path in seen:
            continue
        seen.add(path)
        if other_kind_of_file(path) is None:  # a queue result or policy report is no snapshot
            unique.append(path)
    return unique[:limit]
