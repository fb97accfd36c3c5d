"""A modal that picks one or more paths: type one (the list narrows as you type) or pick one.

The path field always has the focus, so typing goes there; up/down move the highlight in the
list, and enter takes the typed path when it exists, else the highlighted entry. A picker of
several paths can refuse the same file twice (``distinct``), and ``validate`` checks a path
only when it is picked (listing never opens the files), its message shown in the picker.

Candidates given as a function are listed by a worker thread (they come from walking
directories): the picker opens at once, so the keys typed after the one that opened it land
in its path field, and the list fills in when the walk is done. What is picked is checked
(does the typed path exist, is it picked already, ``validate``) by a worker too: ``validate``
opens the file, which may sit on a stalled filesystem.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.markup import escape
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

Validator = Callable[[Path], "str | None"]  # an error message, or None when the path will do
Labeller = Callable[[Path], str]  # how a candidate is shown


class CandidatesListed(Message):
    """The candidates the picker's worker listed (``error``: why it listed none)."""

    bubble = False

    def __init__(self, candidates: list[Path], error: str = "") -> None:
        super().__init__()
        self.candidates = candidates
        self.error = error


class PathChecked(Message):
    """The check worker's answer on ``path``: ``problem`` why it cannot be picked (else empty);
    ``typed`` the field's text it came from (None: picked from the list)."""

    bubble = False

    def __init__(self, path: Path, problem: str, typed: str | None) -> None:
        super().__init__()
        self.path = path
        self.problem = problem
        self.typed = typed


class PathPicker(ModalScreen[list[Path] | None]):
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "move(-10)", "Page up", show=False),
        Binding("pagedown", "move(10)", "Page down", show=False),
    ]

    def __init__(self, title: str, candidates: list[Path] | Callable[[], list[Path]], *, pick: int = 1,
                 base: Path | None = None, distinct: bool = False, validate: Validator | None = None,
                 labels: list[str] | Labeller | None = None) -> None:
        """``candidates``: the paths, or a function that lists them (run in a worker thread);
        ``labels``: how each is shown (a list, or a function of the path), else the path."""
        super().__init__()
        self._title = title
        self._lister = candidates if callable(candidates) else None
        self._label_of = labels if callable(labels) else str
        candidates = [] if callable(candidates) else candidates
        self._candidates = candidates
        self._labels = labels if isinstance(labels, list) and labels else [self._label_of(p) for p in candidates]
        self._pick = pick
        self._base = base
        self._distinct = distinct
        self._validate = validate
        self._chosen: list[Path] = []
        self._shown: list[int] = list(range(len(candidates)))  # candidates matching the text
        self.message = ""
        self._checking = False  # set when a check starts, cleared by its answer (PathChecked)

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(self._title, id="picker-title")
            yield Input(placeholder="type a path (the list narrows), or up/down and enter", id="picker-path")
            yield Static("", id="picker-message")
            yield OptionList(id="picker-list")

    def on_mount(self) -> None:
        self._fill("")
        self.query_one("#picker-path", Input).focus()
        if self._lister is not None:
            lister = self._lister

            # Why a worker: the candidates come from walking directories (every run's journal
            # or env/), seconds on many runs or a stalled filesystem; CandidatesListed brings them.
            def listing() -> None:
                try:
                    found = lister()
                except Exception as exc:  # shown in the picker (a typed path still works)
                    self.post_message(CandidatesListed([], f"listing failed: {type(exc).__name__}: {exc}"))
                    raise
                self.post_message(CandidatesListed(found))

            self.run_worker(listing, thread=True, group="picker-list", exit_on_error=False, name="list candidates")

    @on(CandidatesListed)
    def _candidates_listed(self, message: CandidatesListed) -> None:
        self._lister = None
        self._candidates = message.candidates
        self._labels = [self._label_of(p) for p in message.candidates]
        self._fill(self.query_one("#picker-path", Input).value)
        if message.error:
            self._say(message.error, error=True)

    @property
    def listing(self) -> bool:
        """Whether the worker is still listing the candidates."""
        return self._lister is not None

    @property
    def checking(self) -> bool:
        """Whether the check worker is checking the path picked, its answer not yet handled
        (a flag, not the worker's state: the answer is handled after the worker ends)."""
        return self._checking

    # --- the list ------------------------------------------------------------------------

    def _fill(self, needle: str) -> None:
        needle = needle.strip().lower()
        self._shown = [i for i, label in enumerate(self._labels) if needle in label.lower()]
        options = self.query_one("#picker-list", OptionList)
        options.clear_options()
        if self._shown:
            width = self._label_width()
            options.add_options([Option(escape(fit_path(self._labels[i], width)), id=str(i))
                                 for i in self._shown])
            options.highlighted = 0
        elif self._candidates:
            options.add_option(Option("(no listed file matches: enter takes the typed path)", disabled=True))
        elif self._lister is not None:
            options.add_option(Option("(listing what is nearby…: or type a path above)", disabled=True))
        else:
            options.add_option(Option("(nothing found nearby: type a path above)", disabled=True))

    def _label_width(self) -> int:
        """Columns an entry has on one line: the box (96% of the screen, at most 120: the
        stylesheet's #picker), less its border, the list's border and padding."""
        return max(20, min(int(self.app.size.width * 0.96), 120) - 8)

    def highlighted(self) -> Path | None:
        options = self.query_one("#picker-list", OptionList)
        index = options.highlighted
        if index is None or index >= len(self._shown):
            return None
        return self._candidates[self._shown[index]]

    def action_move(self, delta: int) -> None:
        options = self.query_one("#picker-list", OptionList)
        if not self._shown:
            return
        current = options.highlighted or 0
        options.highlighted = max(0, min(len(self._shown) - 1, current + delta))

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def on_key(self, event: events.Key) -> None:
        """Typing while the list has the focus (after a click) still goes to the path field."""
        field = self.query_one("#picker-path", Input)
        if event.is_printable and event.character and self.focused is not field:
            event.stop()
            event.prevent_default()
            field.focus()
            field.insert_text_at_cursor(event.character)

    # --- choosing ------------------------------------------------------------------------

    def _typed(self, text: str) -> Path:
        path = Path(text).expanduser()
        if self._base is not None and not path.is_absolute():
            return self._base / path
        return path

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.checking:
            return  # the path picked a moment ago is being checked: a second enter starts none
        text = event.value.strip()
        if not text:
            picked = self.highlighted()
            if picked is None:
                self._say("type a path, or move onto an entry of the list", error=True)
                return
            self._check(picked, None, typed=event.value)
            return
        # The typed path when it names something (the worker looks); else the list's entry it
        # narrowed to.
        self._check(self._typed(text), self.highlighted(), typed=event.value)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None and not self.checking:
            self._check(self._candidates[int(event.option.id)], None, typed=None)
        self.query_one("#picker-path", Input).focus()

    def _check(self, path: Path, instead: Path | None, *, typed: str | None) -> None:
        """Check ``path`` (when it does not exist, ``instead`` if given) in the check worker;
        PathChecked answers. ``typed``: the field's text it came from (None: the list)."""
        chosen, validate, distinct = list(self._chosen), self._validate, self._distinct

        # Why a worker: whether a typed path exists, its resolved name and ``validate`` (which
        # loads the snapshot or reads the recipe) touch the filesystem, which may stall.
        def check() -> None:
            picked, problem = path, ""
            try:
                picked = instead if instead is not None and not path.exists() else path
                problem = pick_problem(picked, chosen, distinct, validate)
            except Exception as exc:  # said in the picker, which refuses the path
                problem = f"cannot check {picked}: {type(exc).__name__}: {exc}"
                raise
            finally:  # always answered, so the next enter is never held back
                self.post_message(PathChecked(picked, problem, typed))

        self._say(f"checking {picked_name(path)}…")
        self._checking = True
        self.run_worker(check, thread=True, group="picker-check", exit_on_error=False, name="check path")

    @on(PathChecked)
    def _path_checked(self, message: PathChecked) -> None:
        self._checking = False
        field = self.query_one("#picker-path", Input)
        if message.problem:
            self._say(message.problem, error=True)
            if message.typed is not None and field.value == message.typed:
                field.select_all()  # refused: the next keys replace it, arrows edit it
            return
        if message.typed is None or field.value == message.typed:
            field.value = ""  # (what was typed while it was checked is kept)
        self._add(message.path)

    def _add(self, path: Path) -> None:
        """Take ``path``, checked: the picker ends when it has all it picks."""
        self._chosen.append(path)
        if len(self._chosen) >= self._pick:
            self.dismiss(self._chosen)
            return
        self.query_one("#picker-title", Static).update(
            f"{self._title}\nchosen: " + ", ".join(escape(str(p)) for p in self._chosen)
        )
        self._say(f"{len(self._chosen)} of {self._pick} picked: now the next one")

    def _say(self, text: str, *, error: bool = False) -> None:
        self.message = text
        self.query_one("#picker-message", Static).update(f"[red]{escape(text)}[/]" if error else escape(text))

    def action_cancel(self) -> None:
        self.dismiss(self._chosen or None)


def pick_problem(path: Path, chosen: list[Path], distinct: bool, validate: Validator | None) -> str:
    """Why ``path`` cannot be picked after ``chosen`` (file checks: the check worker calls
    this), or the empty string."""
    if distinct and any(same_file(path, other) for other in chosen):
        return f"{path} is already picked: pick a different file"
    return (validate(path) or "") if validate is not None else ""


def picked_name(path: Path) -> str:
    return path.name or str(path)


def same_file(a: Path, b: Path) -> bool:
    """One file under two spellings (``a.json``, ``./a.json``, a symlink) counts as one."""
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return a == b


def fit_path(label: str, width: int) -> str:
    """``label`` on one line of ``width``: a longer path keeps its first folder and its last
    two parts (the run's env/ and the file name) whole, with "…" for the middle, instead of
    wrapping in the middle of a name (``host_env.jso`` / ``n`` at 80 columns)."""
    if len(label) <= width:
        return label
    parts = label.split("/")
    tail = "/".join(parts[-2:]) if len(parts) > 2 else parts[-1]
    head = parts[0] + "/" if len(parts) > 3 else ""
    fitted = f"{head}…/{tail}"
    if len(fitted) <= width:  # as much of the middle as fits, from its end
        room = width - len(fitted)
        middle = "/".join(parts[1:-2]) if len(parts) > 3 else ""
        return f"{head}…{middle[len(middle) - room:] if room else ''}/{tail}" if middle else fitted
    return "…" + label[len(label) - width + 1:]
