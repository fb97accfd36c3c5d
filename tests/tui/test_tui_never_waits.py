"""The TUI never waits on its loop (issue 36 item 6): a lock check, a log read or a run listing
that hangs holds up its worker thread, never the keys; a timer whose last worker still runs
starts no other (no pile of threads behind a stalled filesystem); what the worker finally
reads is drawn when it answers.

Each slow read is a stand-in that blocks on a ``threading.Event`` until the test opens it:
the keys are pressed, and their effect asserted, while the read is known to be blocked
(``Gate.held``). The shape every test shares is in the helpers below: the app opened on a
screen (``_app_at``, ``_matrix``), the logs of a trial (``_logs_of_a_trial``), a key that
must answer at once (``_cursor_answers``, ``_help_opens_and_closes``), timer ticks let pass
(``_ticks_pass``) and a repeated request that must start no second read
(``Gate.still_one_call``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable, Input, Log, Static
from tui_support import DEMO_RUN, FIXED_FACTS, FIXTURES, LIVE_RUN, async_test, wait_for, workspace

from aorta_tui.policy.report_doc import PolicyReport
from aorta_tui.store import lock as lock_module
from aorta_tui.store import run_list
from aorta_tui.tui import logs as logs_module
from aorta_tui.tui import matrix_state as matrix_state_module
from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens import env_diff as env_diff_module
from aorta_tui.tui.screens import home as home_module
from aorta_tui.tui.screens import matrix as matrix_module
from aorta_tui.tui.screens import recipe_editor as recipe_editor_module
from aorta_tui.tui.screens import trial as trial_module
from aorta_tui.tui.screens.dialogs import ConfirmScreen
from aorta_tui.tui.screens.env_diff import EnvDiffScreen
from aorta_tui.tui.screens.help import HelpScreen
from aorta_tui.tui.screens.home import HomeScreen
from aorta_tui.tui.screens.matrix import MatrixScreen
from aorta_tui.tui.screens.pickers import PathPicker
from aorta_tui.tui.screens.policy import PolicyScreen
from aorta_tui.tui.screens.recipe_editor import RecipeEditorScreen
from aorta_tui.tui.screens.trial import TrialDetailScreen, TrialLogScreen
from aorta_tui.tui.widgets.matrix_grid import MatrixGrid

SIZES = [(80, 24), (120, 40)]
SLOW_RECIPE = "schema_version: 1\nticket: SLOW-DISK\nworkload: gpu_smoke\n"

S = TypeVar("S", bound=Screen[Any])


class Gate:
    """Stands in for ``real``: every call waits until the gate opens, then does the real thing.
    ``entered`` counts the calls that began, ``inside`` those still waiting."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.opened = threading.Event()
        self.entered = 0
        self.inside = 0
        self._count = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._count:
            self.entered += 1
            self.inside += 1
        try:
            self.opened.wait(120)  # a bound only so that a broken test cannot hang the suite
            return self.real(*args, **kwargs)
        finally:
            with self._count:
                self.inside -= 1

    async def held(self, pilot: Pilot[Any], what: str) -> None:
        """Wait until a call is blocked in the gate: the keys pressed next meet a read that waits
        (on code that read on the UI thread the app itself would be stuck, and this times out)."""
        await wait_for(pilot, lambda: self.inside == 1, what=what)

    async def still_one_call(self, pilot: Pilot[Any]) -> None:
        """After a request made again while the first call waits: a moment later that call
        still waits, and no second one began."""
        await pilot.pause(0.1)
        assert self.entered == 1 and self.inside == 1, "a second read began while the first waits"


class Gates:
    """The gates of one test: each stands in for a function it patches, and all are opened
    when the test ends, passed or failed, so no worker thread is left waiting."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.made: list[Gate] = []

    def on(self, target: object, name: str, real: Callable[..., Any] | None = None) -> Gate:
        """A gate in place of ``target.name`` (doing ``real``, default what was there)."""
        gate = self.add(Gate(real if real is not None else getattr(target, name)))
        self.monkeypatch.setattr(target, name, gate)
        return gate

    def add(self, gate: Gate) -> Gate:
        self.made.append(gate)
        return gate


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The workspace of a test: the fixture runs, snapshots and reports, copied under tmp_path."""
    return workspace(tmp_path)


@pytest.fixture
def gates(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gates]:
    made = Gates(monkeypatch)
    yield made
    for gate in made.made:
        gate.opened.set()


def _count_calls(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[int]:
    """Count the calls of ``cls.name`` (a timer's callback: set before the screen mounts)."""
    calls: list[int] = []
    real = getattr(cls, name)

    def counted(self: object) -> object:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(cls, name, counted)
    return calls


async def _ticks_pass(pilot: Pilot[Any], ticks: list[int], more: int) -> None:
    """Let ``more`` more calls of a timer's callback (counted by ``_count_calls``) pass."""
    seen = len(ticks)
    await wait_for(pilot, lambda: len(ticks) >= seen + more, what=f"{more} more ticks")


@asynccontextmanager
async def _app_at(ws: Path, kind: type[S], size: tuple[int, int] = (80, 24), *, run: str | None = None,
                  start: str = "home") -> AsyncIterator[tuple[AortaApp, Pilot[Any], S]]:
    """The app on the workspace ``ws`` (its runs under aorta-out/), running at ``size``, and its
    first screen, a ``kind``: the matrix of ``run`` when one is named, else the ``start`` screen."""
    app = AortaApp(cwd=ws, output_dir=ws / "aorta-out", start_screen=start, machine_facts=FIXED_FACTS,
                   start_run=ws / "aorta-out" / run if run is not None else None)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, kind)
        yield app, pilot, screen


def _matrix(ws: Path, size: tuple[int, int] = (80, 24),
            run: str = DEMO_RUN) -> AbstractAsyncContextManager[tuple[AortaApp, Pilot[Any], MatrixScreen]]:
    """The app opened on the matrix of ``run`` (the demo run, finished, by default)."""
    return _app_at(ws, MatrixScreen, size, run=run)


async def _grid_ready(pilot: Pilot[Any], screen: MatrixScreen) -> None:
    await wait_for(pilot, lambda: screen.state is not None and screen.state.status is not None
                   and screen.query_one(MatrixGrid).row_count > 1 and not screen._dirty, what="the grid drawn")


async def _trial_selected(pilot: Pilot[Any]) -> MatrixScreen:
    """The demo run's matrix drawn, its cursor on a trial."""
    screen = pilot.app.screen
    assert isinstance(screen, MatrixScreen)
    await _grid_ready(pilot, screen)
    await pilot.press("right")
    await wait_for(pilot, lambda: screen._selected_view() is not None, what="a trial")
    return screen


async def _logs_of_a_trial(pilot: Pilot[Any]) -> TrialLogScreen:
    """From the demo run's matrix: a trial selected and its logs opened (l)."""
    await _trial_selected(pilot)
    await pilot.press("l")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TrialLogScreen), what="the logs")
    logs = pilot.app.screen
    assert isinstance(logs, TrialLogScreen) and logs.trial_dir is not None
    return logs


async def _cursor_answers(pilot: Pilot[Any], screen: MatrixScreen, waited_for: str) -> MatrixGrid:
    """Right on the matrix's grid moves its cursor at once: the key did not wait for ``waited_for``."""
    grid = screen.query_one(MatrixGrid)
    before = grid.cursor_coordinate
    await pilot.press("right")
    assert grid.cursor_coordinate != before, f"the key waited for {waited_for}"
    return grid


async def _help_opens_and_closes(pilot: Pilot[Any], screen: Screen[Any]) -> None:
    """? opens the help over ``screen`` at once, and escape brings ``screen`` back."""
    await pilot.press("question_mark")
    assert isinstance(pilot.app.screen, HelpScreen), "? waited"
    await pilot.press("escape")
    assert pilot.app.screen is screen


def _probe_recipe(ws: Path, text: str = SLOW_RECIPE) -> Path:
    recipe = ws / "probe.yaml"
    recipe.write_text(text)
    return recipe


def _summary(screen: MatrixScreen) -> str:
    return str(screen.query_one("#matrix-summary", Static).render())


def _file_line(editor: RecipeEditorScreen) -> str:
    return str(editor.query_one("#recipe-file", Static).render())


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_a_lock_probe_that_hangs_holds_no_key_and_starts_no_second_probe(
        ws: Path, monkeypatch: pytest.MonkeyPatch, gates: Gates, size: tuple[int, int]) -> None:
    gate = gates.on(lock_module, "lock_holder", lambda run_dir: None)  # then: nobody holds the lock
    ticks = _count_calls(monkeypatch, MatrixScreen, "_check_orchestrator")
    async with _matrix(ws, size, LIVE_RUN) as (_app, pilot, screen):  # interrupted: the summary follows the probe
        await gate.held(pilot, "the probe blocked")
        await wait_for(pilot, lambda: screen.query_one(MatrixGrid).row_count > 1 and not screen._dirty,
                       what="the grid drawn")
        await _cursor_answers(pilot, screen, "the lock probe")
        await _help_opens_and_closes(pilot, screen)
        await _ticks_pass(pilot, ticks, 2)  # ticks come and go while the probe hangs: none starts another probe
        assert gate.inside == 1 and gate.entered == 1
        assert screen.orchestrator_alive is None
        gate.opened.set()
        await wait_for(pilot, lambda: screen.orchestrator_alive is False, what="the probe's answer")
        await wait_for(pilot, lambda: "stopped without finishing" in _summary(screen), what="the summary redrawn")


@async_test
async def test_a_log_tail_that_hangs_holds_no_key_and_the_newest_trial_is_shown(
        ws: Path, gates: Gates) -> None:
    gate = gates.on(matrix_module, "tail_text",
                    lambda trial_dir, budget: matrix_module.Text(f"TAIL OF {trial_dir.parent.name}/{trial_dir.name}"))
    async with _matrix(ws) as (_app, pilot, screen):
        await _grid_ready(pilot, screen)
        await pilot.press("right")  # the first trial: its tail read blocks
        await gate.held(pilot, "the tail read blocked")
        first = screen._selected_view()
        await pilot.press("down")  # handled while the read hangs
        newest = screen._selected_view()
        assert first is not None and newest is not None and newest is not first
        await _help_opens_and_closes(pilot, screen)
        assert gate.entered == 1, "a second read started while the first still hangs"
        gate.opened.set()
        # the answer for the first trial is stale: the newest trial's is read and drawn
        await wait_for(pilot, lambda: newest.trial_id in str(screen.query_one("#trial-detail").render()),
                       what="the newest trial's detail")
        detail = str(screen.query_one("#trial-detail").render())
        assert f"TAIL OF {newest.trial_id}" in detail
        assert first.trial_id not in detail


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_a_run_listing_that_hangs_holds_no_key_and_ticks_start_no_second_one(
        ws: Path, monkeypatch: pytest.MonkeyPatch, gates: Gates, size: tuple[int, int]) -> None:
    gate = gates.on(run_list, "list_runs")  # home.py looks it up on the module
    monkeypatch.setattr(home_module, "LIST_EVERY_S", 0.05)  # many ticks while it hangs
    ticks = _count_calls(monkeypatch, HomeScreen, "_relist")
    async with _app_at(ws, HomeScreen, size) as (_app, pilot, home):
        await gate.held(pilot, "the listing blocked")
        runs, recipes = home.query_one("#runs", DataTable), home.query_one("#recipes", DataTable)
        assert home.focused is runs
        await pilot.press("tab")
        assert home.focused is recipes, "the key waited for the listing"
        await _ticks_pass(pilot, ticks, 5)
        assert gate.entered == 1 and runs.row_count == 0 and home.listing is None
        gate.opened.set()
        await wait_for(pilot, lambda: runs.row_count == 2, what="the runs listed")
        assert home.listing is not None and len(home.listing[0]) == 2


@async_test
async def test_following_a_log_that_hangs_holds_no_key_and_shows_the_new_lines(
        ws: Path, monkeypatch: pytest.MonkeyPatch, gates: Gates) -> None:
    gate = gates.on(trial_module, "read_more", logs_module.read_more)
    monkeypatch.setattr(trial_module, "FOLLOW_S", 0.05)
    ticks = _count_calls(monkeypatch, TrialLogScreen, "_follow")
    async with _matrix(ws) as (_app, pilot, _screen):
        logs = await _logs_of_a_trial(pilot)
        await gate.held(pilot, "the follow read blocked")
        shown = logs.current
        await pilot.press("s")
        assert logs.current != shown, "the key waited for the follow read"
        await _ticks_pass(pilot, ticks, 5)
        assert gate.entered == 1
        assert logs.trial_dir is not None
        with (logs.trial_dir / "stdout.log").open("a") as fh:
            fh.write("a line written while the read hung\n")
        gate.opened.set()
        widget = logs.query_one("#log-stdout-log", Log)
        await wait_for(pilot, lambda: "a line written while the read hung" in list(widget.lines),
                       what="the new line")


@async_test
async def test_a_trial_detail_whose_files_hang_opens_at_once_and_fills_in(
        ws: Path, gates: Gates) -> None:
    gate = gates.on(trial_module, "read_result")
    async with _matrix(ws, (100, 30)) as (app, pilot, _screen):
        screen = await _trial_selected(pilot)
        view = screen._selected_view()
        assert view is not None
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TrialDetailScreen), what="the detail")
        box = app.screen
        await gate.held(pilot, "result.json's read blocked")
        facts = box.query_one("#trial-facts-text")
        assert view.trial_id in str(facts.render())  # the journal's facts, drawn at once
        assert "directory:" in str(facts.render())
        assert str(box.query_one("#trial-tail").render()) == ""
        await pilot.press("l")  # handled while the read hangs
        assert isinstance(app.screen, TrialLogScreen)
        await pilot.press("escape")
        assert app.screen is box
        gate.opened.set()
        await wait_for(pilot, lambda: "──" in str(box.query_one("#trial-tail").render()), what="the tail")
        assert gate.entered == 1  # result.json is read once


def _gate_listing(gates: Gates, monkeypatch: pytest.MonkeyPatch, screen: str) -> Gate:
    """A gate on what ``screen``'s picker lists its candidates with."""
    if screen == "matrix":
        return gates.on(run_list, "list_runs")
    if screen == "envdiff":
        return gates.on(env_diff_module, "find_snapshots")
    if screen == "recipe":
        return gates.on(recipe_editor_module, "find_recipes")
    # the policy screen globs for its reports: only that glob waits
    gate = gates.add(Gate(Path.glob))
    real_glob = Path.glob

    def glob(self: Path, pattern: str, *args: Any, **kwargs: Any) -> Any:
        return (gate if pattern.startswith("aorta-policy/") else real_glob)(self, pattern, *args, **kwargs)

    monkeypatch.setattr(Path, "glob", glob)
    return gate


@pytest.mark.parametrize(("screen", "keys"), [("matrix", ("o",)), ("envdiff", ("escape", "o")),
                                              ("policy", ("escape", "o")), ("recipe", ("ctrl+o",))])
@async_test
async def test_a_picker_opens_at_once_and_takes_keys_while_its_listing_hangs(
        ws: Path, monkeypatch: pytest.MonkeyPatch, gates: Gates, screen: str, keys: tuple[str, ...]) -> None:
    gate = _gate_listing(gates, monkeypatch, screen)
    async with _app_at(ws, Screen, (100, 30), start=screen,
                       run=DEMO_RUN if screen == "matrix" else None) as (app, pilot, _first):
        await pilot.press(*keys)
        picker = app.screen
        assert isinstance(picker, PathPicker)  # at once: the keys after o land in it
        await gate.held(pilot, "the listing blocked")
        await pilot.press(*"aorta")  # typed while the listing hangs
        assert picker.query_one("#picker-path", Input).value == "aorta"
        assert picker.listing and gate.entered == 1
        gate.opened.set()
        await wait_for(pilot, lambda: not picker.listing, what="the list filled in")
        assert picker.query_one("#picker-path", Input).value == "aorta"  # kept
        if screen == "matrix":  # both runs of the workspace, under aorta-out/
            assert len(picker._shown) == 2


@async_test
@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
async def test_a_picker_whose_listing_fails_says_so_and_still_takes_a_typed_path(
        ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    def broken(output_dir: Path) -> list[run_list.RunInfo]:
        raise OSError(5, "Input/output error", str(output_dir))

    monkeypatch.setattr(run_list, "list_runs", broken)
    async with _matrix(ws) as (app, pilot, screen):
        await pilot.press("o")
        picker = app.screen
        assert isinstance(picker, PathPicker)
        await wait_for(pilot, lambda: not picker.listing, what="the listing's end")
        assert "listing failed: OSError" in picker.message and "Input/output error" in picker.message
        # absolute: the matrix's picker takes a typed path as the process's working directory
        # has it (a relative one passed here only because the old open_run set run_dir before
        # finding it was no run directory)
        await pilot.press(*str(ws / "aorta-out" / LIVE_RUN), "enter")
        await wait_for(pilot, lambda: app.screen is screen and screen.run_dir is not None
                       and screen.run_dir.name == Path(LIVE_RUN).name, what="the typed run opened")
        assert screen.state is not None and screen.state.run_dir == screen.run_dir


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_opening_a_run_whose_plan_hangs_holds_no_key_and_draws_it_when_read(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    gate = gates.on(matrix_state_module, "read_json_or_none")  # plan.json, read by MatrixState.for_run
    async with _app_at(ws, MatrixScreen, size, start="matrix") as (app, pilot, screen):
        run = ws / "aorta-out" / DEMO_RUN
        app.open_run(run)
        await gate.held(pilot, "plan.json's read blocked")
        assert "opening" in _summary(screen) and screen.state is None
        await _help_opens_and_closes(pilot, screen)  # handled while the read hangs
        screen.open_run(run)  # asked again (a second enter in the picker): no second read
        await gate.still_one_call(pilot)
        assert screen.run_dir is None
        gate.opened.set()
        await _grid_ready(pilot, screen)
        assert screen.run_dir == run.absolute() and gate.entered == 1
        assert "opening" not in _summary(screen)


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_a_run_that_is_no_run_directory_says_so_after_the_read(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    gate = gates.on(matrix_module, "read_run")
    async with _matrix(ws, size) as (app, pilot, screen):
        gate.opened.set()  # the demo run opens at once
        await _grid_ready(pilot, screen)
        gate.opened.clear()
        screen.open_run(ws / "nowhere")
        await gate.held(pilot, "the check blocked")
        await _cursor_answers(pilot, screen, "the check")  # the demo run still shown and answering
        assert screen.run_dir is not None and screen.run_dir.name == Path(DEMO_RUN).name
        gate.opened.set()
        await wait_for(pilot, lambda: any("is not a run directory" in n.message for n in app._notifications),
                       what="the located message")
        assert screen.run_dir.name == Path(DEMO_RUN).name  # the run shown stays


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_a_node_summary_that_hangs_holds_no_key_and_is_read_once(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    gate = gates.on(matrix_module, "node_line", lambda run_dir: "per node (Slurm): n1: 9 pass, 0 fail, 0 error")
    async with _matrix(ws, size) as (_app, pilot, screen):
        await _grid_ready(pilot, screen)  # a finished run: its summary asks for the node line
        await gate.held(pilot, "the node summary blocked")
        await _cursor_answers(pilot, screen, "the node summary")
        for _ in range(3):  # redraws while it hangs start no other read
            screen._dirty = True
            await wait_for(pilot, lambda: not screen._dirty, what="a redraw")
        assert gate.entered == 1 and "per node" not in _summary(screen)
        gate.opened.set()
        await wait_for(pilot, lambda: "per node (Slurm): n1: 9 pass" in _summary(screen), what="the node line")
        screen._dirty = True
        await wait_for(pilot, lambda: not screen._dirty, what="a redraw")
        assert gate.entered == 1  # read once per run


def _slurm_job_map(run: Path, node: str) -> None:
    """A ``slurm/jobs.json`` placing every trial of ``run``'s plan on ``node``."""
    plan = json.loads((run / "plan.json").read_text())
    trials = {t["trial_id"]: {"batch": "b0", "state": "COMPLETED", "node": node} for t in plan["trials"]}
    (run / "slurm").mkdir()
    (run / "slurm" / "jobs.json").write_text(json.dumps({"batches": {"b0": {"job_id": "7"}}, "trials": trials}))


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_a_job_map_read_that_hangs_holds_no_key_and_ticks_start_no_second_one(
        ws: Path, monkeypatch: pytest.MonkeyPatch, gates: Gates, size: tuple[int, int]) -> None:
    _slurm_job_map(ws / "aorta-out" / DEMO_RUN, "gpu07")
    gate = gates.on(matrix_module, "read_placement_file")
    ticks = _count_calls(monkeypatch, MatrixScreen, "_check_orchestrator")
    async with _matrix(ws, size) as (_app, pilot, screen):
        await gate.held(pilot, "the job map's read blocked")
        await _grid_ready(pilot, screen)
        grid = await _cursor_answers(pilot, screen, "the job map")
        await _ticks_pass(pilot, ticks, 2)
        assert gate.entered == 1 and "gpu07" not in str(grid.get_cell("none-none", "t0"))
        gate.opened.set()
        await wait_for(pilot, lambda: "gpu07" in str(grid.get_cell("none-none", "t0")), what="the node drawn")


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_a_log_view_whose_first_read_hangs_opens_at_once_and_r_reads_once(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    gate = gates.on(trial_module, "read_log")
    async with _matrix(ws, size) as (_app, pilot, _screen):
        logs = await _logs_of_a_trial(pilot)
        assert logs.trial_dir is not None
        await gate.held(pilot, "the first read blocked")
        shown = logs.current
        await pilot.press("s")
        assert logs.current != shown, "the key waited for the first read"
        await pilot.press("r", "r")  # a reload while the read hangs starts none
        await gate.still_one_call(pilot)
        gate.opened.set()
        widget = logs.query_one("#log-stdout-log", Log)
        expected = (logs.trial_dir / "stdout.log").read_text().splitlines()[0]
        await wait_for(pilot, lambda: expected in list(widget.lines), what="stdout.log drawn")
        assert gate.entered == 2  # stderr.log and stdout.log, once
        assert logs.current != shown  # the user's tab kept
        (logs.trial_dir / "stdout.log").write_text("rewritten\n")
        await pilot.press("r")  # released: r reads again
        await wait_for(pilot, lambda: list(widget.lines) == ["rewritten"], what="the reload drawn")
        assert gate.entered == 4


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_the_env_diff_keys_run_listing_that_hangs_holds_no_key_and_lists_once(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    gate = gates.on(matrix_module, "env_snapshots")
    async with _matrix(ws, size) as (app, pilot, _screen):
        screen = await _trial_selected(pilot)
        await pilot.press("E")
        await gate.held(pilot, "the listing blocked")
        grid = screen.query_one(MatrixGrid)
        before = grid.cursor_coordinate
        await pilot.press("E", "down")  # a second E starts no second listing
        assert grid.cursor_coordinate != before, "the key waited for the listing"
        assert gate.entered == 1 and app.screen is screen
        gate.opened.set()
        await wait_for(pilot, lambda: isinstance(app.screen, EnvDiffScreen), what="the env diff")
        diff = app.screen
        await wait_for(pilot, lambda: diff.query_one("#snap-b", Input).value.endswith("local.json"),
                       what="the snapshots filled in")
        assert diff.query_one("#snap-a", Input).value.endswith("host_env.json")
        assert gate.entered == 1


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_opening_a_recipe_that_hangs_holds_no_key_and_shows_it_when_read(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    recipe = _probe_recipe(ws, SLOW_RECIPE + "trials: 2\ncells:\n  - name: baseline\n    mitigations: [none]\n")
    gate = gates.on(recipe_editor_module, "read_recipe_for_edit")
    async with _app_at(ws, RecipeEditorScreen, size, start="recipe") as (_app, pilot, editor):
        editor.request_open(recipe)
        await gate.held(pilot, "the recipe's read blocked")
        assert "opening probe.yaml" in _file_line(editor)
        await pilot.press("e")  # handled while the read hangs
        assert editor.editing
        await pilot.press("escape")
        assert not editor.editing
        editor.open_file(recipe)  # ctrl+r's way in, again: no second read
        await gate.still_one_call(pilot)
        assert "SLOW-DISK" not in editor.editor.text
        gate.opened.set()
        await wait_for(pilot, lambda: editor.editor.text == recipe.read_text(), what="the recipe shown")
        assert editor.path == recipe and gate.entered == 1
        assert "opening" not in _file_line(editor)


@async_test
async def test_edits_typed_while_a_recipe_is_read_are_not_dropped_unasked(ws: Path, gates: Gates) -> None:
    recipe = _probe_recipe(ws)
    gate = gates.on(recipe_editor_module, "read_recipe_for_edit")
    async with _app_at(ws, RecipeEditorScreen, start="recipe") as (app, pilot, editor):
        editor.request_open(recipe)
        await gate.held(pilot, "the recipe's read blocked")
        await pilot.press("e", "ctrl+end", "x")  # typed while it is read
        assert editor.has_unsaved
        gate.opened.set()
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("n")  # keep them
        assert app.screen is editor and editor.has_unsaved and editor.path is None
        editor.request_open(recipe)  # asked again: y drops them
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: editor.path == recipe and editor.editor.text == recipe.read_text(),
                       what="the recipe shown")


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_rereading_a_recipe_changed_on_disk_holds_no_key_and_follows_it(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    recipe = _probe_recipe(ws)
    gate = gates.on(recipe_editor_module, "read_recipe_for_edit")
    gate.opened.set()  # the open reads at once
    async with _app_at(ws, RecipeEditorScreen, size, start="recipe") as (_app, pilot, editor):
        editor.request_open(recipe)
        await wait_for(pilot, lambda: editor.path == recipe and editor._watch_stop is not None, what="the open")
        await pilot.pause(0.3)  # the watch is under way
        gate.opened.clear()
        changed = recipe.read_text().replace("SLOW-DISK", "CHANGED")
        recipe.write_text(changed)
        await gate.held(pilot, "the reread blocked")
        await pilot.press("e")  # handled while the read hangs
        assert editor.editing
        await pilot.press("escape")
        recipe.write_text(changed)  # changed again while it reads: one more read, after this one
        await pilot.pause(0.5)
        assert gate.inside == 1 and gate.entered == 2  # the open's, then the one reread
        gate.opened.set()
        await wait_for(pilot, lambda: editor.editor.text == changed, what="the buffer following the file")


@async_test
async def test_a_recipe_that_cannot_be_opened_says_so_with_its_location(ws: Path) -> None:
    bad = ws / "bad.yaml"
    bad.write_bytes(b"schema_version: 1\x00")
    async with _app_at(ws, RecipeEditorScreen, start="recipe") as (app, pilot, editor):
        editor.open_file(bad)
        await wait_for(pilot, lambda: any("binary file" in n.message for n in app._notifications),
                       what="the located message")
        assert editor.path is None and "binary" not in editor.editor.text


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_opening_a_policy_report_that_hangs_holds_no_key_and_reads_once(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    run = ws / "aorta-policy" / "old"
    run.mkdir(parents=True)
    (run / "policy.json").write_text((FIXTURES / "policy" / "policy.json").read_text())
    gate = gates.on(PolicyReport, "from_json")
    async with _app_at(ws, PolicyScreen, size, start="policy") as (_app, pilot, screen):
        screen.load_report(run)  # the run directory: its policy.json, found by the worker
        await gate.held(pilot, "policy.json's read blocked")
        await pilot.press("f")  # handled while the read hangs
        assert screen.focused is screen.query_one("#pol-workload", Input)
        await pilot.press("escape")
        await _help_opens_and_closes(pilot, screen)
        screen.load_report(run)  # a second open while it reads starts none
        await gate.still_one_call(pilot)
        assert screen.report is None
        gate.opened.set()
        await wait_for(pilot, lambda: screen.report is not None, what="the report shown")
        assert gate.entered == 1 and "old/policy.json" in str(screen.query_one("#policy-status").render())


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_the_run_picker_takes_a_relative_path_as_the_apps_working_directory_has_it(
        tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the process runs elsewhere than the App's cwd
    # nothing listed: the typed path alone names the run (no list entry it narrows to)
    monkeypatch.setattr(run_list, "list_runs", lambda output_dir: [])
    async with _matrix(ws, size) as (app, pilot, screen):
        await _grid_ready(pilot, screen)
        await pilot.press("o")
        picker = app.screen
        assert isinstance(picker, PathPicker)
        await wait_for(pilot, lambda: not picker.listing, what="the listing's end")
        await pilot.press(*f"aorta-out/{LIVE_RUN}", "enter")
        await wait_for(pilot, lambda: app.screen is screen and screen.run_dir is not None
                       and screen.run_dir == ws / "aorta-out" / LIVE_RUN, what="the typed run opened")


def _picker_gate(gates: Gates, screen: str) -> tuple[Gate, str]:
    """A gate on what ``screen``'s picker checks a picked path with, and a path to type."""
    if screen == "envdiff":
        return gates.on(env_diff_module, "snapshot_problem"), "snaps/a.json"
    return gates.on(recipe_editor_module, "recipe_open_problem"), "probe.yaml"


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("screen", "keys"), [("envdiff", ("escape", "o")), ("recipe", ("ctrl+o",))])
@async_test
async def test_a_picked_path_whose_check_hangs_holds_no_key_and_is_checked_once(
        ws: Path, gates: Gates, screen: str, keys: tuple[str, ...], size: tuple[int, int]) -> None:
    (ws / "snaps").mkdir()
    (ws / "snaps" / "a.json").write_text((ws / "aorta-out" / DEMO_RUN / "env" / "host_env.json").read_text())
    _probe_recipe(ws)
    gate, typed = _picker_gate(gates, screen)
    async with _app_at(ws, Screen, size, start=screen) as (app, pilot, _first):
        await pilot.press(*keys)
        picker = app.screen
        assert isinstance(picker, PathPicker)
        await wait_for(pilot, lambda: not picker.listing, what="the listing's end")
        await pilot.press(*typed, "enter")
        await gate.held(pilot, "the check blocked")
        field = picker.query_one("#picker-path", Input)
        await pilot.press("end", "x")  # typed while the check hangs
        assert field.value == typed + "x", "the key waited for the check"
        await pilot.press("backspace", "enter")  # a second enter while it checks starts none
        await gate.still_one_call(pilot)
        assert app.screen is picker
        gate.opened.set()
        if screen == "envdiff":  # A picked: the picker stays for B, the field emptied
            await wait_for(pilot, lambda: "1 of 2 picked" in picker.message, what="A picked")
            assert field.value == "" and gate.entered == 1
        else:
            await wait_for(pilot, lambda: app.screen is not picker, what="the picker done")
            editor = app.screen
            assert isinstance(editor, RecipeEditorScreen)
            await wait_for(pilot, lambda: editor.path == ws / "probe.yaml", what="the recipe opened")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", ["[bold]x.yaml", "a[/]b.yaml"])
@async_test
async def test_a_recipe_whose_name_looks_like_markup_is_named_as_it_is(
        ws: Path, name: str, size: tuple[int, int]) -> None:
    recipe = ws / name  # "a[/]b.yaml": b.yaml in a folder "a[", shown as a[/]b.yaml
    recipe.parent.mkdir(exist_ok=True)
    recipe.write_text("schema_version: 1\nticket: ODD-NAME\nworkload: gpu_smoke\n")
    async with _app_at(ws, RecipeEditorScreen, size, start="recipe") as (_app, pilot, editor):
        editor.request_open(recipe)
        await wait_for(pilot, lambda: editor.path == recipe, what="the recipe opened")
        await pilot.pause()
        line = editor.query_one("#recipe-file", Static).render()
        assert name in str(line)  # the name as it is, not restyled nor cut at its brackets
        assert "bold" not in str(getattr(line, "spans", [])), "the name restyled the line"


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_a_diff_whose_snapshot_checks_hang_holds_no_key_and_diffs_once(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    env = ws / "aorta-out" / DEMO_RUN / "env"
    gate = gates.on(env_diff_module, "_resolve_snapshot")  # stats (a run directory stands for its snapshot)
    async with _app_at(ws, EnvDiffScreen, size, start="envdiff") as (_app, pilot, screen):
        screen.set_paths(env / "host_env.json", env / "local.json")  # and diffs them
        await gate.held(pilot, "the same-file check blocked")
        assert "diffing" in str(screen.query_one("#diff-summary", Static).render())
        await pilot.press("escape", "n")  # handled while the check hangs
        assert "numerics" not in screen.shown_ranks, "the key waited for the check"
        await pilot.press("n", "d")  # the same diff asked again: no second worker
        await gate.still_one_call(pilot)
        gate.opened.set()
        await wait_for(pilot, lambda: "differences" in str(screen.query_one("#diff-summary", Static).render()),
                       what="the differences shown")
        assert gate.entered == 2  # A and B, once


@pytest.mark.parametrize("size", SIZES)
@async_test
async def test_a_save_that_hangs_holds_no_key_and_keeps_what_was_typed_meanwhile(
        ws: Path, gates: Gates, size: tuple[int, int]) -> None:
    recipe = _probe_recipe(ws)
    gate = gates.on(recipe_editor_module, "atomic_write_text")
    async with _app_at(ws, RecipeEditorScreen, size, start="recipe") as (_app, pilot, editor):
        editor.request_open(recipe)
        await wait_for(pilot, lambda: editor.path == recipe, what="the recipe opened")
        await pilot.press("e", *"# one")
        saved = editor.editor.text
        await pilot.press("ctrl+s")
        await gate.held(pilot, "the write blocked")
        assert "saving" in _file_line(editor)
        await pilot.press(*" two")  # typed while the write hangs
        typed = editor.editor.text
        assert typed == saved.replace("# one", "# one two"), "the keys waited for the write"
        await pilot.press("ctrl+s")  # a second save while one writes starts none
        await gate.still_one_call(pilot)
        gate.opened.set()
        await wait_for(pilot, lambda: "saving" not in _file_line(editor), what="the save's answer")
        assert recipe.read_text() == saved  # what the buffer held at ctrl+s, atomically
        assert editor.has_unsaved and "modified" in _file_line(editor)  # " two" is not marked saved
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not editor.has_unsaved, what="the second save")
        assert recipe.read_text() == typed and gate.entered == 2


@async_test
async def test_a_new_recipe_is_saved_under_a_free_name_and_a_refused_write_says_why(
        ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "recipe.yaml").write_text("taken\n")
    async with _app_at(ws, RecipeEditorScreen, start="recipe") as (app, pilot, editor):
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: editor.path == ws / "recipe-2.yaml", what="the free name")
        assert (ws / "recipe-2.yaml").read_text() == editor.editor.text and not editor.has_unsaved

        def refused(path: Path, text: str) -> None:
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr(recipe_editor_module, "atomic_write_text", refused)
        await pilot.press("e", "x", "ctrl+s")
        await wait_for(pilot, lambda: any("cannot save" in n.message and "Permission denied" in n.message
                                          for n in app._notifications), what="the refusal")
        assert editor.has_unsaved and editor.path == ws / "recipe-2.yaml"
