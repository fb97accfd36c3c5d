"""The collector's FIFO folder (``aorta-cupti-*`` in the temporary directory) is removed however
the trace ends: also when the traced command is not found, and when a queue run with
``--ebpf-trace`` fails before its trace ran (no GPU). Both were left in /tmp, a FIFO each."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.hwqueue import backends, harness
from aorta_tui.trace.device.attach import DeviceSide
from aorta_tui.trace.probes.cuda import DEVICE_METRICS
from aorta_tui.trace.session import TraceSession


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary directory, private to the test (what is left there is what leaked); the
    collector prebuilt, as in test_trace_device_attach.py (only its path travels)."""
    lib = tmp_path / "libaorta_cupti.so"
    lib.write_bytes(b"\x7fELF")
    monkeypatch.setenv("AORTA_CUPTI_COLLECTOR", str(lib))
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def test_a_traced_command_that_is_not_found_leaves_no_fifo(temp: Path, bpftrace: str) -> None:
    session = TraceSession(["cuda"], command=[str(temp.parent / "no-such-program")], bpftrace=bpftrace,
                           calibrate=False)
    with pytest.raises(UsageError, match="command not found"):
        session.start()
    session.stop()  # as `trace queue` does, in its finally
    assert session.device is not None and session.device.active  # the collector was prepared
    assert list(temp.iterdir()) == []


def test_a_queue_run_that_fails_before_its_trace_leaves_no_fifo(temp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    side = DeviceSide("auto", probe_set="cuda", device_metrics=DEVICE_METRICS)
    fifo = Path(side.prepare(None, children=True)["AORTA_CUPTI_FIFO"])
    assert fifo.parent.parent == temp
    monkeypatch.setattr(harness, "_device_side", lambda cfg: side)  # prepare_this_process's, unloaded

    def no_gpu(device: str, devices: list[str] | None = None) -> None:
        raise EnvironmentProblem("no CUDA device is visible", hint="run on a GPU machine")

    monkeypatch.setattr(backends, "select_backend", no_gpu)
    with pytest.raises(EnvironmentProblem, match="no CUDA device"):
        harness.execute(harness.QueueRunConfig(workload="tiny_kernel_stress", streams=2, ebpf_trace=True))
    assert list(temp.iterdir()) == []
    side.stop()  # stopped once: a second stop reads nothing from the closed FIFO
    assert side.channel.errors == []
