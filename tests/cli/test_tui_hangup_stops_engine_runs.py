"""A TUI whose terminal hung up leaves at once (exit 129) and first asks the engine runs it
started (a trace, a policy sweep) to stop, as a screen's unmount does on ctrl+q: they run in
sessions of their own, so the hangup never reaches them, and before this a trace went on
tracing with nobody to read it (issue 36's closing note of 2026-12-05).

Real processes: a front end that starts an EngineRun (a child that records the SIGINT it gets)
and then takes SIGHUP with no terminal on stdin, through the TUI's own handler
(``cli/tui_launch._StopSignals``) and through the terminal watcher's way out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engine_support import process_alive

CHILD = """\
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "a").write("SIGINT\\n")
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
open(sys.argv[2], "w").write("ready")
time.sleep(60)
"""

FRONT_END = """\
import asyncio, os, pathlib, signal, sys, time
from aorta_tui.cli import tui_launch
from aorta_tui.relay.engine_run import EngineRun

child, got, ready, how = sys.argv[1:5]
run = EngineRun([], argv=[sys.executable, child, got, ready],
                stderr_path=pathlib.Path(got).with_suffix(".log")).start()
print(run.pid, flush=True)
while not os.path.exists(ready):
    time.sleep(0.02)
if how == "watcher":
    tui_launch.leave_hung_up()

class App:  # what _StopSignals asks of the App: exit(), never reached on a hangup
    def exit(self):
        raise AssertionError("a hung-up terminal has nothing to give back")

async def main():
    with tui_launch._StopSignals(App()):
        os.kill(os.getpid(), signal.SIGHUP)
        await asyncio.sleep(30)

asyncio.run(main())
"""


def _as_from_a_terminal() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.parametrize("how", ["signal", "watcher"])
def test_a_hangup_asks_the_tuis_engine_runs_to_stop(tmp_path: Path, how: str) -> None:
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "front.py").write_text(FRONT_END)
    got, ready = tmp_path / "got.txt", tmp_path / "ready"
    # started as a terminal starts it: a SIGHUP ignored by whoever started the suite (nohup, as
    # CI runs it) would stay ignored in the front end (on purpose: cli/tui_launch), and no
    # hangup would come
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "front.py"), str(tmp_path / "child.py"), str(got),
         str(ready), how], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()}, preexec_fn=_as_from_a_terminal)
    assert proc.returncode == 129, proc.stderr
    child_pid = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 10
    while process_alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(child_pid)  # it stopped, not orphaned to run on
    assert got.read_text() == "SIGINT\n"  # asked as the screens ask: SIGINT, a clean stop


def test_with_no_engine_run_started_leaving_imports_nothing(tmp_path: Path) -> None:
    """The bare TUI with no run never imported the relay: leaving costs no import."""
    code = ("import sys\nfrom aorta_tui.cli import tui_launch\n"
            "assert 'aorta_tui.relay.engine_run' not in sys.modules\n"
            "tui_launch.leave_hung_up()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.returncode == 129, proc.stderr
