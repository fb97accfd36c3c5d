"""Shared helpers of the TUI tests: fixture workspaces, real sweeps, waiting on the app."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from aorta_tui.tui.machine import MachineFacts

if TYPE_CHECKING:
    from aorta_tui.tui.app import AortaApp

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURES = HERE / "fixtures"
DEMO_RUN = "TUI-DEMO/20261129-091438-655f"
LIVE_RUN = "TUI-DEMO/20261129-101500-live"

# Fixed facts keep the home screen's snapshot the same on every machine.
FIXED_FACTS = MachineFacts(
    gpus=["NVIDIA H200 (0000:18:00.0)"],
    gpu_source="sysfs PCI ids + nvidia-smi",
    bpftrace="bpftrace 0.17.0 (/usr/bin/bpftrace); probe sets usable here: cuda, ioctl",
    privileges="root (via sudo by alice)",
)

PROBE_RECIPE = """\
schema_version: 1
mode: probe
ticket: TUI-TEST
trials: {trials}
timeout_per_trial: 30
mitigation_axis: [none, cuda_launch_blocking]
diagnostic_axis: [none]
"""

# Fails in the cuda_launch_blocking cell (with a CUDA error line for the log detectors).
PROBE_COMMAND = [
    "bash", "-c",
    'echo "step ok"; sleep "${TUI_TEST_SLEEP:-0.05}"; '
    'if [ -n "$CUDA_LAUNCH_BLOCKING" ]; then echo "CUDA error: an illegal memory access" >&2; exit 3; fi',
]


def workspace(tmp_path: Path) -> Path:
    """A copy of the fixture runs and snapshots under ``tmp_path`` (tests may write there)."""
    shutil.copytree(FIXTURES / "aorta-out", tmp_path / "aorta-out")
    shutil.copytree(FIXTURES / "env", tmp_path / "env")
    shutil.copytree(FIXTURES / "policy", tmp_path / "policy")
    return tmp_path


def app_in(directory: Path) -> AortaApp:
    """The app on ``directory`` with its runs in ``directory/out`` and the fixed machine facts."""
    from aorta_tui.tui.app import AortaApp

    return AortaApp(cwd=directory, output_dir=directory / "out", machine_facts=FIXED_FACTS)


def write_probe_recipe(directory: Path, trials: int = 2) -> Path:
    path = directory / "probe.yaml"
    path.write_text(PROBE_RECIPE.format(trials=trials))
    return path


def run_probe_sweep(directory: Path, trials: int = 2, sleep_s: float = 0.05) -> Path:
    """A real headless sweep (the engine's `--batch`); returns its run directory."""
    recipe = write_probe_recipe(directory, trials)
    out = directory / "aorta-out"
    env = {**os.environ, "TUI_TEST_SLEEP": str(sleep_s)}
    subprocess.run([sys.executable, "-m", "aorta_tui", "--batch", str(recipe), "--output", str(out),
                    "--", *PROBE_COMMAND], check=True, capture_output=True, cwd=directory, env=env,
                   timeout=120)
    runs = sorted((out / "TUI-TEST").iterdir())
    return runs[-1]


async def wait_for(pilot, predicate: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:  # noqa: ANN001
    """Let the app run until ``predicate()`` holds (fails the test after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await pilot.pause(0.05)
        await asyncio.sleep(0)


def bpftrace_descendants() -> list[int]:
    """Pids of bpftrace processes started (directly or through workers) by this test process."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        parents[int(entry.name)] = (int(fields[1]), comm)
    me, found = os.getpid(), []
    for pid, (_ppid, comm) in parents.items():
        if comm != "bpftrace":
            continue
        cursor = pid
        while cursor in parents and cursor > 1:
            cursor = parents[cursor][0]
            if cursor == me:
                found.append(pid)
                break
    return found

def async_test(fn: Callable[..., object]) -> Callable[..., None]:
    """Run an ``async def`` test on a fresh event loop (no asyncio plugin needed)."""
    import functools
    import inspect

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> None:
        asyncio.run(fn(*args, **kwargs))  # type: ignore[arg-type]

    wrapper.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return wrapper


async def replay_in_monitor(app: AortaApp, pilot, recording: Path):  # noqa: ANN001, ANN201
    """Open the trace monitor and replay ``recording`` (recorded snapshots) through the real
    trace worker process; return the screen once the recording has ended."""
    from textual.widgets import Input

    from aorta_tui.tui.screens.trace_monitor import TraceMonitorScreen

    if not isinstance(app.screen, TraceMonitorScreen):
        await pilot.press("4")
    screen = app.screen
    assert isinstance(screen, TraceMonitorScreen)
    screen.query_one("#trace-target", Input).value = f"replay {recording}"
    await pilot.press("escape", "s")
    await wait_for(pilot, lambda: "exit" in screen.status and not screen.tracing, timeout=30,
                   what="the recording to end")
    await pilot.pause(0.2)  # the last redraw
    return screen


async def open_in_editor(app: AortaApp, pilot, path: Path):  # noqa: ANN001, ANN201
    """Open ``path`` in the recipe editor; return the screen once its first check ran on it."""
    from aorta_tui.tui.screens.recipe_editor import RecipeEditorScreen

    await pilot.pause()
    app.open_recipe(path)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, RecipeEditorScreen)
    await wait_for(pilot, lambda: screen.checks_done > 0 and screen.editor.text == path.read_text())
    return screen


def _append(journal: Path, *events: dict) -> None:
    with journal.open("a", encoding="utf-8") as fh:
        for event in events:
            fh.write(json.dumps(event) + "\n")


# item 1 -------------------------------------------------------------------------------------

LAUNCHING = "cuda_launch_blocking-none/trial-001"  # issue 38 item 1


def launching_run(root: Path) -> Path:
    """The recorded live run, its running trial finished and the next one launching: its
    ``trial_launch`` is in the journal, its ``trial_started`` not yet (the 3-7 s start-up)."""
    run = root / "aorta-out" / LIVE_RUN
    rid = run.name
    _append(run / "journal.jsonl",
            {"event": "trial_finished", "run_id": rid, "ts": 1795943683.1, "verdict": "error",
             "trial_id": "hip_launch_blocking-none/trial-001", "cell": "hip_launch_blocking-none",
             "trial": 1, "exit_code": None, "signal": 15, "wall_s": 2.0, "detectors": ["timeout"],
             "reason": "timed out after 2.0 s; the process tree was killed",
             "trial_dir": "trials/hip_launch_blocking-none/trial-001", "mean_step_s": 2.0},
            {"event": "trial_launch", "run_id": rid, "ts": 1795943683.2, "trial_id": LAUNCHING,
             "cell": "cuda_launch_blocking-none", "trial": 1, "attempt": 1, "identity": []})
    return run
