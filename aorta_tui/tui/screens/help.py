"""``?``: every key of the current screen and of the app, in one modal."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static


def _key_rows(bindings: list, heading: str) -> list[str]:
    rows = [f"[b]{heading}[/b]"]
    for binding in bindings:
        if isinstance(binding, tuple):
            binding = Binding(*binding)
        if not binding.description:
            continue
        rows.append(f"  [b]{binding.key_display or binding.key:<14}[/b] {binding.description}")
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close help")]

    def __init__(self, screen: Screen, app_bindings: list) -> None:
        super().__init__()
        self._for_screen = screen
        self._app_bindings = app_bindings

    def compose(self) -> ComposeResult:
        lines = _key_rows(list(self._for_screen.BINDINGS), f"This screen ({self._for_screen.title or ''})")
        note = getattr(self._for_screen, "HELP_NOTE", "")
        if note:
            lines.extend(["", note])
        lines.append("")
        lines.extend(_key_rows(self._app_bindings, "Everywhere"))
        lines.append("")
        lines.append("ctrl+p opens the command palette: every action of every screen is there.")
        lines.append("Mouse works too: click rows, buttons and tabs.")
        with VerticalScroll(id="help-box"):
            yield Static("\n".join(lines), id="help-text")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
