"""Headless sinks of the event stream: rich progress on a TTY, plain lines, or JSON lines."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from aorta_tui.core.events import (
    Event,
    EventSink,
    JsonSink,
    RunFinished,
    RunStarted,
    RunWarning,
    TrialFinished,
    TrialStarted,
)

if TYPE_CHECKING:
    from rich.progress import TaskID


class PlainSink:
    """A line per trial and a summary: for logs, CI and pipes."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._out = stream or sys.stdout
        self._total = 0
        self._done = 0
        self._ran = 0  # finished in this session: the pace for the ETA (a resume starts at done > 0)
        self._t0 = time.monotonic()

    def _p(self, text: str) -> None:
        self._out.write(text + "\n")
        self._out.flush()

    def emit(self, event: Event) -> None:
        e = event
        if isinstance(e, RunStarted):
            self._total, self._done, self._ran = e.total, e.already_done, 0
            self._t0 = time.monotonic()
            verb = "resuming" if e.resumed else "starting"
            self._p(f"{verb} run {e.run_dir}: {e.total} trials over {len(e.cells)} cells"
                    + (f" ({e.already_done} already done)" if e.already_done else ""))
        elif isinstance(e, TrialFinished):
            self._done += 1
            self._ran += 1
            why = f" ({', '.join(e.detectors)})" if e.detectors else ""
            took = f" in {e.wall_s:.2f}s" if e.wall_s is not None else ""
            self._p(f"[{self._done}/{self._total}] {e.trial_id}: {e.verdict}{why}{took}"
                    f"{trial_notes(e.trial_dir, e.result.to_dict() if e.result else None)}"
                    f"{eta_text(self._t0, self._ran, self._total - self._done)}")
        elif isinstance(e, RunWarning):
            self._p(f"warning: {e.message}")
        elif isinstance(e, RunFinished):
            self._p(summary_text(e))

    def close(self) -> None:
        return None


def trial_notes(trial_dir: str, data: dict[str, Any] | None = None) -> str:
    """What a finished trial's line adds from its ``result.json`` (``data``: the result the
    event carries; else the file, read once): its largest timeline phases
    `` (torch_imported 1.18 s, exited 650 ms, ...)`` and, for a Slurm job,
    `` [job 12_3 on node07, GPU 0, COMPLETED, queued 0.7 s]``; empty when it has neither."""
    from aorta_tui.executor.placement import placement_text
    from aorta_tui.trial.timeline import summary

    found: object = data
    if found is None:
        if not trial_dir:
            return ""
        from aorta_tui.core.inputs import read_json_or_none

        found = read_json_or_none(Path(trial_dir) / "result.json")
    if not isinstance(found, dict):
        return ""
    data = found
    text = summary(data.get("timeline"), top=3)
    return (f" ({text.split(': ', 1)[-1]})" if text else "") + placement_text(data)


def eta_text(t0: float, ran: int, remaining: int) -> str:
    """Remaining trials at this session's pace so far (trials done before a resume don't count)."""
    if not ran or remaining <= 0:
        return ""
    return f", ETA {(time.monotonic() - t0) / ran * remaining:.0f}s"


def summary_text(e: RunFinished) -> str:
    s = e.summary or {}
    lines = [f"run {e.status}: exit code {e.exit_code}"]
    if s.get("every_trial_errored"):
        lines[0] += " (every trial errored: nothing was judged; see the failing trials' reasons)"
    for cell, c in (s.get("cells") or {}).items():
        lines.append(f"  {cell_mark(c)} {cell}: {cell_counts(c)}")
    failing = s.get("failing_trials") or []
    if failing:
        lines.append("failing trials:")
        lines += [f"  {p}" for p in failing[:20]]
        if len(failing) > 20:
            lines.append(f"  ... and {len(failing) - 20} more (see matrix.md)")
        if s.get("hint"):
            lines.append(f"hint: {s['hint']}")
    if s.get("matrix"):
        from aorta_tui.executor.placement import node_summary

        lines += node_summary(Path(s["matrix"]).parent)  # Slurm runs: failures per node
        lines.append(f"matrix: {s['matrix']}")
        lines += next_steps(Path(s["matrix"]).parent)
    return "\n".join(lines)


def next_steps(run_dir: Path) -> list[str]:
    """What a newcomer does with a finished run (the quickstart's last lines).

    Each comment sits on its own line above its command: beside a run path (40-odd columns)
    it wrapped at 80 columns and a wrapped command no longer pastes as one line."""
    import shlex

    run = shlex.quote(str(run_dir))
    return ["next:",
            "  # the matrix in the TUI",
            f"  aorta-tui attach {run}",
            "  # trials and cells as CSV tables (no extra needed)",
            f"  aorta-tui export {run} --format csv",
            "  # what a ticket archive would redact; then -o ticket.tar.gz",
            f"  aorta-tui bundle {run} --review"]


def cell_mark(c: dict[str, Any]) -> str:
    """``ok `` / ``BAD`` / ``-- `` (no trial of the cell finished: nothing to call ok)."""
    if c["failed"] or c["errored"] or c.get("cross_trial_failures"):
        return "BAD"
    return "ok " if c["passed"] else "-- "


def cell_counts(c: dict[str, Any]) -> str:
    if not (c["passed"] or c["failed"] or c["errored"]):
        return "not run (no trial of this cell finished)"
    extra = f"  {c['confound']}" if c.get("confound") else ""
    cross = f", {c['cross_trial_failures']} cross-trial failure(s)" if c.get("cross_trial_failures") else ""
    return f"{c['passed']} pass, {c['failed']} fail, {c['errored']} error{cross}{extra}"


class RichSink:
    """A progress bar with ETA and a final table, for a terminal."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.console = Console(stderr=False)
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"), TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
            transient=False,
        )
        self.task: TaskID | None = None
        self.counts = {"pass": 0, "fail": 0, "error": 0}

    def emit(self, event: Event) -> None:
        e = event
        if isinstance(e, RunStarted):
            self.progress.start()
            self.console.print(f"run dir: [cyan]{e.run_dir}[/]")
            self.task = self.progress.add_task("sweep", total=e.total, completed=e.already_done, status="")
        elif isinstance(e, TrialStarted) and self.task is not None:
            self.progress.update(self.task, description=e.trial_id)
        elif isinstance(e, TrialFinished) and self.task is not None:
            self.counts[e.verdict] = self.counts.get(e.verdict, 0) + 1
            colour = {"pass": "green", "fail": "red", "error": "yellow"}.get(e.verdict, "white")
            if e.verdict != "pass":
                self.progress.console.print(
                    f"[{colour}]{e.verdict}[/] {e.trial_id} ({', '.join(e.detectors) or e.reason})")
            c = self.counts
            self.progress.update(self.task, advance=1,
                                 status=f"[green]{c['pass']}✓[/] [red]{c['fail']}✗[/] [yellow]{c['error']}![/]")
        elif isinstance(e, RunWarning):
            self.progress.console.print(f"[yellow]warning:[/] {e.message}")
        elif isinstance(e, RunFinished):
            self.progress.stop()
            self._table(e)

    def _table(self, e: RunFinished) -> None:
        from rich.table import Table

        s = e.summary or {}
        t = Table(title=f"run {e.status} (exit {e.exit_code})")
        for col in ("cell", "pass", "fail", "error", "confound"):
            t.add_column(col)
        for cell, c in (s.get("cells") or {}).items():
            style = "red" if c["failed"] or c.get("cross_trial_failures") else ("yellow" if c["errored"] else "green")
            if not (c["passed"] or c["failed"] or c["errored"]):
                t.add_row(f"[dim]{cell}[/]", "-", "-", "-", "not run")
                continue
            t.add_row(f"[{style}]{cell}[/]", str(c["passed"]), str(c["failed"]), str(c["errored"]),
                      c.get("confound") or "-")
        self.console.print(t)
        rest = summary_text(e).split("\n")
        tail = [ln for ln in rest[1:] if not ln.startswith(("  ok ", "  BAD ", "  -- "))]
        if tail:
            self.console.print("\n".join(tail), highlight=False, markup=False)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.progress.stop()


def pick_sink(json_mode: bool) -> EventSink:
    if json_mode:
        return JsonSink()
    if sys.stdout.isatty():
        return RichSink()
    return PlainSink()
