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


# -- the real backends' commands, against stand-in vendor tools on PATH (never the real ones) --

FAKE_NVIDIA_SMI = """#!/bin/sh
echo "$*" >> "$TOOL_LOG"
case "$*" in
  *--query-gpu=power.limit*) echo "700.00, 700.00" ;;
  *--query-supported-clocks*) printf '1980\\n1500\\n345\\n' ;;
  *"-pl 150"*) [ -n "$FAIL_POWER" ] && { echo "Insufficient Permissions" >&2; exit 4; } ;;
esac
exit 0
"""

FAKE_ROCM_SMI = """#!/bin/sh
echo "$*" >> "$TOOL_LOG"
case "$*" in
  *--showperflevel*) echo '{"card0": {"Performance Level": "auto", "Max Graphics Package Power (W)": "550.0"}}' ;;
esac
exit 0
"""


def _tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("nvidia-smi", FAKE_NVIDIA_SMI), ("rocm-smi", FAKE_ROCM_SMI)):
        tool = bin_dir / name
        tool.write_text(text)
        tool.chmod(0o755)
    log = tmp_path / "tool.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("TOOL_LOG", str(log))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return log


def _calls(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "--query" not in line
            and "--show" not in line]


def test_nvidia_backend_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aorta_tui.policy.gpu_control import NvidiaSmiBackend

    log = _tools(tmp_path, monkeypatch)
    with GpuControl(NvidiaSmiBackend(), 0, GpuControlSettings(clock_level=7, power_limit_w=150)):
        assert _calls(log) == ["-i 0 -lgc 1980,1980", "-i 0 -pl 150"]
    assert _calls(log)[2:] == ["-i 0 -rgc", "-i 0 -pl 700"]


def test_nvidia_backend_failure_still_restores(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from aorta_tui.policy.gpu_control import NvidiaSmiBackend

    log = _tools(tmp_path, monkeypatch, FAIL_POWER="1")
    with pytest.raises(GpuControlError, match="Insufficient Permissions"), GpuControl(
            NvidiaSmiBackend(), 0, GpuControlSettings(clock_level=0, power_limit_w=150)):
        pytest.fail("must not run after a failed apply")
    assert _calls(log) == ["-i 0 -lgc 345,345", "-i 0 -pl 150", "-i 0 -rgc", "-i 0 -pl 700"]


def test_rocm_backend_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aorta_tui.policy.gpu_control import RocmSmiBackend

    log = _tools(tmp_path, monkeypatch)
    with GpuControl(RocmSmiBackend(), 1, GpuControlSettings(clock_level=2, power_limit_w=150)):
        pass
    d = "-d 1 --autorespond y"
    assert _calls(log) == [f"{d} --setperflevel manual", f"{d} --setsclk 2",
                           f"{d} --setpoweroverdrive 150", f"{d} --setperflevel auto",
                           f"{d} --setpoweroverdrive 550"]
