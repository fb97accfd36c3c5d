"""What the timeline showed on a CPU box, removed (issue 15 item 2), each through real processes:
the trial worker leaves without the interpreter's teardown (atexit handlers still run), the
deterministic switch no longer imports torch._inductor, snapshot captures run at SCHED_IDLE and
are reaped the moment they end."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aorta_tui.sweep import snapshots
from aorta_tui.trial.worker import fast_exit_allowed


def _py(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


@pytest.mark.parametrize(("env", "reason"), [
    ({}, None),
    ({"AORTA_TRIAL_FAST_EXIT": "0"}, "AORTA_TRIAL_FAST_EXIT=0"),
    ({"CUDA_INJECTION64_PATH": "/x/libcollector.so"}, "CUDA_INJECTION64_PATH is set"),
    ({"LD_PRELOAD": "/x/lib.so"}, "LD_PRELOAD is set"),
    ({"HSA_TOOLS_LIB": "/x/lib.so"}, "HSA_TOOLS_LIB is set"),
])
def test_fast_exit_only_where_nothing_needs_the_teardown(env, reason):
    got = fast_exit_allowed(env)
    assert (got is None) if reason is None else got.startswith(reason)


def test_the_fast_exit_still_runs_atexit_handlers_and_flushes(tmp_path):
    marker = tmp_path / "atexit-ran"
    proc = _py(f"""
        import atexit, sys
        from aorta_tui.trial.worker import _leave
        atexit.register(lambda: open({str(marker)!r}, "w").write("x"))
        sys.stdout.write("buffered, no newline")
        _leave(0)
        raise SystemExit("not reached: os._exit left first")
    """)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text() == "x"
    assert proc.stdout == "buffered, no newline"


def test_a_running_non_daemon_thread_gets_the_normal_exit(tmp_path):
    marker = tmp_path / "thread-finished"
    proc = _py(f"""
        import threading
        from aorta_tui.trial.worker import _leave
        go = threading.Event()
        def work():
            go.wait(0.3)
            open({str(marker)!r}, "w").write("x")
        threading.Thread(target=work).start()
        _leave(0)
    """)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text() == "x"  # the normal exit joined it; os._exit would have cut it


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_the_deterministic_switch_does_not_import_inductor_and_still_sets_both_flags():
    pytest.importorskip("torch")
    proc = _py("""
        import sys, torch
        from aorta_tui.registry.switches import apply_switches
        applied = apply_switches(["torch.deterministic"])
        assert "torch._inductor.config" not in sys.modules, "inductor imported"
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
        import torch._inductor.config as cfg
        assert cfg.deterministic is True, "inductor loaded later must see deterministic mode"
        print(applied[0])
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("torch.deterministic:")


def test_captures_run_at_sched_idle_and_are_reaped_when_they_end(tmp_path):
    from aorta_tui.core.rundir_fs import RunDirFS

    fs = RunDirFS(tmp_path)
    pending = snapshots.start_captures(fs, {"local": {"AORTA_X": "1"}}, dict(os.environ),
                                       session=1, include_torch=False, docker={})
    procs = [p for p in pending if p.proc is not None]
    assert procs
    for p in procs:
        assert p.priority == "SCHED_IDLE"
        try:
            policy = os.sched_getscheduler(p.proc.pid)
        except ProcessLookupError:  # already ended and reaped: its record says what it ran at
            continue
        assert policy == os.SCHED_IDLE
    assert snapshots.finish_captures(fs, pending) == []
    for p in procs:
        assert p.ended_ns is not None and p.ended_ns >= p.started_ns
        assert p.cpu_s is not None and p.cpu_s >= 0
        assert p.proc.returncode == 0
        assert Path(p.path).is_file()
    beside = snapshots.beside_trial(pending, procs[0].started_ns, procs[0].ended_ns)
    assert {c["environment"] for c in beside["captures"]} == {p.environment for p in procs}
    last = max(p.ended_ns for p in procs)
    assert snapshots.beside_trial(pending, last + 10**9, last + 2 * 10**9) == {
        "ran": False, "reason": "no snapshot capture ran during this trial"}


def test_the_worker_imports_the_class_the_orchestrator_resolved_without_an_entry_point_scan(monkeypatch):
    from aorta_tui.registry import registry
    from aorta_tui.trial import worker as trial_worker
    from aorta_tui.workloads.gpu_smoke import GpuSmoke

    scans: list[str] = []
    real = registry.load_workload
    monkeypatch.setattr(registry, "load_workload", lambda name: scans.append(name) or real(name))
    ref = f"{GpuSmoke.__module__}:{GpuSmoke.__qualname__}"
    assert trial_worker.load_class({"workload": "gpu_smoke", "workload_ref": ref}) is GpuSmoke
    assert scans == []
    # a ref that does not import, or names another workload, goes through the registry
    for bad in ("aorta_tui.nowhere:X", "aorta_tui.workloads.gpu_smoke:Nope", "os:path", None):
        assert trial_worker.load_class({"workload": "gpu_smoke", "workload_ref": bad}) is GpuSmoke
    assert scans == ["gpu_smoke"] * 4
