"""GPU control always restores the previous state (fake backend only: never the real tools)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aorta_tui.policy.gpu_control import (
    FakeBackend,
    GpuControl,
    GpuControlError,
    backend_from_spec,
    level_to_clock,
)
from aorta_tui.policy.presets import GpuControlSettings

ORIGINAL = {"clock_level": None, "power_limit_w": 700}


def _state(path: Path) -> dict:
    return json.loads(path.read_text())["0"]


def test_applies_then_restores(tmp_path: Path) -> None:
    fake = FakeBackend(tmp_path / "gpu.json")
    settings = GpuControlSettings(clock_level=2, power_limit_w=150)
    with GpuControl(fake, 0, settings):
        assert _state(fake.path) == {"clock_level": 2, "power_limit_w": 150}
    assert _state(fake.path) == ORIGINAL
    assert fake.calls[-1] == "restore"


def test_restores_when_the_run_raises(tmp_path: Path) -> None:
    fake = FakeBackend(tmp_path / "gpu.json")
    with pytest.raises(RuntimeError), GpuControl(fake, 0, GpuControlSettings(clock_level=7)):
        assert _state(fake.path)["clock_level"] == 7
        raise RuntimeError("workload crashed")
    assert _state(fake.path) == ORIGINAL


def test_restores_on_keyboard_interrupt(tmp_path: Path) -> None:
    fake = FakeBackend(tmp_path / "gpu.json")
    with pytest.raises(KeyboardInterrupt), GpuControl(fake, 0, GpuControlSettings(power_limit_w=99)):
        raise KeyboardInterrupt
    assert _state(fake.path) == ORIGINAL


def test_partial_apply_is_restored(tmp_path: Path) -> None:
    fake = FakeBackend(tmp_path / "gpu.json", fail_on="power_limit_w")
    with pytest.raises(GpuControlError), GpuControl(fake, 0, GpuControlSettings(clock_level=5,
                                                                                power_limit_w=200)):
        pytest.fail("the body must not run when apply failed")
    assert "apply:clock_level=5" in fake.calls and "apply-failed:power_limit_w" in fake.calls
    assert _state(fake.path) == ORIGINAL


def test_restore_is_idempotent_and_plan_changes_nothing(tmp_path: Path) -> None:
    fake = FakeBackend(tmp_path / "gpu.json")
    ctl = GpuControl(fake, 0, GpuControlSettings(clock_level=3))
    plan = ctl.plan()
    assert any(line.startswith("apply:") for line in plan)
    assert any(line.startswith("restore:") for line in plan)
    assert not fake.path.exists()  # planning read the state and wrote nothing
    with ctl:
        pass
    ctl.restore()
    assert fake.calls.count("restore") == 1


CHILD = textwrap.dedent("""
    import sys, time
    from aorta_tui.policy.gpu_control import FakeBackend, GpuControl
    from aorta_tui.policy.presets import GpuControlSettings
    fake = FakeBackend(sys.argv[1])
    mode = sys.argv[2]
    ctl = GpuControl(fake, 0, GpuControlSettings(clock_level=1, power_limit_w=123))
    if mode == "signal":
        with ctl:
            print("applied", flush=True)
            while True:
                time.sleep(0.05)
    else:  # leaves the block open and exits: the atexit hook restores
        ctl.__enter__()
        print("applied", flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_restores_when_the_process_is_signalled(tmp_path: Path, sig: int) -> None:
    state = tmp_path / "gpu.json"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(state), "signal"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "applied"
        assert _state(state) == {"clock_level": 1, "power_limit_w": 123}
        os.kill(proc.pid, sig)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0  # it was interrupted, not finished
    assert _state(state) == ORIGINAL


def test_restores_at_exit(tmp_path: Path) -> None:
    state = tmp_path / "gpu.json"
    out = subprocess.run([sys.executable, "-c", CHILD, str(state), "atexit"],
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "applied", out.stderr
    assert _state(state) == ORIGINAL


def test_level_maps_onto_supported_clocks() -> None:
    clocks = [345, 1980, 600, 1200, 1500]
    assert level_to_clock(0, clocks) == 345
    assert level_to_clock(7, clocks) == 1980
    assert 345 < level_to_clock(4, clocks) < 1980
    with pytest.raises(GpuControlError):
        level_to_clock(3, [])


def test_backend_spec(tmp_path: Path) -> None:
    assert isinstance(backend_from_spec(f"fake:{tmp_path / 's.json'}"), FakeBackend)
    with pytest.raises(Exception, match="unknown GPU control backend"):
        backend_from_spec("magic")
