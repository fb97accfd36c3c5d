"""Issue 38, the first minute: the TUI's first frame neither imports nor probes torch, and a
bare ``aorta-tui`` does not build the command line (typer and every command module) first.

The real program in a pseudo-terminal, as a user starts it; a ``sitecustomize`` on its
PYTHONPATH writes the modules it imported when it exits (after its first frame and the Home
screen's facts thread, then ctrl+q). Speed itself is measured in benchmarks/first_frame.py."""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a real TUI in a pty

SITECUSTOMIZE = """\
import atexit, json, os, sys
def _dump():
    with open(os.environ["AORTA_TEST_MODULES_OUT"], "w") as fh:
        json.dump(sorted(sys.modules), fh)
atexit.register(_dump)
"""


def _first_frame_modules(tmp_path: Path) -> list[str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.update(TERM="xterm-256color", LANG="C.UTF-8", PYTHONPATH=str(site),
               AORTA_TEST_MODULES_OUT=str(out), AORTA_TUI_OUTPUT=str(tmp_path / "out"))
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "aorta_tui"], stdin=slave, stdout=slave,
                            stderr=slave, env=env, cwd=tmp_path, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"trace monitor" not in seen and time.monotonic() < deadline:
            ready, _w, _x = select.select([master], [], [], 0.2)
            if ready:
                seen += os.read(master, 65536)
        assert b"trace monitor" in seen, "no first frame"
        end = time.monotonic() + 3  # the Home screen's facts (trace engine, sysfs) are gathered
        while time.monotonic() < end:
            if select.select([master], [], [], 0.2)[0]:
                os.read(master, 65536)
        os.write(master, b"\x11")  # ctrl+q
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return json.loads(out.read_text())


def test_the_first_frame_path_imports_no_torch_and_no_command_line(tmp_path: Path) -> None:
    modules = _first_frame_modules(tmp_path)
    assert "textual.app" in modules  # it did run the TUI
    assert not [m for m in modules if m == "torch" or m.startswith(("torch.", "nvidia."))]
    # the command line (typer, click, the command modules) is not built for a bare aorta-tui
    assert "typer" not in modules and "aorta_tui.cli.main" not in modules
    assert not [m for m in modules if m.endswith("_cmd") and m.startswith("aorta_tui.cli.")]
