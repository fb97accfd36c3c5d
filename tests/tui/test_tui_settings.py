"""Issue 36 item 6: settings are handed to the App; screens never read the environment."""

from __future__ import annotations

import ast
from pathlib import Path

from aorta_tui.tui.settings import TuiSettings

SCREENS = Path(__file__).resolve().parents[2] / "aorta_tui" / "tui" / "screens"


def test_the_environment_is_read_once_into_settings() -> None:
    got = TuiSettings.from_environment({"AORTA_TUI_OUTPUT": "/runs", "AORTA_TUI_THEME": "LIGHT",
                                        "AORTA_TUI_METRICS": " 127.0.0.1:9600 ",
                                        "AORTA_TUI_METRICS_PUBLIC": "1"})
    assert got == TuiSettings(Path("/runs"), True, "127.0.0.1:9600", True)
    bare = TuiSettings.from_environment({"AORTA_TUI_METRICS": "  "})
    assert bare.output_dir == Path("aorta-out") and not bare.light
    assert bare.metrics_addr is None and not bare.metrics_public


def test_no_screen_reads_the_environment() -> None:
    offenders = []
    for path in sorted(SCREENS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") \
                    and isinstance(node.value, ast.Name) and node.value.id == "os":
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == [], "read it into tui/settings.py and hand it to the App: " + ", ".join(offenders)
