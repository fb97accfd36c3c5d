"""Recipe editor: YAML with the engine's validation as you type, a plan preview, save, launch.

Two modes, so that a key is either a screen key or text, never both by surprise: the editor
opens *viewing* (the text area is read-only: arrows move, ``1``-``6`` and ``?`` are screen
keys), ``e`` or ``enter`` starts *editing* (every printable key is text, digits included) and
``escape`` stops. Unsaved changes are never dropped silently: leaving the screen, opening
another recipe and quitting ask first.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Input, Static, TextArea

from aorta_tui.core.atomic import atomic_write_text
from aorta_tui.core.errors import AortaError
from aorta_tui.tui.recipe_files import find_recipes, new_file_problem, read_recipe_for_edit
from aorta_tui.tui.screens.base import AortaScreen, answer_from_worker
from aorta_tui.tui.screens.dialogs import ConfirmScreen
from aorta_tui.tui.screens.latest_read import LatestRead
from aorta_tui.tui.screens.pickers import PathPicker

if TYPE_CHECKING:
    from textual.timer import Timer

    from aorta_tui.recipe.checks import RecipeIssue
    from aorta_tui.sweep.plan import Plan

CHECK_DELAY_S = 0.3  # validate this long after the last keystroke


class RecipeFileChanged(Message):
    """The open recipe's file changed on disk (posted by the editor's watch worker)."""

    bubble = False  # for the editor that watches it

    def __init__(self, watch_stop: threading.Event) -> None:
        super().__init__()
        # names the watch that saw it, so a stopped watch's late news is dropped (not ``stop``:
        # that is Message.stop())
        self.watch_stop = watch_stop

    def can_replace(self, message: Message) -> bool:
        # one reread of the file covers every change an undelivered message reports
        return isinstance(message, RecipeFileChanged) and message.watch_stop is self.watch_stop

class RecipeOpened(Message):
    """What the open worker read for ``open_file(path, create=create)``: the text and whether
    it is a new file, or why it cannot be opened (``problem``, notified with ``title``);
    ``failed`` when the read raised (the worker's error is the notification)."""

    def __init__(self, path: Path | None, create: bool, text: str = "", new_file: bool = False,
                 problem: str = "", title: str = "", failed: bool = False) -> None:
        super().__init__()
        self.path, self.create, self.text, self.new_file = path, create, text, new_file
        self.problem, self.title, self.failed = problem, title, failed


class DiskRead(Message):
    """The open recipe's text as the disk now has it (None: removed or unreadable), read by
    the reread worker after a RecipeFileChanged."""

    def __init__(self, path: Path, text: str | None) -> None:
        super().__init__()
        self.path = path
        self.text = text


class RecipeSaved(Message):
    """The save worker's answer: ``text`` written to ``path`` for the buffer that showed
    ``was`` (None: a new recipe, named by the worker), or why not (``error``); ``failed``
    when the write raised (the worker's error is the notification)."""

    def __init__(self, was: Path | None, path: Path | None, text: str, error: str = "",
                 failed: bool = False) -> None:
        super().__init__()
        self.was, self.path, self.text, self.error, self.failed = was, path, text, error, failed


def save_recipe(was: Path | None, cwd: Path, text: str) -> RecipeSaved:
    """Write ``text`` atomically to ``was``, or for a new recipe to the first free
    ``recipe.yaml``, ``recipe-2.yaml``… in ``cwd`` (file writes and stats: the save worker
    calls this). A write refused is said as the answer's ``error``."""
    path = was
    if path is None:
        path, n = cwd / "recipe.yaml", 1
        while path.exists():
            n += 1
            path = cwd / f"recipe-{n}.yaml"
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        return RecipeSaved(was, path, text, error=f"cannot save {path}: {exc.strerror or exc}")
    return RecipeSaved(was, path, text)


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
    """A YAML code editor, read-only until editing starts; highlighting only where
    tree-sitter's YAML grammar is installed."""
    try:
        return TextArea.code_editor(text, language="yaml", id="recipe-text", soft_wrap=False, read_only=True)
    except Exception:  # LanguageDoesNotExist: textual[syntax] not installed
        return TextArea.code_editor(text, language=None, id="recipe-text", soft_wrap=False, read_only=True)


def read_for_edit(path: Path | None, create: bool) -> RecipeOpened:
    """What opening ``path`` shows (file reads: the open worker calls this). None: the
    new-recipe text; a missing file with ``create``: that text, saved there by ctrl+s."""
    if path is None:
        return RecipeOpened(path, create, NEW_RECIPE)
    if create and not path.exists():
        problem = new_file_problem(path)
        if problem:
            return RecipeOpened(path, create, problem=problem)
        return RecipeOpened(path, create, NEW_RECIPE, new_file=True)
    try:
        return RecipeOpened(path, create, read_recipe_for_edit(path))
    except AortaError as exc:  # its located message, as the open dialog shows it
        return RecipeOpened(path, create, problem=exc.render(), title="cannot open")


def disk_text(path: Path) -> str | None:
    """``path``'s text (size-limited, a regular file), or None when it was removed or cannot be
    read now (file reads: the reread worker calls this)."""
    try:
        return read_recipe_for_edit(path)
    except (AortaError, OSError):
        return None


def recipe_open_problem(path: Path) -> str | None:
    """Why the open dialog cannot open ``path`` (a missing one is created on save), or None."""
    if not path.exists():
        return new_file_problem(path)
    try:
        read_recipe_for_edit(path)
    except AortaError as exc:
        return exc.render()
    return None


def plan_preview(plan: Plan) -> Text:
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
    HELP_NOTE = (
        "The editor opens [b]viewing[/b]: the text is read-only and 1-6 and ? are screen keys.\n"
        "[b]e[/b] or [b]enter[/b] starts [b]editing[/b]: every key is text, digits included.\n"
        "[b]escape[/b] stops editing; then a digit switches screens. Leaving the editor,\n"
        "opening another recipe or quitting with unsaved changes asks before dropping them."
    )
    MAIN_WIDGET = "#recipe-text"
    BINDINGS = [
        Binding("e", "edit", "Edit"),  # only reached while not editing (then it is text)
        Binding("enter", "edit", "Edit", show=False),
        Binding("ctrl+e", "edit", "Edit", show=False),  # from the issues or the plan
        Binding("escape", "escape", "View", priority=True),  # stop editing: viewing mode
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("ctrl+o", "open", "Open", priority=True),
        Binding("ctrl+l", "launch", "Launch", priority=True),
        # out of the footer (80 columns): the "changed on disk" message names it when it applies
        Binding("ctrl+r", "reload", "Reload", priority=True, show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.path: Path | None = None
        self.disk_text = NEW_RECIPE  # what the text area starts with: nothing unsaved yet
        self.issues: list[RecipeIssue] = []
        self.plan_text = ""
        self._check_timer: Timer | None = None
        self._watch_stop: threading.Event | None = None
        self.checks_done = 0
        self.editing = False
        self.new_file = False  # ``path`` does not exist yet: ctrl+s creates it
        # The file to open (path, create); the open worker reads one at a time and answers
        # with RecipeOpened; the newest asked for wins.
        self._open: LatestRead[tuple[Path | None, bool]] = LatestRead(self._read_file)
        # The reread worker reads the file after a change on disk (DiskRead answers); a change
        # seen while it reads asks for one more read, never a second worker.
        self._disk_reading = False
        self._disk_again = False
        # Whether the save worker writes now (RecipeSaved answers): a second save key while it
        # writes starts none; ``_after_save`` runs once it is saved (the launch that asked).
        self._saving = False
        self._after_save: Callable[[], None] | None = None

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

    # --- modes ---------------------------------------------------------------------------

    def set_editing(self, on: bool) -> None:
        """Editing: keys are text. Viewing: the text is read-only and keys are commands."""
        self.editing = on
        self.editor.read_only = not on
        self.editor.focus()
        self._show_file_line()

    def action_edit(self) -> None:
        self.set_editing(True)

    def action_escape(self) -> None:
        if self.editing:
            self.set_editing(False)
        else:
            self.action_leave_editor()

    # --- unsaved changes -----------------------------------------------------------------

    @property
    def has_unsaved(self) -> bool:
        return self.editor.text != self.disk_text

    def _shown_name(self) -> str:
        return self.display_path(self.path) if self.path else "the new recipe"

    def confirm_discard(self, then: Callable[[], object], doing: str) -> None:
        """Run ``then()`` now if nothing is unsaved, else after the user agrees to drop it."""
        if not self.has_unsaved:
            then()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.discard()
                then()

        self.app.push_screen(ConfirmScreen(
            f"Discard your unsaved changes to {self._shown_name()}?",
            f"y discards them and {doing}; n keeps editing (ctrl+s saves).",
        ), answered)

    def discard(self) -> None:
        """Back to the text on disk (a new recipe: back to where it started)."""
        self.editor.load_text(self.disk_text)
        self.set_editing(False)

    # --- files ---------------------------------------------------------------------------

    def request_open(self, path: Path | None, *, create: bool = False) -> None:
        """Open ``path`` (None: a new recipe), asking first if this buffer holds unsaved edits."""
        self.confirm_discard(lambda: self.open_file(path, create=create), "opens the other recipe")

    def open_file(self, path: Path | None, *, create: bool = False) -> None:
        """Show ``path`` (viewing) once the open worker has read it. A missing file with
        ``create``: the new-recipe text, saved there by ctrl+s."""
        self._open.want((Path(path) if path else None, create))  # read now, or after the read under way
        self._show_file_line()

    def _read_file(self, asked: tuple[Path | None, bool]) -> None:
        path, create = asked

        # Why a worker: the recipe is a file (up to the recipe size limit) that may sit on a
        # network filesystem; the keys keep working while it is read.
        answer_from_worker(self, lambda: read_for_edit(path, create), lambda: RecipeOpened(path, create, failed=True),
                           group="recipe-open", name="open recipe")

    @on(RecipeOpened)
    def _recipe_opened(self, message: RecipeOpened) -> None:
        if not self._open.answered((message.path, message.create)):
            return  # another file was asked for meanwhile: the newest wins (it is read now)
        self._show_file_line()
        if message.failed:
            return
        if message.problem:
            self.notify(message.problem, title=message.title or "cannot open", severity="error", timeout=12,
                        markup=False)
            return
        # edits typed while the file was read are not dropped without asking
        self.confirm_discard(lambda: self._show_opened(message.path, message.text, message.new_file),
                             "opens the other recipe")

    def _show_opened(self, path: Path | None, text: str, new_file: bool) -> None:
        self._stop_watch()
        self.path, self.new_file = path, new_file
        if self.path is not None and not new_file:
            self._start_watch(self.path)
        self.disk_text = text
        self.editor.load_text(text)
        self.set_editing(False)
        self._schedule_check()

    def action_open(self) -> None:
        cwd = self.aorta.cwd

        def chosen(paths: list[Path] | None) -> None:
            if paths:
                self.request_open(paths[0], create=True)

        self.app.push_screen(PathPicker(
            "Open a recipe (a new file name creates it on ctrl+s)",
            lambda: find_recipes(cwd),  # in the picker's worker: walks ./ and ./recipes
            base=cwd, validate=recipe_open_problem, labels=self.display_path), chosen)

    def _show_file_line(self) -> None:
        if self.path is None:
            name = "new recipe (unsaved: ctrl+s names it)"
        else:
            # escaped: a file may be named ``[bold]x.yaml`` or hold ``[/]``, which is markup
            name = escape(self.display_path(self.path)) + (" (new file: ctrl+s creates it)" if self.new_file else "")
        modified = " [b]modified[/b]" if self.has_unsaved else ""
        modified += " [dim](saving…)[/dim]" if self._saving else ""
        mode = "[b reverse] EDITING [/] esc stops" if self.editing else "[b] VIEWING [/] e edits"
        opening = ""
        if self._open.wanted is not None:
            wanted = self._open.wanted[0]
            opening = f"  [dim](opening {escape(self.display_path(wanted)) if wanted else 'a new recipe'}…)[/dim]"
        self.query_one("#recipe-file", Static).update(f"{mode}  {name}{modified}{opening}")

    def _start_watch(self, path: Path) -> None:
        stop = threading.Event()
        self._watch_stop = stop
        self._watch_file(path, stop)

    @work(thread=True, group="recipe-watch", exit_on_error=False, name="recipe watch")
    def _watch_file(self, path: Path, stop: threading.Event) -> None:
        """Post a :class:`RecipeFileChanged` whenever ``path`` changes, until ``stop`` is set
        (``watch`` looks at it every ``step`` ms, so a stopped watch ends at once)."""
        from watchfiles import watch

        target = str(path.resolve())
        for _changes in watch(path.parent, stop_event=stop, debounce=100, step=30, recursive=False,
                              watch_filter=lambda _c, p: str(Path(p).resolve()) == target,
                              raise_interrupt=False):
            if stop.is_set():
                return
            self.post_message(RecipeFileChanged(stop))

    @on(RecipeFileChanged)
    def _file_changed(self, message: RecipeFileChanged) -> None:
        if message.watch_stop is self._watch_stop:
            self._reread_disk()

    def _stop_watch(self) -> None:
        if self._watch_stop is not None:
            self._watch_stop.set()
            self._watch_stop = None

    def _reread_disk(self) -> None:
        if self.path is None:
            return
        if self._disk_reading:
            self._disk_again = True  # the read under way may have missed this change
            return
        path = self.path
        self._disk_reading = True

        # Why a worker: the file changed on disk (an editor elsewhere, a sync): reading it may
        # wait on a network filesystem, and the keys must not.
        def read() -> None:
            text: str | None = None
            try:
                text = disk_text(path)
            finally:  # always answered, so the next read is never held back
                self.post_message(DiskRead(path, text))

        self.run_worker(read, thread=True, group="recipe-reread", exit_on_error=False, name="reread recipe")

    @on(DiskRead)
    def _disk_read(self, message: DiskRead) -> None:
        self._disk_reading = False
        if self._disk_again:
            self._disk_again = False
            self._reread_disk()  # changed again meanwhile: this answer may be old
            return
        if message.path == self.path:
            self._disk_changed(message.text)

    def _disk_changed(self, text: str | None) -> None:
        """Follow the file's new ``text`` when nothing is unsaved, else say it changed."""
        if self.path is None:
            return
        if text is None:
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
        if self.path is None or self.new_file:
            self.notify("nothing to reload: this recipe has no file yet", severity="warning")
            return
        path = self.path
        self.confirm_discard(lambda: self.open_file(path), "reloads the file")

    def action_save(self) -> None:
        self.save()

    def save(self, then: Callable[[], None] | None = None) -> None:
        """Write the buffer (as it is now) in the save worker; ``then()`` runs once it is saved."""
        if self._saving:
            return  # the write under way answers: a second save key while it writes starts none
        was, cwd, text = self.path, self.aorta.cwd, self.editor.text
        self._saving, self._after_save = True, then
        self._show_file_line()

        # Why a worker: the write (temporary file, fsync, rename) and finding a free name are
        # filesystem calls that can stall; keys typed meanwhile edit the buffer, which stays
        # modified (only ``text``, what was written, is marked saved).
        def write() -> None:
            answer = RecipeSaved(was, was, text, failed=True)
            try:
                answer = save_recipe(was, cwd, text)
            finally:  # always answered, so the next save is never held back
                self.post_message(answer)

        self.run_worker(write, thread=True, group="recipe-save", exit_on_error=False, name="save recipe")

    @on(RecipeSaved)
    def _recipe_saved(self, message: RecipeSaved) -> None:
        self._saving = False
        then, self._after_save = self._after_save, None
        if message.failed or message.error:
            if message.error:
                self.notify(message.error, severity="error", markup=False)
            self._show_file_line()
            return
        if message.was != self.path:  # another recipe was opened meanwhile: this one is saved
            self.notify(f"saved {message.path}", markup=False)
            return
        first = message.was is None or self.new_file
        self.path, self.new_file = message.path, False
        self.disk_text = message.text  # what was written: edits typed since stay unsaved
        if first and self.path is not None:
            self._start_watch(self.path)  # a file now: follow it (after our write, not for it)
        self._show_file_line()
        self.notify(f"saved {self.path}", markup=False)
        if then is not None:
            then()

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
        from aorta_tui import recipe as recipe_mod
        from aorta_tui.registry.registry import Registry

        registry = Registry()
        issues = list(recipe_mod.check_recipe_text(text, source=source, registry=registry))
        plan_text = Text()
        if not issues:
            try:
                from aorta_tui.sweep.plan import build_plan

                recipe = recipe_mod.load_recipe_text(text, source=source, registry=registry)
                plan_text = plan_preview(build_plan(recipe, registry))
            except Exception as exc:  # a plan error is an issue to show, not a crash
                render = getattr(exc, "render", None)
                plan_text = Text.assemble(("cannot plan: ", "red"), str(render() if callable(render) else exc))
        self.from_thread(self._show_check, issues, plan_text, text)

    def _show_check(self, issues: list[RecipeIssue], plan_text: Text, text: str) -> None:
        if text != self.editor.text:
            return  # stale: a newer check is on its way
        self.checks_done += 1
        self.issues = issues
        table = self.query_one("#recipe-issues", DataTable)
        table.display = bool(issues)
        table.clear()
        import textwrap

        widest = max((len(i.path) for i in issues), default=0)
        # the whole message, wrapped to the room the pane leaves after line, col and where (and
        # their padding, the scrollbar): a row is one line otherwise, and the end of a long
        # message was cut off even at 160 columns
        room = max(24, self.query_one("#recipe-right").size.width - max(widest, 5) - 26)
        for issue in issues:
            where = issue.path
            text = issue.message + (f" — {issue.hint}" if issue.hint else "")
            lines = textwrap.wrap(text, room) or [""]
            table.add_row(
                Text(str(issue.line or "")),
                Text(str(issue.column or "")),
                Text(where),
                Text("\n".join(lines)),
                height=len(lines),
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

    def jump_to_issue(self, issue: RecipeIssue) -> None:
        """Put the cursor on the issue's line and column and select that line."""
        line = max(0, (issue.line or 1) - 1)
        column = max(0, (issue.column or 1) - 1)
        editor = self.editor
        line = min(line, editor.document.line_count - 1)
        self.set_editing(True)  # the user chose to fix it
        editor.select_line(line)
        editor.cursor_location = (line, min(column, len(editor.document.get_line(line))))

    def action_leave_editor(self) -> None:
        """Focus leaves the text: to the issues, else the plan."""
        issues = self.query_one("#recipe-issues", DataTable)
        if issues.display and issues.row_count:
            issues.focus()
        else:
            self.query_one("#plan-box", VerticalScroll).focus()

    # --- launch --------------------------------------------------------------------------

    def action_launch(self) -> None:
        if self.issues:
            self.notify("fix the recipe's problems first", severity="error")
            return
        if self._saving:
            self.notify("the recipe is being saved: launch again once it is", severity="warning")
            return
        if self.path is None or self.editor.text != self.disk_text:
            self.save(then=self._launch)  # saved first (in the save worker), then launched
            return
        self._launch()

    def _launch(self) -> None:
        if self.path is None:
            return
        command = self.query_one("#probe-command", Input).value.strip()
        argv = tuple(shlex.split(command)) if command else ()
        recipe_path, output = self.path, self.aorta.output_dir

        def launch() -> None:
            from aorta_tui.relay.launch import launch_detached

            run_dir = launch_detached(recipe_path, output, command=argv)
            self.from_thread(self.aorta.open_run, Path(run_dir))

        self.notify(f"launching {recipe_path.name} (detached: it keeps running if you quit)")
        self.run_worker(launch, thread=True, exit_on_error=False, name="launch sweep")
