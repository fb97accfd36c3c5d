"""Small modals: a yes/no question before something that cannot be undone, and a list of the
warnings a run or a comparison reported (the header only counts them)."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmScreen(ModalScreen[bool]):
    """``y`` answers yes; ``n``, ``escape`` or ``q`` no (the safe answer is every other key's)."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    #confirm-box { width: 80%; max-width: 80; height: auto; border: thick $warning;
                   background: $surface; padding: 0 1; }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape,q", "answer(False)", "No"),
    ]

    def __init__(self, question: str, detail: str | Callable[[], str] = "") -> None:
        """``detail``: text, or a function read again twice a second while the question is
        open (a count of trials left must not go stale while the run goes on)."""
        super().__init__()
        self._question = question
        self._detail_of = detail if callable(detail) else None
        self._detail = detail() if callable(detail) else detail

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(f"[b]{self._question}[/b]", id="confirm-question")
            if self._detail or self._detail_of is not None:
                yield Static(self._detail, id="confirm-detail")
            yield Static("[b]y[/b] yes    [b]n[/b] / [b]esc[/b] no", id="confirm-keys")

    def on_mount(self) -> None:
        if self._detail_of is not None:
            self.set_interval(0.5, self._refresh_detail)

    def _refresh_detail(self) -> None:
        assert self._detail_of is not None
        detail = self._detail_of()
        if detail != self._detail:
            self._detail = detail
            self.query_one("#confirm-detail", Static).update(detail)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class WarningsScreen(ModalScreen[None]):
    """Every warning in full, numbered, scrollable; ``w``, ``escape`` or ``q`` closes it."""

    DEFAULT_CSS = """
    WarningsScreen { align: center middle; }
    #warnings-box { width: 90%; height: 80%; border: thick $warning; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,w", "close", "Close warnings")]

    def __init__(self, title: str, warnings: list[str]) -> None:
        super().__init__()
        self._title = title
        self._warnings = list(warnings)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="warnings-box"):
            yield Static(f"[b]{self._title}[/b]  (w / esc closes)", id="warnings-title")
            if not self._warnings:
                yield Static("no warnings", id="warnings-none")
            for i, text in enumerate(self._warnings, 1):
                yield Static(f"[yellow]{i}.[/] {escape(text)}", classes="warning-item")

    def action_close(self) -> None:
        self.dismiss(None)


def escape(text: str) -> str:
    """``text`` shown as written: a ``[`` in a path or message is not markup."""
    return text.replace("[", r"\[")
