"""A Python that cannot import Textual (a GPU box's own torch environment, say) gets a sentence
with the fix and exit 3 when it opens the TUI: not exit 70 and a traceback (seen on the H200)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import pytest

BLOCK_TEXTUAL = "import sys; sys.modules['textual'] = None; from aorta_tui.cli.main import run; sys.argv = ['aorta-tui']; run()"


@pytest.mark.skipif(shutil.which("script") is None, reason="util-linux `script` gives the TUI a terminal")
def test_tui_without_textual_says_what_to_install() -> None:
    cmd = f"{shlex.quote(sys.executable)} -c {shlex.quote(BLOCK_TEXTUAL)}; echo exit=$?"
    out = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    assert "exit=3" in text, text
    assert "the TUI needs textual" in text and "pip install textual" in text
    assert "Traceback" not in text and "internal error" not in text
