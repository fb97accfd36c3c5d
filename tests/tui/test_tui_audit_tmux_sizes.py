"""Issue 16 items 2 and 3 in the real program under tmux at 80x24 and 160x48 (the issue asked
for both sizes; the picker had Pilot tests only, the editor a tmux test at 80x24 only).

From a fresh directory with the default output directory: the env-diff picker takes typed
paths (a snapshot named like the CLI help's `-o h200.json` included) and refuses A == B; the
editor opened by `aorta-tui edit FILE` turns screen keys into screens while viewing, digits
into text while editing, and asks before ctrl+q drops the edit."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from tmux_support import ENTRY, Tmux

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "recipes/examples/probe-bash.yaml"
SIZES = [(80, 24), (160, 48)]

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"), pytest.mark.slow]


@pytest.fixture
def tmux(request: pytest.FixtureRequest) -> Iterator[Tmux]:
    t = Tmux(f"aorta-audit-{os.getpid()}-{request.node.name}")
    try:
        yield t
    finally:
        t.kill()


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
def test_picker_takes_typed_paths_and_refuses_the_same_file(tmp_path: Path, tmux: Tmux,
                                                             size: tuple[int, int]) -> None:
    fixtures = REPO / "tests" / "fixtures" / "envsnap"
    shutil.copy(fixtures / "cpu-box.json", tmp_path / "a.json")
    shutil.copy(fixtures / "h200.json", tmp_path / "h200.json")  # not named *env*.json
    tmux.start([ENTRY], tmp_path, size)
    tmux.wait_for("Home")
    tmux.keys("5")
    tmux.wait_for("Env diff")
    tmux.keys("o")
    tmux.wait_for("h200.json")  # listed
    tmux.keys("a.json", literal=True)
    tmux.keys("Enter")
    tmux.wait_for("chosen:")
    tmux.keys("h200.json", literal=True)
    tmux.keys("Enter")
    screen = tmux.wait_for("differences")
    assert "no differences" not in screen
    assert "A a.json" in screen and "B h200.json" in screen

    tmux.keys("o")
    tmux.wait_for("Pick snapshot A")
    tmux.keys("a.json", literal=True)
    tmux.keys("Enter")
    tmux.wait_for("chosen:")
    tmux.keys("a.json", literal=True)
    tmux.keys("Enter")
    tmux.wait_for("already picked")


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x48"])
def test_edit_file_screen_keys_digits_and_the_discard_prompt(tmp_path: Path, tmux: Tmux,
                                                             size: tuple[int, int]) -> None:
    (tmp_path / "recipes" / "examples").mkdir(parents=True)
    shutil.copy(REPO / EXAMPLE, tmp_path / EXAMPLE)
    original = (tmp_path / EXAMPLE).read_text()
    tmux.start([ENTRY, "edit", EXAMPLE], tmp_path, size)
    tmux.wait_for("VIEWING")
    tmux.keys("3")  # viewing: a screen key, not text
    tmux.wait_for("Matrix")
    tmux.keys("2")
    screen = tmux.wait_for("VIEWING")
    assert "modified" not in screen
    for key in ("e", "Home", "4", "2"):
        tmux.keys(key)
    screen = tmux.wait_for("42")
    assert "EDITING" in screen and "modified" in screen and "Trace monitor" not in screen  # 4 was text, not the screen key
    tmux.keys("C-q")
    tmux.wait_for("Discard your unsaved changes")
    tmux.keys("n")  # keeps editing
    screen = tmux.wait_for("EDITING")
    assert "42" in screen
    tmux.keys("C-q")
    tmux.wait_for("Discard your unsaved changes")
    tmux.keys("y")
    assert tmux.gone(), "y did not quit"
    assert (tmp_path / EXAMPLE).read_text() == original
