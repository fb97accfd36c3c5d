"""Lost events are unknown, not zero, until bpftrace's in-kernel count has arrived."""

from __future__ import annotations

from aorta_tui.trace.session import TraceSession


def test_lost_is_none_until_the_kernel_count_arrives_then_exact():
    s = TraceSession(["ioctl"])
    assert s._lost_for(0) is None
    s.sent[0], s.received[0] = 100, 97
    assert s._lost_for(0) == 3
    s.received[0] = 120  # records can arrive before the count that covers them
    assert s._lost_for(0) == 0
