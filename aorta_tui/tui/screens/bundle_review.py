"""Bundle review: what ``aorta-tui bundle RUN_DIR --review`` would redact, from the matrix (``b``).

The engine's ``review_bundle`` reads every file of the run and runs the same rules the archive
would (the secrets themselves are never shown, only their masked form); ``w`` then writes the
archive with the CLI's default name in the TUI's working directory. Both run in a thread
worker that posts typed messages, so a large run never freezes the screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from aorta_tui.core.errors import AortaError
from aorta_tui.tui.screens.dialogs import escape

if TYPE_CHECKING:
    from aorta_tui.bundle.archive import BundleRequest


@dataclass(frozen=True)
class ReviewRow:
    """One redaction as the engine reports it: rule, where, and the masked before -> after."""

    rule: str
    where: str
    before: str
    after: str

    @classmethod
    def from_engine(cls, row: dict[str, Any]) -> ReviewRow:
        where = f"{row['file']}:{row['line']}" if row.get("line") else str(row["file"])
        if row.get("where"):
            where += f" ({row['where']})"
        return cls(str(row["rule"]), where, str(row["before"]), str(row["after"]))


class BundleReviewScreen(ModalScreen[None]):
    """The review of one run's bundle; ``w`` writes it, ``escape``/``q`` closes."""

    DEFAULT_CSS = """
    BundleReviewScreen { align: center middle; }
    #bundle-box { width: 95%; height: 90%; border: thick $accent; background: $surface; padding: 0 1; }
    #bundle-table { height: 1fr; }
    #bundle-notes { height: auto; max-height: 6; }
    """
    BINDINGS = [
        Binding("w", "write", "Write the archive"),
        Binding("escape,q,b", "close", "Close"),
    ]

    class Reviewed(Message):
        """The engine's review is ready (or failed with ``error``); ``replaces``: an archive
        of that name is there already."""

        def __init__(self, rows: list[ReviewRow], notes: list[str], error: str | None = None,
                     scanned: int = 0, replaces: bool = False) -> None:
            super().__init__()
            self.rows, self.notes, self.error, self.scanned = rows, notes, error, scanned
            self.replaces = replaces

    class Written(Message):
        """The archive is on disk (``summary``), or writing it failed (``error``)."""

        def __init__(self, summary: str | None, error: str | None = None) -> None:
            super().__init__()
            self.summary, self.error = summary, error

    def __init__(self, run_dir: Path, cwd: Path, shown_run: str) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.output = cwd / f"{run_dir.name}.bundle.tar.gz"  # the CLI's default, in the TUI's cwd
        self._shown_run = shown_run
        self.reviewed: BundleReviewScreen.Reviewed | None = None
        self.written: BundleReviewScreen.Written | None = None
        self._writing = False

    def compose(self) -> ComposeResult:
        with Vertical(id="bundle-box"):
            yield Static(Text.assemble(("Bundle review ", "bold"), self._shown_run), id="bundle-title")
            yield Static("reading every file of the run…", id="bundle-summary")
            yield DataTable(id="bundle-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="bundle-notes")
            yield Static(self._keys_text(replaces=False), id="bundle-keys")

    def _keys_text(self, *, replaces: bool) -> str:
        there = " (replaces the one there)" if replaces else ""
        return f"[b]w[/b] write {escape(self.output.name)}{there}    [b]esc[/b] close"

    def on_mount(self) -> None:
        self.query_one("#bundle-table", DataTable).add_columns("rule", "file:line", "before", "after")
        self._review()

    def _request(self) -> BundleRequest:
        from aorta_tui.bundle import archive

        found = archive.find_inputs([self.run_dir])
        return archive.BundleRequest(found, hostnames=False, max_log_bytes=None,
                                     name=archive.archive_name(self.output))

    @work(thread=True, exclusive=True, group="bundle-review", exit_on_error=False)
    def _review(self) -> None:
        from aorta_tui.bundle import archive

        try:
            # here, not in compose: a stat of the TUI's cwd, which may stall like any file
            replaces = self.output.exists()
            review = archive.review_bundle(self._request())
        except (AortaError, OSError) as exc:
            self.post_message(self.Reviewed([], [], error=_said(exc)))
            return
        self.post_message(self.Reviewed([ReviewRow.from_engine(r) for r in review.rows],
                                        [f"{n['file']}: {n['note']}" for n in review.notes],
                                        scanned=review.scanned, replaces=replaces))

    @on(Reviewed)
    def _show_review(self, message: Reviewed) -> None:
        self.reviewed = message
        self.query_one("#bundle-keys", Static).update(self._keys_text(replaces=message.replaces))
        summary = self.query_one("#bundle-summary", Static)
        if message.error is not None:
            summary.update(Text(f"cannot review this run: {message.error}", style="bold red"))
            return
        files = len({r.where.split(":", 1)[0].split(" (", 1)[0] for r in message.rows})
        summary.update(f"{len(message.rows)} redactions in {files} of {message.scanned} files would be made; "
                       "nothing is written until you press w")
        table = self.query_one("#bundle-table", DataTable)
        for r in message.rows:
            table.add_row(r.rule, Text(r.where), Text(r.before), Text(r.after))
        self.query_one("#bundle-notes", Static).update(Text("\n".join(message.notes)))

    def action_write(self) -> None:
        if self._writing:
            self.notify("the archive is being written", severity="information")
            return
        if self.reviewed is None or self.reviewed.error is not None:
            self.notify("nothing to write: the review has not succeeded", severity="warning")
            return
        self._writing = True
        self.query_one("#bundle-summary", Static).update(f"writing {self.output}…")
        self._write()

    @work(thread=True, exclusive=True, group="bundle-write", exit_on_error=False)
    def _write(self) -> None:
        from aorta_tui.bundle import archive

        try:
            manifest = archive.build_bundle(self._request(), self.output)
        except (AortaError, OSError) as exc:
            self.post_message(self.Written(None, error=_said(exc)))
            return
        t = manifest.totals
        self.post_message(self.Written(
            f"wrote {self.output}: {t.files} files ({t.redacted_files} redacted, "
            f"{t.binary_files} binary, {t.skipped} skipped); MANIFEST.json lists each"))

    @on(Written)
    def _show_written(self, message: Written) -> None:
        self.written = message
        self._writing = False
        summary = self.query_one("#bundle-summary", Static)
        if message.error is not None:
            summary.update(Text(f"not written: {message.error}", style="bold red"))
            self.notify(f"bundle not written: {message.error}", severity="error")
        else:
            summary.update(Text(message.summary or ""))
            self.query_one("#bundle-keys", Static).update(self._keys_text(replaces=True))  # w again replaces it
            self.notify(message.summary or "", title="bundle")

    def action_close(self) -> None:
        self.dismiss(None)


def _said(exc: BaseException) -> str:
    """The engine's located message with its fix, as the CLI would print it."""
    return exc.render() if isinstance(exc, AortaError) else str(exc)
