"""Real worker processes: each tier-1 case, tree kills, bounded logs, env, cancel, hang."""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
from pathlib import Path

import pytest

from aorta_tui.classify import classify
from aorta_tui.trial import proctree
from aorta_tui.trial.hang import HangPolicy
from aorta_tui.trial.supervisor import (
    CancelEvent,
    KiB,
    MiB,
    ProcessOutcome,
    ProcessSpec,
    run_process,
)


def make_spec(tmp_path: Path, argv: list[str], **kw: object) -> ProcessSpec:
    env = kw.pop("env", None) or {"PATH": os.environ["PATH"], "LC_ALL": "C"}
    return ProcessSpec(
        argv=argv,
        env=env,  # type: ignore[arg-type]
        cwd=tmp_path,
        stdout_path=tmp_path / "stdout.log",
        stderr_path=tmp_path / "stderr.log",
        **kw,  # type: ignore[arg-type]
    )


def classify_outcome(spec: ProcessSpec, outcome: ProcessOutcome, **kw: object):
    return classify(outcome, stdout_path=spec.stdout_path, stderr_path=spec.stderr_path, **kw)  # type: ignore[arg-type]


def ids(classification) -> set[str]:
    return {d.id for d in classification.detections}


def assert_dead(pid: int) -> None:
    # Gone, or a zombie waiting for init to reap it (dead; PID 1 of some containers never
    # reaps). Either way it runs no code and holds no memory.
    assert not proctree.is_alive(pid), f"pid {pid} still running: {proctree.read_stat(pid)}"


def test_exit_code_is_a_fail(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, ["bash", "-c", "exit 3"])
    out = run_process(spec)
    assert out.exit_code == 3 and out.signal is None and out.exec_error is None
    c = classify_outcome(spec, out)
    assert c.verdict == "fail"
    assert "exit_nonzero" in ids(c)
    assert "exited with code 3" in c.reason


def test_clean_exit_passes(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, ["true"])
    out = run_process(spec)
    assert out.exit_code == 0 and not out.killed_strays
    c = classify_outcome(spec, out)
    assert c.verdict == "pass", c
    assert out.to_dict()["signal_name"] is None


def test_timeout_is_an_error_and_kills_the_whole_tree(tmp_path: Path) -> None:
    # The background sleep prints its pid so the test can look for it afterwards.
    spec = make_spec(tmp_path, ["bash", "-c", "sleep 100 & echo $!; sleep 100"], timeout_s=0.5)
    out = run_process(spec)
    assert out.timed_out and not out.cancelled
    grandchild = int(spec.stdout_path.read_text().split()[0])
    assert_dead(out.pid)
    assert_dead(grandchild)
    c = classify_outcome(spec, out)
    assert c.verdict == "error"
    assert "timeout" in ids(c)
    # We sent the SIGTERM: the trial is not blamed for the signal as well.
    assert "killed_by_signal" not in ids(c)


def test_timeout_escalates_to_sigkill_when_term_is_ignored(tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path, ["bash", "-c", "trap '' TERM; sleep 100 & echo $!; wait"], timeout_s=0.5,
        kill_grace_s=0.3,
    )  # fmt: skip
    out = run_process(spec)
    assert out.timed_out and out.kill_escalated
    assert out.signal == signal.SIGKILL
    assert_dead(int(spec.stdout_path.read_text().split()[0]))


def test_a_child_that_left_the_group_is_still_killed(tmp_path: Path) -> None:
    # setsid moves the grandchild out of the process group; the /proc tree still links it.
    spec = make_spec(tmp_path, ["bash", "-c", "setsid sleep 100 & echo $!; sleep 100"], timeout_s=0.5)
    out = run_process(spec)
    assert out.timed_out
    assert_dead(int(spec.stdout_path.read_text().split()[0]))


def test_background_process_outliving_the_main_one_is_ended(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, ["bash", "-c", "sleep 100 & echo $!"])
    out = run_process(spec)
    assert out.exit_code == 0 and out.killed_strays
    assert_dead(int(spec.stdout_path.read_text().split()[0]))
    assert classify_outcome(spec, out).verdict == "pass"


def test_missing_binary_is_an_exec_error(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, ["aorta-no-such-binary-xyz", "--flag"])
    out = run_process(spec)
    assert out.pid is None and out.exit_code is None
    assert out.exec_error is not None and "aorta-no-such-binary-xyz" in out.exec_error
    assert "not on the trial's PATH" in out.exec_error
    c = classify_outcome(spec, out)
    assert c.verdict == "error"
    assert ids(c) == {"exec_failed"}
    # The log files exist (empty), so later stages can always open them.
    assert spec.stdout_path.read_bytes() == b"" and spec.stderr_path.read_bytes() == b""


def test_non_executable_file_and_missing_cwd_are_exec_errors(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    out = run_process(make_spec(tmp_path, [str(script)]))
    assert out.exec_error is not None and "permission denied" in out.exec_error

    spec = make_spec(tmp_path, ["true"])
    spec.cwd = tmp_path / "does-not-exist"
    out = run_process(spec)
    assert out.exec_error is not None and "working directory" in out.exec_error


def test_empty_argv_is_an_exec_error(tmp_path: Path) -> None:
    out = run_process(make_spec(tmp_path, []))
    assert out.exec_error is not None and "empty" in out.exec_error


def test_segfault_is_a_fail_with_the_signal(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, ["bash", "-c", "kill -SEGV $$"])
    out = run_process(spec)
    assert out.signal == signal.SIGSEGV and out.exit_code is None
    c = classify_outcome(spec, out)
    assert c.verdict == "fail"
    assert "killed_by_signal" in ids(c)
    assert "SIGSEGV" in c.reason


def test_cuda_error_in_the_log_is_a_fail_with_its_detector(tmp_path: Path) -> None:
    line = "RuntimeError: CUDA error: an illegal memory access was encountered"
    spec = make_spec(tmp_path, ["bash", "-c", f"echo warming up; echo '{line}' >&2; exit 1"])
    out = run_process(spec)
    c = classify_outcome(spec, out)
    assert c.verdict == "fail"
    assert {"cuda_error", "illegal_memory_access", "exit_nonzero"} <= ids(c)
    cuda = next(d for d in c.detections if d.id == "cuda_error")
    assert cuda.tier == 4 and cuda.stream == "stderr" and cuda.line_no == 1
    assert cuda.evidence == line
    assert cuda.captures["message"] == "an illegal memory access was encountered"
    # The reason names the GPU error, not the exit code it caused.
    assert "illegal" in c.reason


def test_python_traceback_reason_names_the_exception(tmp_path: Path) -> None:
    code = "def f():\n    raise ValueError('bad shape (3, 4)')\nf()\n"
    spec = make_spec(tmp_path, [sys.executable, "-c", code])
    out = run_process(spec)
    c = classify_outcome(spec, out)
    assert c.verdict == "fail"
    tb = next(d for d in c.detections if d.id == "python_traceback")
    assert tb.captures["exception"] == "ValueError: bad shape (3, 4)"
    assert "ValueError: bad shape (3, 4)" in c.reason


def test_environment_is_exactly_what_the_spec_says(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "AORTA_PROBE_VAR": "v42", "HIP_VISIBLE_DEVICES": "1"}
    spec = make_spec(tmp_path, ["env"], env=env)
    out = run_process(spec)
    assert out.exit_code == 0
    printed = dict(line.split("=", 1) for line in spec.stdout_path.read_text().splitlines())
    assert printed == env  # nothing inherited from the orchestrator (no HOME, no USER)


def test_cancel_event_ends_the_tree(tmp_path: Path) -> None:
    cancel = CancelEvent()
    spec = make_spec(tmp_path, ["bash", "-c", "sleep 100 & echo $!; sleep 100"])
    started = threading.Event()

    def on_start(pid: int) -> None:
        started.set()
        threading.Timer(0.3, cancel.set).start()

    out = run_process(spec, cancel=cancel, on_start=on_start)
    assert started.is_set()
    assert out.cancelled and not out.timed_out
    assert_dead(out.pid)
    assert_dead(int(spec.stdout_path.read_text().split()[0]))
    c = classify_outcome(spec, out)
    assert c.verdict == "error" and "cancelled" in ids(c)


def test_plain_threading_event_also_cancels(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()  # set before the start: the trial is ended at once
    out = run_process(make_spec(tmp_path, ["sleep", "100"]), cancel=cancel)
    assert out.cancelled
    assert_dead(out.pid)


def test_on_start_gets_the_pid_and_its_failure_kills_the_child(tmp_path: Path) -> None:
    seen: list[int] = []
    out = run_process(make_spec(tmp_path, ["true"]), on_start=seen.append)
    assert seen == [out.pid]

    pids: list[int] = []

    def boom(pid: int) -> None:
        pids.append(pid)
        raise RuntimeError("journal write failed")

    with pytest.raises(RuntimeError, match="journal write failed"):
        run_process(make_spec(tmp_path, ["sleep", "100"]), on_start=boom)
    assert_dead(pids[0])


def test_bounded_log_keeps_head_marker_and_tail(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "w = sys.stdout.buffer.write\n"
        "w(b'HEAD-LINE\\n')\n"
        "for i in range(10 * 1024):\n"
        "    w(b'%07d' % i + b'x' * 1016 + b'\\n')\n"
        "w(b'TAIL-END\\n')\n"
    )
    spec = make_spec(tmp_path, [sys.executable, "-c", code], max_log_bytes=1 * MiB, tail_bytes=64 * KiB)
    out = run_process(spec)
    assert out.exit_code == 0
    total = len(b"HEAD-LINE\n") + 10 * 1024 * 1024 + len(b"TAIL-END\n")
    assert out.stdout_bytes == total
    assert out.truncated
    data = spec.stdout_path.read_bytes()
    assert len(data) <= 1 * MiB
    assert data.startswith(b"HEAD-LINE\n0000000x")
    assert data.endswith(b"x\nTAIL-END\n")
    assert data.count(b"[aorta-tui: ") == 1
    marker_at = data.index(b"[aorta-tui: ")
    assert len(data) - data.index(b"\n", marker_at) - 1 == 64 * KiB  # exactly the tail kept
    assert b"bytes omitted here" in data


def test_small_log_is_not_truncated(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, ["bash", "-c", "seq 1 1000; seq 1 10 >&2"], max_log_bytes=4 * KiB,
                     tail_bytes=1 * KiB)  # fmt: skip
    out = run_process(spec)
    # stdout (3893 bytes) fits in 4 KiB although it passes the head limit: no marker.
    assert spec.stdout_path.read_text() == "".join(f"{i}\n" for i in range(1, 1001))
    assert not out.truncated
    assert out.stderr_bytes == len(spec.stderr_path.read_bytes()) == 21


def test_merged_streams_share_one_file(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, ["bash", "-c", "echo out; echo err >&2"])
    spec.stderr_path = spec.stdout_path
    run_process(spec)
    assert sorted(spec.stdout_path.read_text().split()) == ["err", "out"]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_peak_rss_is_the_childs_when_it_exceeds_the_orchestrator(tmp_path: Path) -> None:
    from aorta_tui.trial.supervisor import peak_rss_kb

    # Linux folds the parent's peak into the child's ru_maxrss, so the child must exceed the
    # orchestrator's own peak, which depends on what else ran in this pytest process.
    size_mib = max(400, (peak_rss_kb() or 0) // 1024 + 200)
    code = f"b = b'x' * ({size_mib} << 20)"
    out = run_process(make_spec(tmp_path, [sys.executable, "-c", code]))
    assert out.peak_rss_kb is not None and out.peak_rss_kb >= size_mib * 1024
    assert out.peak_rss_reason is None

    small = run_process(make_spec(tmp_path, ["true"]))
    # `true` never exceeds the orchestrator's own peak, which Linux folds into ru_maxrss.
    assert small.peak_rss_kb is None
    assert "orchestrator" in (small.peak_rss_reason or "")


def test_gpu_memory_is_none_with_a_reason_without_gpu_tools(tmp_path: Path) -> None:
    from aorta_tui.trial import gpu_probe

    if gpu_probe.probe().tool is not None:
        pytest.skip("this machine has a GPU tool; the gpu-marked tests cover it")
    out = run_process(make_spec(tmp_path, ["true"]))
    assert out.gpu_peak_mem_bytes is None
    assert out.gpu_mem_reason and "no GPU tool" in out.gpu_mem_reason


def test_hang_is_detected_and_reports_its_signals(tmp_path: Path) -> None:
    policy = HangPolicy(window_s=0.5, grace_s=0.2)
    spec = make_spec(tmp_path, ["bash", "-c", "echo started; exec sleep 100"], hang=policy,
                     timeout_s=30)  # fmt: skip
    out = run_process(spec)
    assert out.hang is not None and not out.timed_out
    assert_dead(out.pid)
    report = out.hang
    assert set(report.held()) == {"output_silence", "io_idle"}
    # it held its window first: the silence it reports reaches the policy's window
    assert report.signals["output_silence"] >= policy.window_s
    assert "gpu_idle" in report.unavailable or report.signals.get("gpu_idle") is not None
    c = classify_outcome(spec, out)
    assert c.verdict == "fail"
    hang = next(d for d in c.detections if d.id == "hang")
    assert hang.tier == 2 and hang.severity == "fail"
    assert "output silence" in hang.message
    assert "killed_by_signal" not in ids(c)


def test_steady_output_is_not_a_hang(tmp_path: Path) -> None:
    policy = HangPolicy(window_s=0.4, grace_s=0.1)
    script = "for i in $(seq 20); do echo $i; sleep 0.05; done"
    spec = make_spec(tmp_path, ["bash", "-c", script], hang=policy, timeout_s=30)
    out = run_process(spec)
    assert out.hang is None and out.exit_code == 0


def test_hang_cannot_fire_with_one_usable_signal(tmp_path: Path) -> None:
    from aorta_tui.trial import gpu_probe

    if gpu_probe.probe().tool is not None:
        pytest.skip("a GPU tool exists here, so gpu_idle is usable")
    policy = HangPolicy(window_s=0.1, grace_s=0.0, disabled=frozenset({"output_silence"}))
    out = run_process(make_spec(tmp_path, ["sleep", "100"], hang=policy, timeout_s=0.6))
    assert out.hang is None and out.timed_out
    assert out.hang_note and "two of" in out.hang_note
    c = classify(out, stdout_path=None, stderr_path=None)
    note = next(d for d in c.detections if d.id == "hang")
    assert note.severity == "info" and "could not fire" in note.message


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="max_log_bytes"):
        ProcessSpec(["true"], {}, Path("."), Path("o"), Path("e"), max_log_bytes=1000, tail_bytes=900)
    with pytest.raises(ValueError, match="timeout_s"):
        ProcessSpec(["true"], {}, Path("."), Path("o"), Path("e"), timeout_s=0)
    # The recipe's whole disable_detectors may be passed: only hang signals are kept.
    policy = HangPolicy(disabled=frozenset({"cuda_error", "tier4", "tier2:gpu_idle", "io_idle"}))
    assert policy.disabled == frozenset({"gpu_idle", "io_idle"})
    with pytest.raises(ValueError, match="window"):
        HangPolicy(window_s=0)


def test_outcome_to_dict_is_json_ready(tmp_path: Path) -> None:
    import json

    policy = HangPolicy(window_s=0.3, grace_s=0.0)
    out = run_process(make_spec(tmp_path, ["sleep", "100"], hang=policy, timeout_s=30))
    data = json.loads(json.dumps(out.to_dict()))
    assert data["hang"]["window_s"] == 0.3
    assert data["signal_name"] == "SIGTERM"
    assert set(data) >= {
        "pid", "exit_code", "signal", "core_dumped", "timed_out", "cancelled", "hang",
        "exec_error", "wall_s", "started_at", "ended_at", "peak_rss_kb", "gpu_peak_mem_bytes",
        "gpu_mem_reason", "stdout_bytes", "stderr_bytes", "truncated",
    }  # fmt: skip


def test_outcome_round_trips_through_a_dict(tmp_path: Path) -> None:
    out = run_process(make_spec(tmp_path, ["sleep", "100"], hang=HangPolicy(window_s=0.2, grace_s=0),
                                timeout_s=30))  # fmt: skip
    back = ProcessOutcome.from_dict({**out.to_dict(), "field_from_the_future": 1})
    assert back == out


def test_orphaned_trial_of_a_killed_orchestrator_is_ended(tmp_path: Path) -> None:
    import subprocess

    from aorta_tui.core.events import TrialLaunch, TrialStarted
    from aorta_tui.trial import orphans

    # A real orchestrator process runs a trial carrying its identity token; we SIGKILL the
    # orchestrator mid-trial.
    ident = orphans.mint("r-1")
    code = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from aorta_tui.trial.supervisor import ProcessSpec, run_process\n"
        "d = Path(sys.argv[1])\n"
        "spec = ProcessSpec(['bash', '-c', 'sleep 100 & echo $! > gc.fifo; sleep 100'],\n"
        f"                   {{**os.environ, {orphans.TOKEN_VAR!r}: {ident.token!r}}}, d,\n"
        "                   d / 'o.log', d / 'e.log')\n"
        "run_process(spec, on_start=lambda pid: print(pid, time.time(), flush=True))\n"
    )
    os.mkfifo(tmp_path / "gc.fifo")  # the trial reports its background child's pid here
    orch = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert orch.stdout is not None
    pid_text, _started = orch.stdout.readline().split()
    grandchild = int((tmp_path / "gc.fifo").read_text().split()[0])  # blocks until written
    orch.kill()
    orch.wait()
    orch.stdout.close()
    pid = int(pid_text)
    assert proctree.is_alive(pid)  # the trial outlived its orchestrator
    tid = "c/trial-000"
    launch = TrialLaunch("r", trial_id=tid, cell="c", trial=0, identity=list(ident.digests))
    started = TrialStarted("r", trial_id=tid, cell="c", trial=0, pid=pid)

    # Without its identity line the pid proves nothing: left alone, and said so.
    report = orphans.end_unfinished(tmp_path, "r-1", [started], {tid})
    assert report.refused == 1 and "left alone" in report.warnings()[0]
    assert proctree.is_alive(pid)
    # The identity of another run does not match either.
    assert orphans.end_unfinished(tmp_path, "r-2", [launch, started], {tid}).ended == 0
    assert proctree.is_alive(pid)

    # The same run under another path (its directory renamed: issue 37 item 1) is still it.
    report = orphans.end_unfinished(tmp_path / "renamed", "r-1", [launch, started], {tid},
                                    grace_s=1.0)
    assert report.ended >= 2 and "ended" in report.warnings()[0]
    assert_dead(pid)
    assert_dead(grandchild)
    assert orphans.end_unfinished(tmp_path, "r-1", [launch, started], {tid}).notes == {}


def test_output_flood_stays_bounded_on_disk_and_in_memory(tmp_path: Path) -> None:
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    spec = make_spec(tmp_path, ["yes", "NCCL WARN flood line"], timeout_s=1.0, max_log_bytes=1 * MiB)
    out = run_process(spec)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert out.timed_out and out.truncated
    assert out.stdout_bytes > 8 * MiB  # far more than is kept
    assert spec.stdout_path.stat().st_size <= 1 * MiB
    assert grown_kb < 64 * 1024, f"the worker grew by {grown_kb} KiB pumping {out.stdout_bytes} bytes"
    # The kept tail is the end of the stream (a kill may cut the very last line short).
    assert b"NCCL WARN flood line\n" in spec.stdout_path.read_bytes()[-100:]
