"""The tracepoint path end to end: syscall tracepoints against a process issuing ioctls."""

from __future__ import annotations

import json
import threading

from aorta_tui.core.events import HistogramSnapshot
from aorta_tui.trace.result_doc import TraceResult
from aorta_tui.trace.session import TraceSession

FIONREAD = 0x541B


def test_ioctl_probe_set_counts_the_ioctls_of_the_traced_process(bpftrace, fakelibs) -> None:
    n = 500
    s = TraceSession(["ioctl"], command=[str(fakelibs.driver), "ioctl", "-", str(n), "0", "0"],
                     calibrate=False)
    with s:
        assert s.wait(timeout=60) == 0
    r = s.result().to_json()
    # the document a user reads, read back through its type to the same bytes
    assert json.dumps(TraceResult.from_json(r).to_json()) == json.dumps(r)
    m = r["probe_sets"]["ioctl"]["metrics"]["ioctl"]
    # the pid filter keeps other processes out; the program may issue a few ioctls of its own
    # (e.g. TCGETS on stdout), so the FIONREAD ones are counted by command
    assert m["breakdown"][str(FIONREAD)]["count"] == n
    assert m["count"] == sum(v["count"] for v in m["breakdown"].values())
    assert m["lost_events"] == 0 and r["tracepoints"] == 2 and r["uprobes"] == 0
    assert set(m["per_pid"]) == {str(r["target"]["command_pid"])}
    p = m["histogram"]["percentiles"]
    assert 0 < p["p50"] <= p["p99"] <= p["max"]
    assert r["probe_sets"]["ioctl"]["observer_cost"]["per_hit_us"] is None  # said why, not 0.0
    assert "tracepoint" in r["probe_sets"]["ioctl"]["observer_cost"]["reason"]


def test_session_runs_from_a_background_thread_and_emits_snapshots(bpftrace, fakelibs) -> None:
    """How the TUI and the queue engine use it: started, fed and stopped off the main thread."""
    snaps: list[HistogramSnapshot] = []
    errors: list[BaseException] = []
    done = threading.Event()
    holder: dict = {}

    def worker() -> None:
        try:
            s = TraceSession(["ioctl"], command=[str(fakelibs.driver), "ioctl", "-", "2000", "0", "0"],
                             mode="aggregate", interval_s=0.1, calibrate=False,
                             on_event=lambda e: snaps.append(e) if isinstance(e, HistogramSnapshot) else None)
            s.start()
            s.wait(timeout=60)
            s.stop()
            holder["r"] = s.result().to_json()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    t = threading.Thread(target=worker)
    t.start()
    assert done.wait(60)
    t.join(5)
    assert not errors, errors
    m = holder["r"]["probe_sets"]["ioctl"]["metrics"]["ioctl"]
    assert m["breakdown"][str(FIONREAD)]["count"] == 2000  # aggregate mode: exact in-kernel counts
    assert m["breakdown"][str(FIONREAD)]["p50"] is None and "aggregate mode" in m["breakdown_reason"]
    assert snaps and snaps[-1].count == m["count"]
    assert snaps[-1].unit == "us" and "sys_enter_ioctl" in snaps[-1].measures


def test_a_command_never_runs_untraced_when_tracing_cannot_start(bpftrace, tmp_path) -> None:
    """The command waits at a gate; if attaching fails it exits without running."""
    from aorta_tui.core.errors import EnvironmentProblem

    marker = tmp_path / "ran"
    bad_lib = tmp_path / "libcuda.so.1"
    bad_lib.write_bytes(b"not an elf")
    s = TraceSession(["cuda"], command=["touch", str(marker)], library_paths={"cuda": bad_lib},
                     calibrate=False)
    try:
        s.start()
    except EnvironmentProblem as exc:
        assert "is not an ELF file" in exc.message
    else:  # pragma: no cover - the fake library must be refused
        s.stop()
        raise AssertionError("a non-ELF library was accepted")
    assert not marker.exists()


def test_pid_mode_ends_when_the_target_exits(bpftrace, fakelibs) -> None:
    import subprocess

    target = subprocess.Popen([str(fakelibs.driver), "ioctl", "-", "300", "0", "0"],
                              stdin=subprocess.PIPE)  # it runs as soon as started: counts may vary
    s = TraceSession(["ioctl"], pid=target.pid, calibrate=False)
    try:
        s.start()
    except Exception:
        target.wait()
        raise
    target.wait()
    assert s.wait_target(timeout=10) is True
    s.stop()
    assert s.result().target.pid == target.pid
