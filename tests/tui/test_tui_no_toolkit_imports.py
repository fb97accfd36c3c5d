"""The headless paths never import textual or rich (they must start fast and work without a TTY)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
sys.argv = {argv!r}
try:
    {body}
except SystemExit:
    pass
print("MODULES=" + json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))))
"""


def _ui_modules(body: str, argv: list[str], cwd: Path = REPO) -> list[str]:
    code = PROBE.format(argv=argv, body=body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd,
                         timeout=60, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("MODULES=")]
    assert lines, f"probe did not finish: {out.stderr[-2000:]}"
    return json.loads(lines[-1].split("=", 1)[1])


RUN_CLI = "from aorta_tui.cli.main import run; run()"


@pytest.mark.parametrize(
    "argv",
    [
        ["aorta-tui", "--help"],
        ["aorta-tui", "--version"],
        ["aorta-tui", "sweep", "--help"],
        ["aorta-tui", "env", "--help"],
        ["aorta-tui", "attach", "--help"],
    ],
)
def test_cli_help_paths_import_no_ui_toolkit(argv: list[str]) -> None:
    assert _ui_modules(RUN_CLI, argv) == []


def test_importing_the_cli_and_engine_imports_no_ui_toolkit() -> None:
    body = "import aorta_tui.cli.main, aorta_tui.core.events, aorta_tui.store.journal_follow, aorta_tui.cli.follow_plain"
    assert _ui_modules(body, ["x"]) == []


def test_batch_dry_run_imports_no_ui_toolkit(tmp_path: Path) -> None:
    # --batch is headless: even when stdout is a pipe and the sweep engine runs, no toolkit.
    argv = ["aorta-tui", "--batch", str(REPO / "recipes" / "quickstart.yaml"), "--dry-run",
            "--output", str(tmp_path)]
    assert _ui_modules(RUN_CLI, argv) == []


def test_the_tui_itself_does_import_textual() -> None:
    # The probe above can fail: importing the app does pull textual in.
    assert "textual" in _ui_modules("import aorta_tui.tui.app", ["x"])


def test_python_m_help_runs_without_a_terminal() -> None:
    out = subprocess.run([sys.executable, "-m", "aorta_tui", "--help"], capture_output=True, text=True,
                         cwd=REPO, timeout=60, check=False)
    assert out.returncode == 0
    assert "attach" in out.stdout


def test_no_tty_gives_a_clear_error_not_a_tui() -> None:
    out = subprocess.run([sys.executable, "-m", "aorta_tui"], capture_output=True, text=True, cwd=REPO,
                         timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert "needs a terminal" in out.stderr
    assert "--batch" in out.stderr
    assert "\x1b[" not in out.stdout + out.stderr  # no escape codes written to a non-terminal
