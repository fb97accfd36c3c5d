"""--timing auto: a measure pass for the headline figures, a detail pass for per-launch ones."""

from __future__ import annotations

import json

import pytest

from aorta_tui.core.errors import UsageError
from aorta_tui.hwqueue.harness import QueueRunConfig, _plain_events, compile_plan
from aorta_tui.hwqueue.run import run_queue
from aorta_tui.hwqueue.workloads import workload_class
from aorta_tui.hwqueue.workloads.base import Launch


def _cfg(**kw: object) -> QueueRunConfig:
    base: dict[str, object] = dict(workload="tiny_kernel_stress", streams=3, iterations=6,
                                   warmup=1, device="cpu", size="tiny")
    base.update(kw)
    return QueueRunConfig(**base)  # type: ignore[arg-type]


def test_auto_runs_a_measure_pass_then_a_shorter_detail_pass() -> None:
    r = run_queue(_cfg(detail_iterations=2, keep_timeline=True)).to_json()
    passes = r["timing"]["passes"]
    assert r["timing"]["timing"] == "auto"
    assert passes["measure"]["iterations"] == 6 and passes["detail"]["iterations"] == 2
    # the headline figures are the measure pass's: six iterations over its wall time
    wl = workload_class("tiny_kernel_stress")
    expected = r["workload"]["work_per_iteration"] * 6 / passes["measure"]["wall_s"] / wl.throughput_scale
    assert r["summary"]["throughput"] == pytest.approx(expected)
    assert r["summary"]["wall_s"] == passes["measure"]["wall_s"]
    assert len(r["samples"]["iteration_latency_ms"]) == 6
    assert sum(r["samples"]["iteration_period_ms"]) == pytest.approx(passes["measure"]["wall_s"] * 1e3)
    # the per-launch figures are the detail pass's: two iterations of launches
    per_iteration = 3 * r["workload"]["params"]["ops_per_stream"]
    assert r["timing"]["launches_recorded"] == 2 * per_iteration == len(r["timeline"])
    assert {row[0] for row in r["timeline"]} == {0, 1}
    assert passes["detail_relative_throughput"] == pytest.approx(
        passes["detail"]["throughput"] / passes["measure"]["throughput"])
    src = r["summary_source"]
    assert src["throughput"].startswith("measure pass") and src["latency_p99_ms"].startswith("measure pass")
    assert src["achieved_concurrency"].startswith("detail pass")
    assert set(src) == set(r["summary"])


def test_detail_pass_never_runs_more_iterations_than_asked() -> None:
    r = run_queue(_cfg(iterations=2, detail_iterations=50)).to_json()
    assert r["timing"]["passes"]["detail"]["iterations"] == 2


def test_events_and_single_pass_modes_have_no_measure_pass() -> None:
    r = run_queue(_cfg(timing="events")).to_json()
    passes = r["timing"]["passes"]
    assert "measure" not in passes and passes["detail"]["iterations"] == 6
    assert all(v.startswith("single pass") for v in r["summary_source"].values())
    assert r["timing"]["kernel_source"] == "cpu"


def test_iteration_latency_of_the_measure_pass_is_start_to_last_end_marker() -> None:
    r = run_queue(_cfg()).to_json()
    lat = r["samples"]["iteration_latency_ms"]
    periods = r["samples"]["iteration_period_ms"]
    # per_iteration sync: an iteration cannot finish after the next one began
    assert all(0 < a <= p for a, p in zip(lat, periods, strict=True))


class _Recorder:
    """Stands in for a GPU backend to see what the measure pass issues, in order."""

    emulated = False

    def __init__(self) -> None:
        self.calls: list[tuple[str, object, object]] = []
        self._n = 0

    def new_event(self, device: str) -> str:
        self._n += 1
        return f"ev{self._n}"

    def record(self, event: object, stream: object) -> None:
        self.calls.append(("record", event, stream))

    def wait(self, stream: object, event: object) -> None:
        self.calls.append(("wait", stream, event))

    def bound_record(self, event: object, stream: object):  # type: ignore[no-untyped-def]
        return lambda: self.calls.append(("record", event, stream))

    def bound_wait(self, stream: object, event: object):  # type: ignore[no-untyped-def]
        return lambda: self.calls.append(("wait", stream, event))

    def bound_set_stream(self, stream: object):  # type: ignore[no-untyped-def]
        return lambda: self.calls.append(("enter", stream, None))


def test_measure_pass_records_only_dependency_events_and_one_end_marker_per_stream() -> None:
    backend = _Recorder()
    plan = [Launch(0, "a", lambda: backend.calls.append(("launch", "a", None))),
            Launch(1, "b", lambda: backend.calls.append(("launch", "b", None))),
            Launch(1, "c", lambda: backend.calls.append(("launch", "c", None)), waits=(0,)),
            Launch(0, "d", lambda: backend.calls.append(("launch", "d", None))),
            Launch(0, "e", lambda: backend.calls.append(("launch", "e", None)))]
    sync, ends = _plain_events(backend, ["cuda:0"] * 3, plan)
    assert set(sync) == {0} and set(ends) == {0, 1}  # stream 2 is unused: no marker
    streams = ["s0", "s1", "s2"]
    for call in compile_plan(backend, streams, plan, sync, ends):
        call()
    assert backend.calls == [
        ("enter", "s0", None), ("launch", "a", None),
        ("record", sync[0], "s0"),  # launch 0, recorded: 2 waits on it
        ("enter", "s1", None), ("launch", "b", None),
        ("wait", "s1", sync[0]), ("launch", "c", None),  # same stream: no second switch
        ("enter", "s0", None), ("launch", "d", None), ("launch", "e", None),
        ("record", ends[0], "s0"), ("record", ends[1], "s1"),
    ]


def test_bad_timing_options_are_refused_before_any_work(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match="--detail-iterations"):
        run_queue(_cfg(detail_iterations=0))
    trace = tmp_path / "t.json"
    with pytest.raises(UsageError, match="--profiler-trace") as exc:
        run_queue(_cfg(profiler_trace=str(trace)))
    assert "drop --profiler-trace" in exc.value.render()
    assert not trace.exists()
    with pytest.raises(UsageError, match="unknown timing"):
        run_queue(_cfg(timing="kernels"))


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_cli_shows_where_each_figure_comes_from(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "run", "tiny_kernel_stress",
                           "--streams", "2", "-i", "4", "--detail-iterations", "2", "--device", "cpu",
                           "--size", "tiny", "-q", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = {ln.split()[0]: ln for ln in proc.stdout.splitlines() if ln.strip()}
    assert lines["throughput"].rstrip().endswith("measure: host clocks")
    assert lines["achieved_concurrency"].rstrip().endswith("detail: host clocks")
    assert "measure pass: 4 iterations" in proc.stdout and "detail pass: 2 iterations" in proc.stdout
    assert json.loads(out.read_text())["timing"]["passes"]["detail"]["iterations"] == 2


def test_with_kernel_records_launches_and_kernels_are_counted_apart() -> None:
    from aorta_tui.hwqueue.harness import RawRun
    from aorta_tui.hwqueue.metrics import LaunchRecord
    from aorta_tui.hwqueue.result import build_result

    # two launches on stream 0; the first issued two kernels
    events = [LaunchRecord(0, 0, "a", 0, 10, 20, 60), LaunchRecord(0, 0, "b", 10, 20, 60, 90)]
    kernels = [LaunchRecord(0, 0, "k1", 2, 8, 20, 40), LaunchRecord(0, 0, "k2", 3, 9, 40, 60),
               LaunchRecord(0, 0, "k3", 12, 18, 60, 90)]
    raw = RawRun(records=kernels, iteration_starts_ns=[0.0], end_ns=100.0, work_per_iteration=1.0,
                 clock_uncertainty_ns=1.0, memory=None, memory_reason="test", platform={},
                 stream_devices=["cuda:0"], emulated=False, device_clock="cupti", params={},
                 event_records=events, detail_source="cupti")
    r = build_result(_cfg(streams=1, iterations=1, device="cuda"), raw)
    ps = r["metrics"]["per_stream"][0]
    assert (ps["launches"], ps["kernels"]) == (2, 3)
    assert (r["timing"]["launches_recorded"], r["timing"]["kernels_recorded"]) == (2, 3)
    assert r["summary_units"]["queue_depth_max"] == "kernels"


def test_with_events_only_there_is_no_kernel_count() -> None:
    r = run_queue(_cfg(timing="events")).to_json()
    assert r["timing"]["kernels_recorded"] is None
    assert {ps["kernels"] for ps in r["metrics"]["per_stream"]} == {None}
    assert r["summary_units"]["queue_depth_max"] == "launches"
