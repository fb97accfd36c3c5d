"""Issue 38 items 1, 3, 7 and 8: what a newcomer saw in the TUI, done as they did it through
Textual's pilot (and, for what is printed after quitting, the real program under tmux). The SVG
snapshots of the same states are in test_tui_snapshots.py."""

from __future__ import annotations

import html
import os
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest
from textual.widgets import Input, OptionList, Static
from tui_support import (
    FIXED_FACTS,
    FIXTURES,
    LAUNCHING,
    PROBE_COMMAND,
    async_test,
    launching_run,
    open_in_editor,
    wait_for,
    workspace,
    write_probe_recipe,
)

from aorta_tui.store.lock import RunLock
from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.screens.dialogs import ConfirmScreen
from aorta_tui.tui.screens.pickers import PathPicker
from aorta_tui.tui.widgets.matrix_grid import MatrixGrid

pytestmark = pytest.mark.slow  # real processes, the real journal follower

REPO = Path(__file__).resolve().parents[2]


def _app(root: Path, **kwargs) -> AortaApp:  # noqa: ANN003
    return AortaApp(cwd=root, output_dir=root / "aorta-out", machine_facts=FIXED_FACTS, **kwargs)


def screen_text(app: AortaApp) -> list[str]:
    """The screen as the user reads it: the rows of the app's own SVG screenshot."""
    rows: dict[int, list[tuple[float, str]]] = {}
    pattern = (r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" '
               r'clip-path="url\(#[^)]*line-(\d+)\)">([^<]*)</text>')
    for m in re.finditer(pattern, app.export_screenshot()):
        rows.setdefault(int(m.group(2)), []).append((float(m.group(1)), html.unescape(m.group(3))))
    out = []
    for line in sorted(rows):
        text = ""
        for x, part in sorted(rows[line]):
            text = text.ljust(int(round(x / 12.2))) + part
        out.append(text.replace("\xa0", " ").rstrip())
    return out


@async_test
async def test_a_launching_trial_is_shown_running(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    run = launching_run(root)
    lock = RunLock(run)
    lock.acquire()  # its orchestrator is alive
    try:
        app = _app(root, start_run=run)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.state is not None and screen.events_seen >= 10
                           and screen.query_one(MatrixGrid).row_count == 3, what="the grid")
            await pilot.pause(0.5)
            assert [v.trial_id for v in screen.state.running] == [LAUNCHING]
            summary = str(screen.query_one("#matrix-summary", Static).render())
            assert "▶ 1" in summary
            grid = screen.query_one(MatrixGrid)
            row = screen.state.cells.index("cuda_launch_blocking-none")
            assert grid.get_cell_at((row, 1 + 1)).plain.strip() == "▶"
            from aorta_tui.core.events import TrialStarted
            from aorta_tui.tui.screens.trial import trial_facts

            view = screen.state.trials[("cuda_launch_blocking-none", 1)]
            assert "running (starting)" in trial_facts(view, None)[0]
            # once started it is plainly running, whatever pid the journal holds (may be null)
            screen.state.apply(TrialStarted(run.name, trial_id=LAUNCHING, trial=1, pid=None,
                                            cell="cuda_launch_blocking-none"))
            assert "(starting)" not in trial_facts(view, None)[0]
    finally:
        lock.release()


# item 7 -------------------------------------------------------------------------------------

@async_test
async def test_a_failed_launch_is_one_readable_line(tmp_path: Path) -> None:
    path = write_probe_recipe(tmp_path)
    app = _app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        editor = await open_in_editor(app, pilot, path)
        editor.query_one("#probe-command", Input).value = ""  # a probe recipe with no command
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: any(n.severity == "error" for n in app._notifications),
                       timeout=30, what="the launch's error")
        (note,) = [n for n in app._notifications if n.severity == "error"]
        message = str(note.message)
        assert "\n" not in message and '"event"' not in message and "{" not in message, message
        assert "the sweep did not start" in message and "no command was given" in message
        assert "fix: put the command after `--`" in message


@async_test
async def test_the_cancel_question_counts_the_trials_left_now(tmp_path: Path) -> None:
    import subprocess
    import sys

    run = tmp_path / "aorta-out" / "T" / "r1"
    writer = subprocess.Popen([sys.executable, str(Path(__file__).with_name("tui_journal_writer.py")),
                               str(run), "a,b", "3", "1.0"], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "started"
        app = _app(tmp_path, start_run=run)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.state is not None and screen.state.total == 6,
                           what="the run")
            await pilot.press("c")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
            detail = app.screen.query_one("#confirm-detail", Static)
            first = str(detail.render())
            left = int(re.search(r"(\d+) trial\(s\) stay undone", first).group(1))
            await wait_for(pilot, lambda: f"{left - 1} trial(s) stay undone" in str(detail.render()),
                           timeout=10, what="the count to follow the run")
            await pilot.press("n")
    finally:
        writer.kill()
        writer.wait()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_quitting_while_a_sweep_runs_says_it_runs_on_and_how_to_attach(tmp_path: Path,
                                                                       monkeypatch) -> None:
    from tmux_support import ENTRY, Tmux

    from aorta_tui.relay.launch import cancel_run, launch_detached

    monkeypatch.setenv("TUI_TEST_SLEEP", "2")
    recipe = write_probe_recipe(tmp_path, trials=5)
    run_dir = launch_detached(recipe, tmp_path / "aorta-out", command=PROBE_COMMAND)
    shown = str(run_dir.relative_to(tmp_path))
    tmux = Tmux(f"aorta-tui-first-hour-{os.getpid()}")
    try:
        tmux.start(f"{ENTRY} attach {shlex.quote(shown)}; sleep 30", tmp_path, size=(80, 24))
        tmux.wait_for(run_dir.name)
        tmux.keys("C-q")
        screen = tmux.wait_for("runs on", timeout=20)
        assert f"the sweep {shown} runs on" in screen
        assert f"aorta-tui attach {shown}" in screen
    finally:
        tmux.kill()
        cancel_run(run_dir)
        deadline = time.monotonic() + 30
        from aorta_tui.store.lock import lock_holder

        while lock_holder(run_dir) is not None and time.monotonic() < deadline:
            time.sleep(0.2)


# item 8 -------------------------------------------------------------------------------------

@async_test
async def test_every_footer_holds_its_keys_whole_at_80_columns(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    app = _app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        for key in ("1", "2", "escape", "3", "4", "5", "6"):
            await pilot.press(key)
            await pilot.pause(0.6)
            screen = app.screen
            footer = screen_text(app)[-1]
            shown = [b for b in screen.active_bindings.values()
                     if b.binding.show and b.enabled]
            for active in shown:
                label = f"{app.get_key_display(active.binding)} {active.binding.description}"
                assert label in footer, (type(screen).__name__, label, footer)
            assert "? Help" in footer and "^q Quit" in footer, (type(screen).__name__, footer)


@async_test
async def test_homes_started_column_is_whole_at_80_columns(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        root = workspace(tmp_path)
        app = _app(root)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(1.5)
            rows = [ln for ln in screen_text(app) if "TUI-DEMO/" in ln]
            assert len(rows) == 2
            for row in rows:
                assert re.search(r"\b11-29 \d\d:\d\d$", row), row
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@async_test
async def test_the_env_diff_picker_lists_snapshots_whole_and_no_queue_or_policy_json(
        tmp_path: Path) -> None:
    root = workspace(tmp_path)
    # the quickstart's run, as the newcomer had it: a 10-letter ticket, a run id, env/host_env.json
    run = root / "aorta-out" / "QUICKSTART" / "20261203-170102-ab12"
    (run / "env").mkdir(parents=True)
    shutil.copy(FIXTURES / "env" / "cpu-box-plain.json", run / "env" / "host_env.json")
    shutil.copy(REPO / "tests" / "fixtures" / "hwqueue" / "run-cpu.json", root / "base.json")
    shutil.copy(FIXTURES / "policy" / "policy.json", root / "policy.json")
    app = _app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await pilot.pause(0.3)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, PathPicker), what="the picker")
        options = app.screen.query_one("#picker-list", OptionList)
        listed = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert "base.json" not in listed and "policy.json" not in listed
        assert "policy/policy.json" not in listed
        await pilot.pause(0.3)
        text = "\n".join(screen_text(app))
        assert "aorta-out/QUICKSTART/20261203-170102-ab12/env/host_env.json" in text, text


@async_test
async def test_the_matrix_help_lists_what_the_footer_and_the_docs_name(tmp_path: Path) -> None:
    from aorta_tui.tui.screens.help import HelpScreen

    docs = (REPO / "docs" / "tui.md").read_text(encoding="utf-8")
    matrix_docs = docs.split("**Matrix**", 1)[1].split("![trace monitor]", 1)[0]
    # "`w` and `E` are in `?` and the palette, not the footer"
    said = re.search(r"((?:`\w+`(?:, | and )?)+) are in `\?` and the palette, not the footer",
                     matrix_docs)
    off_footer = set(re.findall(r"`(\w+)`", said.group(1))) if said else set()
    root = workspace(tmp_path)
    app = _app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await pilot.pause(0.5)
        footer = screen_text(app)[-1]
        matrix = app.screen
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
        for binding in matrix.BINDINGS:
            if binding.action == "focus_main":
                continue
            key = binding.key_display or binding.key
            in_footer = f"{key} {binding.description}" in footer
            in_docs = f"`{key}`" in matrix_docs
            assert in_docs, (key, binding.description)
            assert in_footer or key in off_footer or key == "enter", (key, footer)
        assert off_footer, "docs/tui.md names no matrix key that is off the footer"
