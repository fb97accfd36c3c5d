"""What the privileged helper renders the bpftrace program from (under sudo) must leave out the
launch uprobe exactly where the session left it out: the collector's callbacks or, by default,
the kernel records count those launches. The default (``activity``) once kept the uprobe in the
helper's program only: under sudo every launch paid the uprobe the default exists to avoid."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from aorta_tui.trace.session import TraceSession


@pytest.mark.parametrize(("source", "left_out"), [("activity", ("cuda",)), ("collector", ("cuda",)),
                                                  ("ebpf", ())])
def test_the_helpers_spec_leaves_out_the_launch_uprobe_where_the_session_does(source: str,
                                                                               left_out: tuple[str, ...]) -> None:
    session = TraceSession(["cuda"], command=["true"], calibrate=False)
    session.device = SimpleNamespace(probe_set="cuda", launch_source=source)  # type: ignore[assignment]
    spec = session._program_spec(target_pid=4242)
    assert spec.collector_launch_sets == left_out
    assert spec.sets == ("cuda",) and spec.pid == 4242


def test_without_a_device_half_every_launch_uprobe_stays() -> None:
    session = TraceSession(["cuda"], command=["true"], calibrate=False, device_timestamps="off")
    assert session._program_spec(target_pid=None).collector_launch_sets == ()
