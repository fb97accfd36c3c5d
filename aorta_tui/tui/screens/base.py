"""What every aorta-tui screen shares: header, footer, global keys, errors as notifications."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from textual import on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header
from textual.worker import Worker, WorkerState

if TYPE_CHECKING:
    from aorta_tui.tui.host import AortaHost


def busy(worker: Worker[Any] | None) -> bool:
    """Whether ``worker`` has not finished. A thread worker cannot be stopped (cancelling one
    only marks it), so a timer that started one per tick behind a read that hangs would pile
    threads up: a tick that finds its last worker busy is skipped, the next one asks again."""
    return worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING)


class PathsListed(Message):
    """Paths a worker listed for a picker; ``show`` opens the picker on them (event loop)."""

    bubble = False

    def __init__(self, paths: list[Path], show: Callable[[list[Path]], object]) -> None:
        super().__init__()
        self.paths = paths
        self.show = show


class AortaScreen(Screen):
    """A full screen of the app. Subclasses implement ``compose_body`` and their commands."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    TITLE_TEXT = "aorta-tui"
    # The widget that has focus on arrival and after escape, so that the number keys that
    # switch screens are never typed into a text field by accident.
    MAIN_WIDGET = ""
    AUTO_FOCUS = "*"  # Textual's: what has focus on arrival; a subclass's is its MAIN_WIDGET

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.AUTO_FOCUS = cls.MAIN_WIDGET or "*"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._listing: dict[str, Worker[None]] = {}  # per picker, the worker listing its paths

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:  # pragma: no cover - every screen overrides
        yield from ()

    def on_mount(self) -> None:
        self.title = self.TITLE_TEXT

    def from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """``call_from_thread`` for our own threads, which may outlive the app by a moment."""
        try:
            app = self.app
        except RuntimeError:  # NoActiveAppError: the screen is gone with its app
            return
        if not app.is_running:
            return
        try:
            app.call_from_thread(callback, *args, **kwargs)
        except RuntimeError as exc:
            if "not running" not in str(exc):  # only "the app exited meanwhile" is expected
                raise

    def pick_after_listing(self, name: str, list_paths: Callable[[], list[Path]],
                           show: Callable[[list[Path]], object]) -> None:
        """``list_paths()`` in a worker thread, then ``show(paths)`` on the event loop.

        Why a worker: a picker's candidates come from walking directories (every run's
        journal, every run's env snapshots), which takes seconds on many runs or a stalled
        filesystem; the picker opens when they are listed. Asked again while listing: ignored.
        """
        if busy(self._listing.get(name)):
            return

        def listing() -> None:
            self.post_message(PathsListed(list_paths(), show))

        self._listing[name] = self.run_worker(listing, thread=True, group=f"list-{name}", exit_on_error=False,
                                              name=f"list {name}")

    @on(PathsListed)
    def _paths_listed(self, message: PathsListed) -> None:
        if self.is_current:  # not over a screen the user went to meanwhile
            message.show(message.paths)

    def action_focus_main(self) -> None:
        if self.MAIN_WIDGET:
            self.query_one(self.MAIN_WIDGET).focus()

    def display_path(self, path: object) -> str:
        """A path as the user would type it: relative to the working directory when inside it."""
        from pathlib import Path

        p = Path(str(path))
        try:
            return str(p.relative_to(self.aorta.cwd))
        except ValueError:
            return str(p)

    @property
    def aorta(self) -> AortaHost:
        # the app is an AortaApp, which satisfies AortaHost; it is not imported here because
        # it imports every screen
        return cast("AortaHost", self.app)

    def palette_commands(self) -> Iterable[SystemCommand]:
        """This screen's actions for the command palette (each described key binding has one)."""
        for binding in self.BINDINGS:
            if isinstance(binding, Binding) and binding.description and binding.action != "focus_main":
                yield SystemCommand(
                    f"{self.TITLE_TEXT}: {binding.description}",
                    f"key {binding.key}",
                    lambda action=binding.action: self.run_action(action),
                )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that raised is reported as a notification; the screen keeps running."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            exc = event.worker.error
            render = getattr(exc, "render", None)
            message = render() if callable(render) else f"{type(exc).__name__}: {exc}"
            self.notify(message, title=event.worker.name or "error", severity="error", timeout=12)
