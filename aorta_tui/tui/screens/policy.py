"""Policy comparison: run one workload under several policies; the engine's statistics."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from aorta_tui.tui import engines
from aorta_tui.tui.screens.base import AortaScreen


class PolicyScreen(AortaScreen):
    TITLE_TEXT = "Policy comparison"
    MAIN_WIDGET = "#policy-table"
    BINDINGS = [
        Binding("escape", "focus_main", "Leave field", show=False),
        Binding("o", "open_report", "Open report"),
    ]

    def compose_body(self) -> ComposeResult:
        with Vertical(id="policy"):
            yield Static(engines.available(engines.policy) or "", id="policy-status")
            yield DataTable(id="policy-table", cursor_type="row")

    def action_open_report(self) -> None:
        self.notify("policy engine not available yet", severity="warning")
