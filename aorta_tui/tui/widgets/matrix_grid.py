"""The cells x trials grid: one row per cell, one column per trial, then the cell's figures."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from aorta_tui.core import stats as core_stats
from aorta_tui.tui.matrix_state import PENDING, RUNNING, MatrixState, stat_value

# Symbol and style per verdict: symbols keep the grid readable under NO_COLOR.
VERDICT_CELL = {
    "pass": ("✓", "bold green"),
    "fail": ("✗", "bold red"),
    "error": ("!", "bold yellow"),
    RUNNING: ("▶", "bold reverse cyan"),
    PENDING: ("·", "dim"),
}
# Slurm job states as squeue's compact codes; COMPLETED (the usual end) shows none
JOB_STATE_CODE = {
    "PENDING": "PD", "RUNNING": "", "COMPLETING": "CG", "COMPLETED": "", "CANCELLED": "CA",
    "FAILED": "F", "TIMEOUT": "TO", "NODE_FAIL": "NF", "PREEMPTED": "PR", "BOOT_FAIL": "BF",
    "DEADLINE": "DL", "OUT_OF_MEMORY": "OOM", "SUSPENDED": "S", "LOST": "LOST",
}
NODE_WIDTH = 10  # a node name longer than this is cut (node07.cluster.example -> node07.cl…)
STAT_COLUMNS = ("fail", "step", "iqr", "n", "noise", "confound")
STAT_HEADERS = ("fail", "step p50", "IQR", "n", "noise", "confound")


def fmt_seconds(value: object) -> str:
    if not isinstance(value, (int, float)):
        return "n/a"
    if value < 1e-3:
        return f"{value * 1e6:.0f}µs"
    if value < 1:
        return f"{value * 1e3:.1f}ms"
    return f"{value:.2f}s"


def placement_text(node: str | None, state: str | None) -> str:
    """``vm``, ``vm TO``, ``PD``: where a Slurm trial runs and its job's state (short)."""
    code = JOB_STATE_CODE.get(state or "", (state or "")[:4])
    name = node or ""
    if len(name) > NODE_WIDTH:
        name = name[:NODE_WIDTH - 1] + "…"
    return " ".join(p for p in (name, code) if p)


def cell_figures(state: MatrixState, cell: str) -> tuple[str, ...]:
    """(failure, step p50, step IQR, step count, noise, confound) for a cell.

    The engine's aggregate once the run has ended (a run resumed after an interrupted one has
    the old session's aggregate in its journal: it is stale until this session ends), else
    live figures from the journal, marked with ~, that mean the same where they can: failed
    trials over finished ones (errors are not failures), and the median of the mean step
    times of trials that did not error (their count as n, in trials). A step time measured as
    the whole trial's wall time says so ("trial")."""
    stats = state.cell_stats.get(cell) if state.status is not None else None
    if stats:
        rate = stat_value(stats, "failure_rate")
        fail = f"{rate:.0%}" if isinstance(rate, (int, float)) else "n/a"
        step = fmt_seconds(stat_value(stats, "step_time_s.p50"))
        if stat_value(stats, "step_time_source") == "trial_wall" and step != "n/a":
            step += " trial"
        iqr = fmt_seconds(stat_value(stats, "step_time_s.iqr"))
        count = stat_value(stats, "step_count")
        noise = stat_value(stats, "noise.flag") or "—"
        return fail, step, iqr, str(count) if isinstance(count, int) else "n/a", str(noise), \
            confound_text(stats)
    finished, failed, _errored = state.cell_counts(cell)
    fail = f"~{failed}/{finished}" if finished else "—"
    steps = sorted(v.mean_step_s for (c, _t), v in state.trials.items()
                   if c == cell and v.mean_step_s is not None and v.state != "error")
    step = f"~{fmt_seconds(core_stats.percentile(steps, 50, presorted=True))}" if steps else "—"
    return fail, step, "—", f"~{len(steps)}t" if steps else "—", "—", "—"


# matrix.md's "within noise", short enough for the column to fit 80 columns.
IN_NOISE = "in noise"


def confound_text(stats: dict[str, Any]) -> str:
    """The confound column as matrix.md has it: the flag; "in noise ±N" for a cell outside the
    threshold whose difference is inside the noise N (t x SE; a "—" there would read as inside
    the threshold, as the legend says); "no spread" for one outside it with too few trials to
    measure the noise; "—" otherwise."""
    flag = stat_value(stats, "confound.flag")
    if flag:
        return str(flag)
    if stat_value(stats, "confound.spread_unknown") is True:
        return "no spread"
    if stat_value(stats, "confound.significant") is not False:
        return "—"
    # the why, in the row: a p50 of 125 µs against 48 ms reads as wrong until the noise shows
    noise = stat_value(stats, "confound.noise_s")
    return f"{IN_NOISE} ±{fmt_seconds(noise)}" if isinstance(noise, (int, float)) else IN_NOISE


def confound_legend(state: MatrixState) -> str:
    """What the confound column compares, with its threshold (from the engine's aggregate)."""
    for stats in state.cell_stats.values():
        threshold = stat_value(stats, "confound.threshold")
        if isinstance(threshold, (int, float)) and threshold > 0:
            upper = threshold if threshold >= 1 else 1 / threshold
            return (f"confound: mean step vs the baseline beyond x{upper:g} either way and the noise; "
                    f"noise: bimodal / dispersed (IQR > {core_stats.DISPERSED_REL_IQR:g} x p50) / few samples")
    return ""


class MatrixGrid(DataTable):
    """A DataTable kept in step with a ``MatrixState``, updating only cells that changed."""

    DEFAULT_CSS = "MatrixGrid { height: 1fr; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="cell", zebra_stripes=False, **kwargs)
        self._shape: tuple[tuple[str, ...], tuple[int, ...]] = ((), ())
        self._rendered: dict[tuple[str, str], str] = {}

    def sync(self, state: MatrixState) -> None:
        trials = tuple(state.trial_numbers)
        cells = tuple(state.cells)
        if (cells, trials) != self._shape:
            self._rebuild(cells, trials)
        # a Slurm run's nodes and job states (read by the matrix screen's worker, never here:
        # this runs on the event loop); empty for a local run
        for cell in cells:
            for number in trials:
                view = state.trials.get((cell, number))
                key = view.state if view else ""
                where = state.placement.get(view.trial_id) if view else None
                text = placement_text(*where) if where else ""
                self._set(cell, f"t{number}", f"{key}|{text}", self._verdict_text(key, text))
            for column, value in zip(STAT_COLUMNS, cell_figures(state, cell), strict=False):
                style = "bold red" if column == "confound" and value not in ("—", IN_NOISE) else (
                    "bold yellow" if column == "noise" and value != "—" else "")
                self._set(cell, column, value, Text(value, style=style))

    def _verdict_text(self, key: str, where: str = "") -> Text:
        if not key:
            return Text(" ")
        symbol, style = VERDICT_CELL.get(key, ("?", ""))
        if not where:  # a local run's look, unchanged
            return Text(f" {symbol} ", style=style)
        return Text.assemble((f" {symbol} ", style), (f"{where} ", "dim" if key == PENDING else ""))

    def _set(self, row: str, column: str, key: str, value: Text) -> None:
        if self._rendered.get((row, column)) == key:
            return
        self._rendered[(row, column)] = key
        # the column grows to what it holds: a figure that arrives after the first render, a
        # Slurm trial's node once its job starts (the widths were otherwise fixed at add_row)
        self.update_cell(row, column, value, update_width=True)

    def _rebuild(self, cells: tuple[str, ...], trials: tuple[int, ...]) -> None:
        cursor = self.cursor_coordinate
        self.clear(columns=True)
        self._rendered.clear()
        self.add_column("cell", key="cell")
        for number in trials:
            self.add_column(str(number), key=f"t{number}")
        for key, header in zip(STAT_COLUMNS, STAT_HEADERS, strict=True):
            self.add_column(header, key=key)
        for cell in cells:
            blanks = [Text("")] * (len(trials) + len(STAT_COLUMNS))
            self.add_row(Text(cell, style="bold"), *blanks, key=cell)
        self._shape = (cells, trials)
        if cells and trials:
            self.cursor_coordinate = self.validate_cursor_coordinate(cursor)

    def selected(self) -> tuple[str, int] | None:
        """(cell, trial number) under the cursor, or None on the name or figure columns."""
        cells, trials = self._shape
        row, column = self.cursor_coordinate
        if not cells or row >= len(cells) or column < 1 or column > len(trials):
            return None
        return cells[row], trials[column - 1]
