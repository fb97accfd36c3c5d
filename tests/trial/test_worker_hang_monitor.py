"""HangMonitor decisions on a real sleeping process, with the clock passed in.

The I/O signal is read from the real process's /proc/<pid>/io; only the GPU sampler is a
stand-in (there is no GPU here). The gpu-marked test in test_worker_gpu_probe.py runs the
real sampler on the GPU machine.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from aorta_tui.trial.gpu_probe import UtilReading
from aorta_tui.trial.hang import HangMonitor, HangPolicy


@dataclass
class GpuStandIn:
    reading: UtilReading | None
    interval_s: float = 1.0

    def latest_utilisation(self) -> UtilReading | None:
        return self.reading


@pytest.fixture
def sleeper() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "100"], start_new_session=True)
    yield proc.pid
    proc.kill()
    proc.wait()


def monitor(pid: int, reading: UtilReading | None, **policy: object) -> HangMonitor:
    pol = HangPolicy(window_s=10, grace_s=5, **policy)  # type: ignore[arg-type]
    return HangMonitor(pol, pid, started=0.0, gpu=GpuStandIn(reading))  # type: ignore[arg-type]


def test_gpu_idle_and_no_io_make_a_hang_without_silence(sleeper: int) -> None:
    mon = monitor(sleeper, UtilReading(15.0, True, None, idle_since=1.0),
                  disabled=frozenset({"output_silence"}))  # fmt: skip
    assert mon.next_check == 5.0  # nothing is decided during the grace period
    assert mon.check(4.0) is None
    assert mon.check(5.0) is None  # first I/O sample: the baseline
    assert mon.check(14.0) is None  # held 9 s < 10 s window
    report = mon.check(15.5)
    assert report is not None
    assert set(report.held()) == {"gpu_idle", "io_idle"}
    # Held time counts from the end of the grace period, not from idle_since=1.0.
    assert report.signals["gpu_idle"] == pytest.approx(10.5)
    assert report.signals["io_idle"] == pytest.approx(10.5)
    assert report.unavailable == {"output_silence": "disabled (disable_detectors)"}


def test_busy_gpu_prevents_the_hang(sleeper: int) -> None:
    mon = monitor(sleeper, UtilReading(15.0, False), disabled=frozenset({"output_silence"}))
    mon.check(5.0)
    assert mon.check(15.5) is None


def test_output_resets_silence(sleeper: int) -> None:
    mon = monitor(sleeper, None)  # no GPU reading: silence + io must both hold
    mon.check(5.0)
    mon.note_output(12.0)
    assert mon.check(16.0) is None  # io held 11 s, silence only 4 s
    report = mon.check(22.5)
    assert report is not None and set(report.held()) == {"output_silence", "io_idle"}
    assert report.unavailable["gpu_idle"] == "no GPU utilisation sample yet"


def test_stale_gpu_sample_is_not_idle(sleeper: int) -> None:
    mon = monitor(sleeper, UtilReading(0.5, True, None, idle_since=0.5),
                  disabled=frozenset({"output_silence"}))  # fmt: skip
    mon.check(5.0)
    assert mon.check(15.5) is None  # the only idle reading is 15 s old


def test_gone_process_makes_io_unavailable() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    mon = monitor(proc.pid, None)
    mon.check(5.0)
    report = mon.check(15.5)
    assert report is None  # only silence is left: one signal cannot make a hang
    assert mon._io_reason == "no process of the tree left to sample"
