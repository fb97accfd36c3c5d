"""The tracepoint path end to end: syscall tracepoints against a process issuing ioctls."""

from __future__ import annotations

import threading

from aorta_tui.core.events import HistogramSnapshot
from aorta_tui.trace.session import TraceSession

FIONREAD = 0x541B


def test_ioctl_probe_set_counts_the_ioctls_of_the_traced_process(bpftrace, fakelibs) -> None:
    n = 500
    s = TraceSession(["ioctl"], command=[str(fakelibs.driver), "ioctl", "-", str(n), "0", "0"],
                     calibrate=False)
    with s:
        assert s.wait(timeout=60) == 0
    r = s.result()
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
            holder["r"] = s.result()
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
    assert snaps and snaps[-1].count == m["count"]
    assert snaps[-1].unit == "us" and "sys_enter_ioctl" in snaps[-1].measures
