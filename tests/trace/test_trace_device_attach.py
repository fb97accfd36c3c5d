"""DeviceSide's decisions without a GPU: when the collector can be given to a program, what its
environment gets, and why not otherwise (the traced program itself is faked by nothing here:
these are the engine's choices, the GPU run is scripts/dispatch_check.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aorta_tui.core.errors import EnvironmentProblem, ExitCode
from aorta_tui.trace.device.attach import DeviceSide
from aorta_tui.trace.probes.cuda import DEVICE_METRICS


def side(mode: str = "auto") -> DeviceSide:
    return DeviceSide(mode, probe_set="cuda", device_metrics=DEVICE_METRICS)


@pytest.fixture
def prebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lib = tmp_path / "libaorta_cupti.so"
    lib.write_bytes(b"\x7fELF")  # never loaded here: only its path travels
    monkeypatch.setenv("AORTA_CUPTI_COLLECTOR", str(lib))
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    return lib


def test_a_command_gets_the_collector_and_a_private_fifo(prebuilt: Path) -> None:
    s = side()
    env = s.prepare(["python3", "prog.py"])
    try:
        assert env["CUDA_INJECTION64_PATH"] == str(prebuilt)
        fifo = Path(env["AORTA_CUPTI_FIFO"])
        assert fifo.exists() and oct(fifo.parent.stat().st_mode & 0o777) == "0o700"
        assert s.active and s.to_dict()["available"] is True
    finally:
        s.stop()
    assert not fifo.exists()  # removed with its folder


def test_programs_the_caller_starts_get_it_too(prebuilt: Path) -> None:
    s = side()
    env = s.prepare(None, children=True)
    try:
        assert env["CUDA_INJECTION64_PATH"] == str(prebuilt) and "AORTA_CUPTI_FIFO" in env
    finally:
        s.stop()


def test_a_running_pid_cannot_be_given_one(prebuilt: Path) -> None:
    s = side()
    assert s.prepare(None) == {} and not s.active
    assert "running process" in (s.reason or "")
    with pytest.raises(EnvironmentProblem) as err:
        side("on").prepare(None)
    assert err.value.exit_code == ExitCode.ENVIRONMENT and err.value.hint


def test_another_injected_tool_is_left_alone(prebuilt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsight/libToolsInjection64.so")
    s = side()
    assert s.prepare(["./prog"]) == {} and "already set" in (s.reason or "")


def test_off_says_so(prebuilt: Path) -> None:
    s = side("off")
    assert s.prepare(["./prog"]) == {} and "off" in (s.reason or "")
    assert os.environ.get("CUDA_INJECTION64_PATH") is None
