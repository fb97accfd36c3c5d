"""Trace monitor with the device-side metrics (launch_to_start, kernel_duration, queued,
gpu_idle), driven by recorded snapshots replayed through the real trace worker process; and
the fixes of what the live screen showed on the H200 (rows of an earlier trace, raw dicts in
toasts, a default probe set that cannot attach, failures only in fading toasts)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.widgets import DataTable, Input, Select
from tui_support import FIXED_FACTS, FIXTURES, async_test, replay_in_monitor, wait_for

from aorta_tui.core.events import HistogramSnapshot
from aorta_tui.tui.app import AortaApp
from aorta_tui.tui.machine import MachineFacts
from aorta_tui.tui.screens.trace_monitor import (
    TraceMonitorScreen,
    _observer_cost_text,
    attached_sentence,
    clock_text,
    describe_target,
    parse_target,
)
from aorta_tui.tui.widgets.histogram import fmt_latency, render_histogram

RECORDING = FIXTURES / "launch_to_start_snapshots.jsonl"
SIZES = [(80, 24), (160, 48)]
CLOCK = "clocks aligned ±0.4 µs (CUPTI↔CLOCK_MONOTONIC, 12 samples)"


def _app(directory: Path, facts: MachineFacts = FIXED_FACTS) -> AortaApp:
    return AortaApp(cwd=directory, output_dir=directory / "out", machine_facts=facts)


async def _replay(app: AortaApp, pilot, recording: Path) -> TraceMonitorScreen:  # noqa: ANN001
    return await replay_in_monitor(app, pilot, recording)


def _text(screen: TraceMonitorScreen, selector: str) -> str:
    return str(screen.query_one(selector).render())


def _last_snapshots() -> dict[str, dict]:
    last = {}
    for line in RECORDING.read_text().splitlines():
        data = json.loads(line)
        last[data["probe_set"]] = data
    return last


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@async_test
async def test_launch_to_start_is_the_default_metric_with_its_clock_alignment(tmp_path: Path, size) -> None:  # noqa: ANN001
    app = _app(tmp_path)
    async with app.run_test(size=size) as pilot:
        screen = await _replay(app, pilot, RECORDING)
        # cuda.launch arrives first in every round, yet launch_to_start is what is shown
        assert list(screen._latest)[0] == "cuda.launch"
        assert screen.metric == "cuda.launch_to_start"
        header = _text(screen, "#queue-measures")
        assert "cuda.launch_to_start" in header and "submit -> dispatch" in header
        assert CLOCK in header
        measures = screen.query_one("#queue-measures")
        assert measures.region.height >= 2  # the clock line is on the screen, not cut off
        last = _last_snapshots()["cuda.launch_to_start"]
        stats = _text(screen, "#queue-stats")
        assert f"{last['count']:,}" in stats
        hist = _text(screen, "#queue-hist")
        assert "µs" in hist and "ms" in hist  # the backlog's multi-ms tail is drawn
        table = screen.query_one("#queue-breakdown", DataTable)
        rows = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert "cuda.launch_to_start 0x7f3a2c000d00" in rows


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@async_test
async def test_m_cycles_to_the_other_device_metrics_and_queued_is_a_count(tmp_path: Path, size) -> None:  # noqa: ANN001
    app = _app(tmp_path)
    async with app.run_test(size=size) as pilot:
        screen = await _replay(app, pilot, RECORDING)
        await pilot.press("m")
        assert screen.metric == "cuda.kernel_duration"
        assert CLOCK not in _text(screen, "#queue-measures")  # one clock: nothing to align
        await pilot.press("m")
        assert screen.metric == "cuda.queued"
        await pilot.pause(0.2)  # a redraw must keep the user's choice
        assert screen.metric == "cuda.queued"
        last = _last_snapshots()["cuda.queued"]
        stats = _text(screen, "#queue-stats")
        p50 = last["percentiles"]["p50"]
        assert f"{p50:,.0f} kernels" in stats
        assert "µs" not in stats.split("rate")[0]  # a count is never drawn as a duration
        hist = _text(screen, "#queue-hist")
        assert "µs" not in hist and "ns" not in hist
        rows = [row.split() for row in hist.splitlines()]
        assert rows[0][0] in ("0", "0–1", "0–2", "0–3")  # whole kernels, merged to fit the height
        assert sum(int(row[-1]) for row in rows) == sum(b[2] for b in last["buckets"])
        assert "unit kernels" in _text(screen, "#queue-measures")
        assert "clocks aligned" in _text(screen, "#queue-measures")  # launch vs start: two clocks
        table = screen.query_one("#queue-breakdown", DataTable)
        queued = [table.get_row_at(i) for i in range(table.row_count)
                  if str(table.get_row_at(i)[0]).startswith("cuda.queued")]
        assert queued and all(str(row[2]).endswith("kernels") for row in queued)
        await pilot.press("m")
        assert screen.metric == "cuda.gpu_idle"
        await pilot.press("m", "m")
        assert screen.metric == "cuda.launch_to_start"


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_a_new_trace_clears_the_rows_and_messages_of_the_previous_one(tmp_path: Path) -> None:
    # On the H200 the streams of an earlier target stayed listed under the new one.
    ioctl = tmp_path / "ioctl.jsonl"
    ioctl.write_text((FIXTURES / "trace" / "ioctl-snapshot.json").read_text().replace("\n", " ") + "\n")
    app = _app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _replay(app, pilot, RECORDING)
        table = screen.query_one("#queue-breakdown", DataTable)
        assert any(str(table.get_row_at(i)[0]).startswith("cuda.") for i in range(table.row_count))
        await pilot.press("m")  # a chosen metric belongs to its trace too
        screen = await _replay(app, pilot, ioctl)
        rows = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert rows and all(r.startswith("ioctl.") for r in rows), rows
        assert set(screen._latest) == {"ioctl.ioctl"} and screen.metric == "ioctl.ioctl"
        assert "clocks aligned" not in _text(screen, "#queue-measures")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@async_test
async def test_toasts_are_sentences(tmp_path: Path) -> None:
    app = _app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await _replay(app, pilot, RECORDING)
        messages = [n.message for n in app._notifications]
        assert f"Starting the replay on the recording {RECORDING}." in messages
        assert f"Replaying {RECORDING} (recorded snapshots, nothing is attached)." in messages
        assert not any("{" in m for m in messages), messages


def test_the_attached_report_and_targets_read_as_sentences() -> None:
    values = {"pid": 754, "uprobes": 19, "tracepoints": 2}
    assert attached_sentence(values, "python3 my_program.py") == (
        "Tracing pid 754 (python3 my_program.py): 19 uprobes, 2 tracepoints attached.")
    assert attached_sentence({"pid": 9, "uprobes": 0, "tracepoints": 1}, "pid 9") == (
        "Tracing pid 9: 0 uprobes, 1 tracepoint attached.")
    assert describe_target(parse_target("python3 my_program.py --n 'a b'")) == "python3 my_program.py --n 'a b'"
    assert describe_target(parse_target("queue tiny_kernel_stress --streams 8")) == (
        "aorta-tui queue run tiny_kernel_stress --streams 8")
    assert describe_target({"pid": 754}) == "pid 754"
    assert len(describe_target({"command": ["x" * 200]})) == 60
    assert parse_target("replay rec.jsonl") == {"replay": "rec.jsonl"}
    assert clock_text({"method": "m", "uncertainty_ns": 2_500_000, "samples": 1}) == "clocks aligned ±2.5 ms (m, 1 sample)"
    assert clock_text({"method": "m"}) == "clocks aligned, uncertainty not measured (m)"


BOX_WITH_IOCTL_ONLY = MachineFacts(
    gpus=["NVIDIA H200 (0000:18:00.0)"], gpu_source="sysfs PCI ids + nvidia-smi",
    bpftrace="bpftrace 0.17.0 (/usr/bin/bpftrace); probe sets usable here: ioctl", privileges="root",
    probe_sets={"cuda": "no library matching libcuda.so.1 (fix: --lib cuda=/path/to/libcuda.so.1)",
                "hip": "no library matching libamdhip64.so*", "ioctl": None},
)


@async_test
async def test_the_default_probe_set_is_one_that_can_attach_and_reasons_stay_on_screen(tmp_path: Path) -> None:
    app = _app(tmp_path, BOX_WITH_IOCTL_ONLY)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("4")
        screen = app.screen
        select = screen.query_one("#probe-set", Select)
        assert select.value == "ioctl"
        assert "probe" not in screen.status
        select.value = "cuda"
        await pilot.pause(0.1)
        assert "cuda cannot attach here: no library matching libcuda.so.1" in _text(screen, "#queue-status")
        # a tracer that fails says why on the screen, after its toast has gone
        bad = tmp_path / "bad.jsonl"
        bad.write_text(RECORDING.read_text().splitlines()[0] + "\n{not json\n")
        screen.query_one("#trace-target", Input).value = f"replay {bad}"
        await pilot.press("escape", "s")
        await wait_for(pilot, lambda: "error" in screen.status, timeout=30, what="the failure")
        app.clear_notifications()
        await pilot.pause(0.1)
        status = _text(screen, "#queue-status")
        assert f"The tracer failed: {bad}:2:2: the trace recording is not valid JSON" in status, status
        assert "cuda cannot attach here" in status


def test_a_broken_recording_is_a_located_exit_2_from_the_worker(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"event": "histogram_snapshot", "probe_set": "x"}\n')
    r = subprocess.run([sys.executable, "-m", "aorta_tui", "trace", "queue", "--json", "--replay", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    started, event, finished = (json.loads(line) for line in r.stdout.splitlines())
    assert started["event"] == "run_started" and finished["event"] == "run_finished"
    assert finished["status"] == "failed" and finished["exit_code"] == 2
    assert event["event"] == "warning" and event["code"] == "error"
    assert f"{bad}:1: not an event" in event["message"]
    assert "Traceback" not in r.stderr


@async_test
async def test_the_workloads_phase_and_the_left_out_intervals_are_on_screen(tmp_path: Path) -> None:
    lines = RECORDING.read_text().splitlines()[:5]
    phase = {"event": "measurement", "run_id": "tui-queue", "ts": json.loads(lines[-1])["ts"], "source": "trace",
             "name": "phase", "values": {"phase": "measure", "phases": ["warm-up", "measure"],
                                         "intervals_left_out": 2}}
    recording = tmp_path / "phases.jsonl"
    recording.write_text("\n".join([*lines, json.dumps(phase)]) + "\n")
    app = _app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _replay(app, pilot, recording)
        assert ("phase measure (warm-up → measure); intervals are within a phase: 2 spanning a pause "
                "between phases left out") in _text(screen, "#queue-status")


_FIXTURE_LINES = RECORDING.read_text().splitlines()[:3]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mangled_recording_is_a_located_error_or_replays(data, tmp_path_factory, attack_tally) -> None:  # noqa: ANN001
    from aorta_tui.cli.trace_stream import read_recording
    from aorta_tui.core.errors import UsageError

    lines = list(_FIXTURE_LINES)
    index = data.draw(st.integers(0, len(lines) - 1))
    how = data.draw(st.sampled_from(["cut", "field", "bytes"]))
    if how == "cut":
        lines[index] = lines[index][: data.draw(st.integers(0, len(lines[index])))]
    elif how == "field":
        record = json.loads(lines[index])
        key = data.draw(st.sampled_from(sorted(record)))
        record[key] = data.draw(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                                          st.text(max_size=5), st.lists(st.integers(), max_size=3),
                                          st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))
        lines[index] = json.dumps(record)
    else:
        lines[index] = data.draw(st.text(max_size=40))
    path = tmp_path_factory.mktemp("rec") / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    try:
        events = read_recording(str(path))
    except UsageError as exc:
        assert str(path) in exc.message and exc.exit_code == 2
        failed = 0
    else:
        assert events
        failed = 0
        for snap in events:  # what the monitor draws of each replayed snapshot
            if isinstance(snap, HistogramSnapshot):
                render_histogram(snap.buckets, snap.unit, width=60, max_rows=10)
                [fmt_latency(v, snap.unit) for v in snap.percentiles.values()]
                [fmt_latency(v, snap.unit) for row in snap.breakdown.values() for v in row.values()]
                clock_text(snap.clock)
                _observer_cost_text(snap.observer_cost)
    attack_tally.record("replay recording fuzzer", cases=1, failures=failed,
                        promise="mangled --json lines: a located exit 2 or a sound replay, never a traceback")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.skipif(shutil.which("bpftrace") is None or os.geteuid() != 0, reason="needs bpftrace and root")
@async_test
async def test_a_real_trace_says_what_it_attached_in_a_sentence(tmp_path: Path) -> None:
    load = Path(__file__).parent / "tui_ioctl_load.py"
    app = _app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        screen = app.screen
        screen.query_one("#probe-set", Select).value = "ioctl"
        screen.query_one("#trace-target", Input).value = f"{sys.executable} {load} 20"
        await pilot.press("escape", "s")
        await wait_for(pilot, lambda: screen.attached is not None, timeout=30, what="the attached report")
        await pilot.pause(0.1)
        pid = screen.attached["pid"]
        messages = [n.message for n in app._notifications]
        shown = describe_target({"command": [sys.executable, str(load), "20"]})  # long paths are cut
        assert f"Starting the ioctl tracer on {shown}." in messages
        assert f"Tracing pid {pid} ({shown}): 0 uprobes, 2 tracepoints attached." in messages
        assert not any("{" in m for m in messages), messages
        await pilot.press("s")
        await wait_for(pilot, lambda: not screen.tracing, timeout=30, what="the tracer to stop")


def test_clock_text_says_where_the_launch_time_comes_from_and_the_probe_cost_it_includes() -> None:
    """Issue 24 item 3: the uprobe's measured cost beside the launch -> start figure."""
    base = {"label": "CUPTI↔CLOCK_MONOTONIC, measured", "uncertainty_ns": 500, "samples": 3}
    assert clock_text({**base, "launch_time": "CUPTI launch callback"}).endswith("; launch time: CUPTI launch callback")
    assert clock_text({**base, "launch_time": "eBPF uprobe", "probe_cost_ns": 650.0}).endswith(
        "; launch time: eBPF uprobe, includes its ~0.65 µs (calibrated)")
    assert clock_text(base) == "clocks aligned ±0.5 µs (CUPTI↔CLOCK_MONOTONIC, measured, 3 samples)"


def test_attached_sentence_says_launches_come_from_the_collector() -> None:
    values = {"pid": 9, "uprobes": 3, "tracepoints": 0}
    assert attached_sentence(values, "pid 9", {"launch_source": "collector: the collector is loaded ..."}) == (
        "Tracing pid 9: 3 uprobes, 0 tracepoints attached; launches from the CUPTI collector (no launch uprobe).")
    assert attached_sentence(values, "pid 9", {"launch_source": "ebpf: --launch-source ebpf"}) == (
        "Tracing pid 9: 3 uprobes, 0 tracepoints attached.")
