"""Recipe editor: YAML with the engine's validation as you type, a plan preview, save, launch."""

from __future__ import annotations

import shlex
import threading
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Static, TextArea

from aorta_tui.core.atomic import atomic_write_text
from aorta_tui.tui import engines
from aorta_tui.tui.screens.base import AortaScreen
from aorta_tui.tui.sudo import give_to_invoking_user

CHECK_DELAY_S = 0.3  # validate this long after the last keystroke

NEW_RECIPE = """\
schema_version: 1
ticket: MY-TICKET
workload: gpu_smoke
trials: 3
steps: 20
cells:
  - name: baseline-local
    mitigations: [none]
  - name: launch-blocking
    mitigations: [cuda_launch_blocking]
"""


def make_editor(text: str) -> TextArea:
    """A YAML code editor; highlighting only where tree-sitter's YAML grammar is installed."""
    try:
        return TextArea.code_editor(text, language="yaml", id="recipe-text", soft_wrap=False)
    except Exception:  # LanguageDoesNotExist: textual[syntax] not installed
        return TextArea.code_editor(text, language=None, id="recipe-text", soft_wrap=False)


def plan_preview(plan: Any) -> Text:
    """The plan as the engine built it: cells x trials, environments, mitigations' variables."""
    out = Text()
    out.append(f"{len(plan.trials)} trials", style="bold")
    out.append(f" over {len(plan.cells)} cells, order {plan.order}, seed {plan.seed}\n")
    if plan.baseline_cell:
        out.append(f"baseline: {plan.baseline_cell}\n")
    for cell in plan.cells:
        mits = ", ".join(cell.mitigations) or "none"
        out.append(cell.name, style="bold")
        out.append(f"  {cell.trials} trials  env {cell.environment}  mitigations {mits}\n")
        from aorta_tui.core.secrets import mask_env  # shown on screen: never a token

        for key, value in sorted(mask_env(cell.env).items()):
            out.append(f"    {key}={value}\n")
        if cell.switches:
            out.append(f"    switches: {', '.join(cell.switches)}\n")
    out.rstrip()
    return out


class RecipeEditorScreen(AortaScreen):
    TITLE_TEXT = "Recipe editor"
    MAIN_WIDGET = "#recipe-text"
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("ctrl+l", "launch", "Launch", priority=True),
        Binding("ctrl+r", "reload", "Reload", priority=True),
        Binding("escape", "leave_editor", "Leave editor", show=False, priority=True),
        Binding("ctrl+e", "focus_editor", "Edit", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.path: Path | None = None
        self.disk_text = ""
        self.issues: list[Any] = []
        self.plan_text = ""
        self._check_timer: Any = None
        self._watch_stop: threading.Event | None = None
        self.checks_done = 0

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="recipe"):
            with Vertical(id="recipe-left"):
                yield Static("new recipe (unsaved)", id="recipe-file")
                yield make_editor(NEW_RECIPE)
                yield Input(placeholder="probe recipes: the command after --, e.g. bash launch.sh",
                            id="probe-command", compact=True)
            with Vertical(id="recipe-right"):
                yield Static("", id="recipe-status")
                yield DataTable(id="recipe-issues", cursor_type="row")
                with VerticalScroll(id="plan-box"):
                    yield Static("", id="plan-preview")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#recipe-issues", DataTable).add_columns("line", "col", "where", "problem")
        self._schedule_check()

    def on_unmount(self) -> None:
        self._stop_watch()

    @property
    def editor(self) -> TextArea:
        return self.query_one("#recipe-text", TextArea)

    # --- files ---------------------------------------------------------------------------

    def open_file(self, path: Path | None) -> None:
        self._stop_watch()
        self.path = Path(path) if path else None
        if self.path is None:
            text = NEW_RECIPE
        else:
            try:
                text = self.path.read_text()
            except OSError as exc:
                self.notify(f"cannot read {self.path}: {exc.strerror or exc}", severity="error")
                return
            self._start_watch(self.path)
        self.disk_text = text
        self.editor.load_text(text)
        self._show_file_line()
        self._schedule_check()
        self.editor.focus()

    def _show_file_line(self) -> None:
        name = str(self.path) if self.path else "new recipe (unsaved: ctrl+s asks for a name)"
        modified = " [b]modified[/b]" if self.editor.text != self.disk_text else ""
        self.query_one("#recipe-file", Static).update(f"{name}{modified}")

    def _start_watch(self, path: Path) -> None:
        stop = threading.Event()
        self._watch_stop = stop
        target = str(path.resolve())

        def watch_file() -> None:
            from watchfiles import watch

            for _changes in watch(path.parent, stop_event=stop, debounce=100, step=30, recursive=False,
                                  watch_filter=lambda _c, p: str(Path(p).resolve()) == target,
                                  raise_interrupt=False):
                if stop.is_set():
                    return
                self.from_thread(self._disk_changed)

        threading.Thread(target=watch_file, name="recipe-watch", daemon=True).start()

    def _stop_watch(self) -> None:
        if self._watch_stop is not None:
            self._watch_stop.set()
            self._watch_stop = None

    def _disk_changed(self) -> None:
        if self.path is None:
            return
        try:
            text = self.path.read_text()
        except OSError:
            self.notify(f"{self.path} was removed or is unreadable", severity="warning")
            return
        if text == self.disk_text:
            return  # our own save, or a touch
        if self.editor.text == self.disk_text:  # no local edits: follow the file
            self.disk_text = text
            self.editor.load_text(text)
            self._schedule_check()
            self.notify(f"reloaded {self.path.name}: it changed on disk")
        else:
            self.disk_text = text
            self.notify(f"{self.path.name} changed on disk; ctrl+r reloads it (dropping your edits)",
                        severity="warning", timeout=10)
        self._show_file_line()

    def action_reload(self) -> None:
        if self.path is None:
            self.notify("nothing to reload: this recipe has no file yet", severity="warning")
            return
        self.open_file(self.path)

    def action_save(self) -> bool:
        if self.path is None:
            self.path = self.aorta.cwd / "recipe.yaml"
            n = 1
            while self.path.exists():
                n += 1
                self.path = self.aorta.cwd / f"recipe-{n}.yaml"
            self._start_watch(self.path)
        text = self.editor.text
        try:
            self.disk_text = text
            atomic_write_text(self.path, text)
        except OSError as exc:
            self.notify(f"cannot save {self.path}: {exc.strerror or exc}", severity="error")
            return False
        give_to_invoking_user(self.path)
        self._show_file_line()
        self.notify(f"saved {self.path}")
        return True

    # --- validation ----------------------------------------------------------------------

    def on_text_area_changed(self, _event: TextArea.Changed) -> None:
        self._show_file_line()
        self._schedule_check()

    def _schedule_check(self) -> None:
        if self._check_timer is not None:
            self._check_timer.stop()
        self._check_timer = self.set_timer(CHECK_DELAY_S, self._start_check)

    def _start_check(self) -> None:
        text = self.editor.text
        source = str(self.path) if self.path else "<new recipe>"
        self.run_worker(lambda: self._check(text, source), thread=True, exit_on_error=False,
                        group="check", exclusive=True, name="recipe check")

    def _check(self, text: str, source: str) -> None:
        try:
            recipe_mod = engines.recipe()
        except engines.EngineMissing as exc:
            self.from_thread(self._show_check, [], Text(str(exc)), text)
            return
        from aorta_tui.core.registry import Registry

        registry = Registry()
        issues = list(recipe_mod.check_recipe_text(text, source=source, registry=registry))
        plan_text = Text()
        if not issues:
            try:
                from aorta_tui.core.plan import build_plan

                recipe = recipe_mod.load_recipe_text(text, source=source, registry=registry)
                plan_text = plan_preview(build_plan(recipe, registry))
            except Exception as exc:  # a plan error is an issue to show, not a crash
                render = getattr(exc, "render", None)
                plan_text = Text.assemble(("cannot plan: ", "red"), str(render() if callable(render) else exc))
        self.from_thread(self._show_check, issues, plan_text, text)

    def _show_check(self, issues: list[Any], plan_text: Text, text: str) -> None:
        if text != self.editor.text:
            return  # stale: a newer check is on its way
        self.checks_done += 1
        self.issues = issues
        table = self.query_one("#recipe-issues", DataTable)
        table.display = bool(issues)
        table.clear()
        for issue in issues:
            table.add_row(
                Text(str(getattr(issue, "line", "") or "")),
                Text(str(getattr(issue, "column", "") or "")),
                Text(str(getattr(issue, "path", "") or "")),
                Text(str(issue.message) + (f" — {issue.hint}" if getattr(issue, "hint", None) else "")),
            )
        status = self.query_one("#recipe-status", Static)
        if issues:
            first = issues[0]
            status.update(f"[b red]✗ {len(issues)} problem(s)[/]  first at line {first.line}, column {first.column}")
        else:
            status.update("[b green]✓ valid[/]  ctrl+l launches it")
        self.plan_text = plan_text.plain
        self.query_one("#plan-preview", Static).update(plan_text)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "recipe-issues" and event.cursor_row < len(self.issues):
            self.jump_to_issue(self.issues[event.cursor_row])

    def jump_to_issue(self, issue: Any) -> None:
        """Put the cursor on the issue's line and column and select that line."""
        line = max(0, int(getattr(issue, "line", 1) or 1) - 1)
        column = max(0, int(getattr(issue, "column", 1) or 1) - 1)
        editor = self.editor
        line = min(line, editor.document.line_count - 1)
        editor.focus()
        editor.select_line(line)
        editor.cursor_location = (line, min(column, len(editor.document.get_line(line))))

    def action_leave_editor(self) -> None:
        """Focus leaves the text (so digits switch screens): to the issues, else the plan."""
        issues = self.query_one("#recipe-issues", DataTable)
        if issues.display and issues.row_count:
            issues.focus()
        else:
            self.query_one("#plan-box", VerticalScroll).focus()

    def action_focus_editor(self) -> None:
        self.editor.focus()

    # --- launch --------------------------------------------------------------------------

    def action_launch(self) -> None:
        if self.issues:
            self.notify("fix the recipe's problems first", severity="error")
            return
        if (self.path is None or self.editor.text != self.disk_text) and not self.action_save():
            return
        assert self.path is not None
        command = self.query_one("#probe-command", Input).value.strip()
        argv = tuple(shlex.split(command)) if command else ()
        recipe_path, output = self.path, self.aorta.output_dir

        def launch() -> None:
            run_dir = engines.launch().launch_detached(recipe_path, output, command=argv)
            self.from_thread(self.aorta.open_run, Path(run_dir))

        self.notify(f"launching {recipe_path.name} (detached: it keeps running if you quit)")
        self.run_worker(launch, thread=True, exit_on_error=False, name="launch sweep")
