"""The aorta-tui Textual app: six screens over one engine event stream and run directories."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from aorta_tui.tui.machine import MachineFacts
from aorta_tui.tui.screens.base import AortaScreen
from aorta_tui.tui.screens.help import HelpScreen
from aorta_tui.tui.screens.home import HomeScreen
from aorta_tui.tui.settings import TuiSettings

if TYPE_CHECKING:  # imported when first shown (the first frame does not wait for them)
    from aorta_tui.tui.screens.matrix import MatrixScreen
    from aorta_tui.tui.screens.recipe_editor import RecipeEditorScreen

SCREEN_NAMES = ("home", "recipe", "matrix", "trace", "envdiff", "policy")
DARK, LIGHT = "textual-dark", "textual-light"


def _screen(module: str, name: str) -> Screen:
    import importlib

    return getattr(importlib.import_module(f"aorta_tui.tui.screens.{module}"), name)()


class AortaApp(App[None]):
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))  # absolute: subclasses live elsewhere
    TITLE = "aorta-tui"
    # Screens other than home are imported when first shown: the first frame does not wait.
    SCREENS = {
        "home": HomeScreen,
        "recipe": lambda: _screen("recipe_editor", "RecipeEditorScreen"),
        "matrix": lambda: _screen("matrix", "MatrixScreen"),
        "trace": lambda: _screen("trace_monitor", "TraceMonitorScreen"),
        "envdiff": lambda: _screen("env_diff", "EnvDiffScreen"),
        "policy": lambda: _screen("policy", "PolicyScreen"),
    }
    BINDINGS = [
        Binding("1", "goto('home')", "Home", show=False),
        Binding("2", "goto('recipe')", "Recipe editor", show=False),
        Binding("3", "goto('matrix')", "Matrix", show=False),
        Binding("4", "goto('trace')", "Trace monitor", show=False),
        Binding("5", "goto('envdiff')", "Env diff", show=False),
        Binding("6", "goto('policy')", "Policy", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("ctrl+t", "toggle_theme", "Dark/light", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(
        self,
        *,
        output_dir: Path | None = None,
        cwd: Path | None = None,
        start_run: Path | None = None,
        start_screen: str = "home",
        start_recipe: Path | None = None,
        light: bool | None = None,
        machine_facts: MachineFacts | None = None,
        settings: TuiSettings | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings or TuiSettings.from_environment()
        self.output_dir = Path(output_dir) if output_dir else self.settings.output_dir
        self.cwd = Path(cwd) if cwd else Path.cwd()
        self.start_run = Path(start_run) if start_run else None
        self.start_screen = "matrix" if start_run else start_screen
        # `aorta-tui edit FILE`: the editor on FILE (created on save when it does not exist).
        self.start_recipe = Path(start_recipe) if start_recipe else None
        if self.start_recipe is not None:
            self.start_screen = "recipe"
        # Fixed facts make the home screen deterministic for snapshot tests.
        self.fixed_machine_facts = machine_facts
        self.opened_runs: list[Path] = []  # the matrix notes each run it shows
        if light is None:
            light = self.settings.light
        self.theme = LIGHT if light else DARK

    def on_mount(self) -> None:
        self.push_screen(self.start_screen)
        if self.start_run is not None:
            self.call_after_refresh(self._matrix().open_run, self.start_run)
        if self.start_recipe is not None:
            self.call_after_refresh(self._recipe_editor().open_file, self.start_recipe, create=True)

    # --- navigation ----------------------------------------------------------------------

    def action_goto(self, name: str) -> None:
        while len(self.screen_stack) > 1 and not isinstance(self.screen, AortaScreen):
            self.pop_screen()  # close a modal (help, pickers) first
        target = self.get_screen(name)
        if self.screen is target:
            return
        editor = self._editor()
        if editor is not None and self.screen is editor:  # leaving it: never with edits unasked
            editor.confirm_discard(lambda: self.switch_screen(name), f"goes to {name}")
        else:
            self.switch_screen(name)

    def _editor(self) -> RecipeEditorScreen | None:
        """The recipe editor if it was ever shown (it is built on first use), else None."""
        screen = self._installed_screens.get("recipe")
        # the "recipe" slot holds its factory until it is built, then the RecipeEditorScreen
        return cast("RecipeEditorScreen", screen) if isinstance(screen, AortaScreen) else None

    def _matrix(self) -> MatrixScreen:
        from aorta_tui.tui.screens.matrix import MatrixScreen

        return self.get_screen("matrix", MatrixScreen)

    def _recipe_editor(self) -> RecipeEditorScreen:
        from aorta_tui.tui.screens.recipe_editor import RecipeEditorScreen

        return self.get_screen("recipe", RecipeEditorScreen)

    def farewell(self) -> list[str]:
        """What to print once the TUI has left the screen: each run it showed that still runs
        (sweeps are detached: quitting stops none), and how to attach again."""
        import shlex

        from aorta_tui.store.lock import lock_holder

        lines = []
        for run in self.opened_runs:
            if lock_holder(run) is None:
                continue
            try:
                shown = str(run.relative_to(self.cwd.absolute()))
            except ValueError:
                shown = str(run)
            lines += [f"the sweep {shown} runs on (detached: quitting the TUI does not stop it)",
                      f"  attach again: aorta-tui attach {shlex.quote(shown)}"]
        return lines

    async def action_quit(self) -> None:
        """ctrl+q (and the palette's Quit): ask first when the recipe editor holds unsaved edits."""
        editor = self._editor()
        if editor is None or not editor.has_unsaved:
            self.exit()
            return
        while len(self.screen_stack) > 1 and not isinstance(self.screen, AortaScreen):
            self.pop_screen()
        editor.confirm_discard(self.exit, "quits")

    def open_run(self, run_dir: Path) -> None:
        matrix = self._matrix()
        self.action_goto("matrix")
        # After the switch has been processed, so the screen's widgets exist.
        self.call_after_refresh(matrix.open_run, Path(run_dir))

    def open_recipe(self, path: Path | None) -> None:
        editor = self._recipe_editor()
        self.action_goto("recipe")
        self.call_after_refresh(editor.request_open, path)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen, list(self.BINDINGS)))

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT if self.theme == DARK else DARK

    # --- command palette -----------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        titles = {
            "home": "Home: machine, runs, recipes",
            "recipe": "Recipe editor",
            "matrix": "Matrix progress of the open run",
            "trace": "Trace monitor (eBPF submit -> dispatch latency histogram)",
            "envdiff": "Env diff of two snapshots",
            "policy": "Policy comparison",
        }
        for name in SCREEN_NAMES:
            yield SystemCommand(f"Go to {titles[name]}", f"switch to the {name} screen",
                                lambda name=name: self.action_goto(name))
        yield SystemCommand("Toggle dark / light theme", "ctrl+t", self.action_toggle_theme)
        yield SystemCommand("Help: keys of this screen", "?", self.action_help)
        if isinstance(screen, AortaScreen):
            yield from screen.palette_commands()
