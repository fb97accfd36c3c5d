"""A modal that picks one or more paths from a list, or a typed path."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option


class PathPicker(ModalScreen[list[Path] | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, candidates: list[Path], *, pick: int = 1) -> None:
        super().__init__()
        self._title = title
        self._candidates = candidates
        self._pick = pick
        self._chosen: list[Path] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(self._title, id="picker-title")
            yield Input(placeholder="or type a path and press enter", id="picker-path")
            options = [Option(str(p), id=str(i)) for i, p in enumerate(self._candidates)]
            if not options:
                options = [Option("(nothing found nearby: type a path above)", disabled=True)]
            yield OptionList(*options, id="picker-list")

    def on_mount(self) -> None:
        if self._candidates:
            self.query_one("#picker-list", OptionList).focus()
        else:
            self.query_one("#picker-path", Input).focus()

    def _add(self, path: Path) -> None:
        self._chosen.append(path)
        self.query_one("#picker-title", Static).update(
            f"{self._title}\nchosen: " + ", ".join(str(p) for p in self._chosen)
        )
        if len(self._chosen) >= self._pick:
            self.dismiss(self._chosen)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self._add(self._candidates[int(event.option.id)])

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self._add(Path(event.value.strip()).expanduser())
            event.input.value = ""

    def action_cancel(self) -> None:
        self.dismiss(self._chosen or None)
