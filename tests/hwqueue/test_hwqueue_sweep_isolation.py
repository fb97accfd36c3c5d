"""queue sweep: a fresh process per point, and a failing point does not end the sweep."""

from __future__ import annotations

import os
from typing import Any

import pytest

from aorta_tui.core.errors import EnvironmentProblem
from aorta_tui.core.events import Measurement, Progress
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.hwqueue.repeat import run_isolated
from aorta_tui.hwqueue.sweep import run_sweep

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def _cfg() -> QueueRunConfig:
    return QueueRunConfig(workload="tiny_kernel_stress", streams=1, iterations=2, warmup=0,
                          device="cpu", size="tiny", run_id="sw")


def test_every_point_is_measured_in_its_own_process() -> None:
    events: list = []
    doc = run_sweep(_cfg(), [1, 2, 4], on_event=events.append)
    pids = [p.section("platform")["pid"] for p in doc.points]
    assert len(set(pids)) == 3 and os.getpid() not in pids
    assert [p.run_id for p in doc.points] == ["sw-s1", "sw-s2", "sw-s4"]
    assert doc.isolation == "a fresh process per point" and doc.failed_points == ()
    # the children's own events stay in the children: the sweep reports each point's figures
    assert [e.values for e in events if isinstance(e, Measurement)] == [
        p.summary.values for p in doc.points]
    assert [e.done for e in events if isinstance(e, Progress)] == [1, 2, 3]


def test_in_process_sweep_shares_this_process() -> None:
    doc = run_sweep(_cfg(), [1, 2], isolate=False)
    assert {p.section("platform")["pid"] for p in doc.points} == {os.getpid()}
    assert doc.isolation == "all points in one process"


def test_a_failing_point_is_recorded_and_the_sweep_goes_on() -> None:
    def runner(cfg: QueueRunConfig, what: str) -> dict[str, Any]:
        if cfg.streams == 2:  # as a point that runs out of device memory would
            raise EnvironmentProblem(f"{what} failed with exit status 3:\n  CUDA out of memory")
        return run_isolated(cfg, what)

    events: list = []
    doc = run_sweep(_cfg(), [1, 2, 4], on_event=events.append, runner=runner)
    assert [p.config.streams for p in doc.points] == [1, 4]
    (failed,) = doc.failed_points
    assert failed.streams == 2 and "the 2-stream point failed" in failed.reason
    assert "out of memory" in failed.reason
    assert set(doc.analysis.efficiency) == {"1", "4"}
    assert [e.message for e in events if isinstance(e, Progress)] == [
        "1 streams done", "2 streams failed", "4 streams done"]


def test_a_sweep_where_every_point_fails_raises_the_first_failure() -> None:
    cfg = _cfg()
    cfg.ebpf_trace = True  # CPU emulation cannot trace: every child refuses it (exit 2)
    object.__setattr__(cfg, "validate", lambda: None)
    with pytest.raises(Exception, match="the 1-stream point failed with exit status 2"):
        run_sweep(cfg, [1, 2])


def test_in_process_failure_ends_the_sweep() -> None:
    def runner(cfg: QueueRunConfig, what: str) -> dict[str, Any]:
        raise EnvironmentProblem("no GPU")

    with pytest.raises(EnvironmentProblem, match="no GPU"):
        run_sweep(_cfg(), [1, 2], isolate=False, runner=runner)


def test_a_point_killed_by_a_signal_is_a_failed_point_not_an_interrupt(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import signal

    from aorta_tui.core.errors import AortaError, ExitCode
    from aorta_tui.hwqueue.repeat import _child_failure

    killed = _child_failure("the 64-stream point", -signal.SIGKILL, "")
    assert isinstance(killed, AortaError) and "killed by SIGKILL" in killed.render()
    assert killed.exit_code == ExitCode.ENVIRONMENT and "dmesg" in killed.render()
    assert isinstance(_child_failure("x", -signal.SIGINT, ""), KeyboardInterrupt)
    assert isinstance(_child_failure("x", 130, ""), KeyboardInterrupt)
    crashed = _child_failure("x", 70, "Traceback ...\nRuntimeError: CUDA out of memory")
    assert crashed.exit_code == ExitCode.INTERNAL and "out of memory" in crashed.render()


def test_a_shared_profiler_trace_is_refused_before_any_point_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from aorta_tui.core.errors import UsageError

    cfg = _cfg()
    cfg.profiler_trace = str(tmp_path / "t.json")
    with pytest.raises(UsageError, match="a sweep makes several"):
        run_sweep(cfg, [1, 2])
    assert not list(tmp_path.iterdir())
