"""`queue run --graph` (CUDA/HIP graphs as a queue dimension), the launch floors, and the
measure pass's per-launch host cost (issue 20).

The CPU tests run everywhere: bad input is refused before any work with exit 2 and nothing
written, the floors say "not available" with their reason, and the measure pass's host cost
per kernel stays at the bare loop's. The GPU tests (skipped without CUDA) capture and replay
for real: scripts/gpu_hwqueue_graph_check.sh runs them on the H200.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core.errors import UsageError
from aorta_tui.hwqueue.harness import (
    QueueRunConfig,
    _plain_events,
    check_graph,
    compile_plan,
)
from aorta_tui.hwqueue.run import run_queue
from aorta_tui.hwqueue.workloads import WORKLOADS, workload_class
from aorta_tui.hwqueue.workloads.base import Launch


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


gpu = pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA/ROCm GPU (scripts/gpu_hwqueue_graph_check.sh)")
UNCAPTURABLE = ("async_dataload", "zero_offload", "torch_compile")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", "queue", *args], capture_output=True,
                          text=True, timeout=180, env=env)


# --- bad input: refused before any work, exit 2, nothing written ---------------------------

def test_graph_on_cpu_emulation_is_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = _cli("run", "tiny_kernel_stress", "--streams", "2", "--device", "cpu", "--size", "tiny",
                "--graph", "-o", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "--graph captures CUDA/HIP graphs" in proc.stderr and "--device cpu" in proc.stderr
    assert "fix: drop --graph" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", UNCAPTURABLE)
def test_uncapturable_workloads_say_why(name: str) -> None:
    reason = workload_class(name)(size="tiny").graph_unsupported_reason()
    assert reason
    with pytest.raises(UsageError, match="cannot be captured as a CUDA/HIP graph") as exc:
        check_graph(name, workload_class(name)(size="tiny"), ["cuda:0"], env={})
    assert reason in exc.value.render()


def test_real_collectives_cannot_be_captured_simulated_ones_can() -> None:
    cls = workload_class("comms_compute_overlap")
    assert cls(size="tiny").graph_unsupported_reason() is None
    with pytest.raises(UsageError, match="collectives=real"):
        check_graph("comms_compute_overlap", cls({"collectives": "real"}, size="tiny"), ["cuda:0"],
                    env={})


def test_uncapturable_workload_from_the_cli_is_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = _cli("run", "zero_offload", "--streams", "4", "--device", "cuda", "--graph", "-o", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "zero_offload" in proc.stderr and "host and device memory" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("value", ["1", " 1", "yes"])
def test_cuda_launch_blocking_conflicts_with_graph(tmp_path: Path, value: str) -> None:
    with pytest.raises(UsageError, match="CUDA_LAUNCH_BLOCKING"):
        check_graph("tiny_kernel_stress", workload_class("tiny_kernel_stress")(), ["cuda:0"],
                    env={"CUDA_LAUNCH_BLOCKING": value})
    check_graph("tiny_kernel_stress", workload_class("tiny_kernel_stress")(), ["cuda:0"],
                env={"CUDA_LAUNCH_BLOCKING": "0"})  # off is no conflict


def test_cuda_launch_blocking_from_the_environment_is_exit_2_before_the_gpu_is_needed(
        tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    proc = _cli("run", "tiny_kernel_stress", "--streams", "2", "--graph", "-o", str(out), env=env)
    assert proc.returncode == 2, proc.stderr  # a usage conflict, also on a machine without GPU
    assert "conflicts with CUDA_LAUNCH_BLOCKING=1" in proc.stderr
    assert not out.exists()


def test_sweep_and_repeat_refuse_graph_on_cpu_and_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    sweep = _cli("sweep", "tiny_kernel_stress", "--streams", "1,2", "--device", "cpu", "--size",
                 "tiny", "--graph", "-o", str(out))
    assert sweep.returncode == 2, sweep.stderr
    assert "--graph" in sweep.stderr
    repeat = _cli("run", "tiny_kernel_stress", "--streams", "2", "--device", "cpu", "--size",
                  "tiny", "--graph", "--repeat", "3", "-o", str(out))
    assert repeat.returncode == 2, repeat.stderr
    assert list(tmp_path.iterdir()) == []


def test_queue_list_says_which_workloads_can_be_captured() -> None:
    proc = _cli("list", "--json")
    assert proc.returncode == 0, proc.stderr
    infos = {i["name"]: i for i in json.loads(proc.stdout)}
    assert set(infos) == set(WORKLOADS)
    for name, info in infos.items():
        assert (info["graph_unsupported"] is not None) == (name in UNCAPTURABLE), name


def test_cuda_graphs_policy_passes_graph_and_refuses_launch_blocking() -> None:
    from aorta_tui.policy.presets import BUILTIN_BY_NAME, Policy, resolve_policies

    (p,) = resolve_policies(["cuda_graphs"])
    assert p.harness_args == ("--graph",) and p.kind == "launch"
    bad = Policy(name="both", env={"CUDA_LAUNCH_BLOCKING": "1"}, harness_args=("--graph",),
                 source="policies.yaml:7")
    with pytest.raises(UsageError, match="CUDA_LAUNCH_BLOCKING=1 and --graph") as exc:
        resolve_policies(["both"], user=[bad])
    assert exc.value.location == "policies.yaml:7"
    # the two settings as two arms of one sweep are fine: each trial has one of them
    assert len(resolve_policies(["cuda_graphs", "cuda_launch_blocking"])) == 2
    assert "cuda_graphs" in BUILTIN_BY_NAME


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_policy_sweep_with_cuda_graphs_on_cpu_refuses_and_keeps_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "policy", "sweep", "tiny_kernel_stress",
                           "--policies", "cuda_graphs", "--streams", "2", "--trials", "1", "-i", "2",
                           "--warmup", "1", "--device", "cpu", "--size", "tiny", "-o", str(run_dir)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stderr
    assert "policy 'cuda_graphs' refused to run" in proc.stderr and "--device cpu" in proc.stderr
    assert not run_dir.exists()


def test_policy_file_combining_launch_blocking_and_graph_is_located_exit_2(tmp_path: Path) -> None:
    policies = tmp_path / "pol.yaml"
    policies.write_text('policies:\n  both:\n    env: {CUDA_LAUNCH_BLOCKING: "1"}\n'
                        '    harness_args: ["--graph"]\n', encoding="utf-8")
    run_dir = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "policy", "sweep", "tiny_kernel_stress",
                           "--policies", "both", "--policy-file", str(policies), "--streams", "2",
                           "--trials", "1", "--device", "cpu", "--size", "tiny", "-o", str(run_dir)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stderr
    assert f"{policies}:2: policy 'both' sets CUDA_LAUNCH_BLOCKING=1 and --graph" in proc.stderr
    assert not run_dir.exists()


# --- the floors and the per-kernel figures on CPU -----------------------------------------

def test_cpu_run_floors_are_not_available_with_the_reason() -> None:
    r = run_queue(QueueRunConfig(workload="tiny_kernel_stress", streams=2, iterations=3, warmup=1,
                                 device="cpu", size="tiny", detail_iterations=1)).to_json()
    floor = r["floor"]
    for key in ("eager_us_per_launch", "graph_us_per_launch", "eager_ratio", "graph_ratio"):
        assert floor[key].startswith("not available: CPU emulation"), key
    assert r["summary"]["eager_floor_ratio"] is None and r["summary"]["graph_floor_ratio"] is None
    assert r["unavailable"]["eager_floor_ratio"].startswith("CPU emulation")
    assert r["graph"] == {"requested": False, "applied": False,
                          "reason": "not requested (--graph): eager launches"}
    # tiny: 2 streams x 4 ops x 4 kernels, declared by the workload's launches
    assert floor["kernels_per_iteration"] == 32
    assert r["summary"]["host_us_per_kernel"] > 0 and r["summary"]["cost_us_per_kernel"] > 0
    assert len(r["samples"]["iteration_host_us_per_kernel"]) == 3


def test_compare_names_the_launch_mode_and_judges_host_time_per_kernel() -> None:
    from aorta_tui.hwqueue.compare import compare

    cfg = QueueRunConfig(workload="tiny_kernel_stress", streams=2, iterations=6, warmup=1,
                         device="cpu", size="tiny", detail_iterations=1)
    a, b = run_queue(cfg).to_json(), run_queue(cfg).to_json()
    b["config"]["graph"] = True
    report = compare(a, b)
    assert any("launch mode: BASE eager launches, TEST CUDA-graph replay" in n for n in report["notes"])
    rows = {r["metric"]: r for r in report["rows"]}
    assert rows["host_us_per_kernel"]["base_ci"] is not None  # within-run interval from samples
    assert rows["eager_floor_ratio"]["verdict"] == "not comparable"


# The measure pass's cost per kernel against the bare loop is a timing ratio: it is measured by
# benchmarks/measure_pass_cost.py, never asserted here.


@st.composite
def _plans(draw: Any) -> list[Launch]:
    n = draw(st.integers(1, 12))
    plan = []
    for j in range(n):
        waits = tuple(sorted(draw(st.sets(st.integers(0, j - 1), max_size=2)))) if j else ()
        plan.append(Launch(draw(st.integers(0, 3)), f"l{j}", lambda: None, waits=waits))
    return plan


class _Trace:
    """Records what the compiled calls do, as a GPU backend would do it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []
        self.n = 0

    def new_event(self, device: str) -> str:
        self.n += 1
        return f"e{self.n}"

    def bound_set_stream(self, stream: Any) -> Any:
        return lambda: self.log.append(("set", stream))

    def bound_wait(self, stream: Any, event: Any) -> Any:
        return lambda: self.log.append(("wait", (stream, event)))

    def bound_record(self, event: Any, stream: Any) -> Any:
        return lambda: self.log.append(("record", (event, stream)))


@settings(max_examples=150, deadline=None)
@given(plan=_plans())
def test_compiled_iteration_keeps_order_streams_and_dependencies(attack_tally: Any,
                                                                 plan: list[Launch]) -> None:
    failed = 1
    try:
        _check_compiled(plan)
        failed = 0
    finally:
        attack_tally.record("measure-pass compiler property", cases=1, failures=failed,
                            promise="launches in order on their streams, waits after records, "
                            "one stream switch per run")


def _check_compiled(plan: list[Launch]) -> None:
    trace = _Trace()
    launches = [Launch(la.stream, la.label, (lambda j=j: trace.log.append(("launch", j))),
                       waits=la.waits) for j, la in enumerate(plan)]
    streams = [f"s{i}" for i in range(4)]
    sync, ends = _plain_events(trace, ["cuda:0"] * 4, launches)
    for call in compile_plan(trace, streams, launches, sync, ends):
        call()
    current, recorded, order = None, set(), []
    for kind, what in trace.log:
        if kind == "set":
            current = what
        elif kind == "record":
            recorded.add(what[0])
        elif kind == "wait":
            assert what[1] in recorded  # never waits on an event not yet recorded
        else:
            order.append(what)
            assert current == streams[launches[what].stream]  # issued on its own stream
            for w in launches[what].waits:
                assert ("wait", (streams[launches[what].stream], sync[w])) in trace.log
    assert order == list(range(len(launches)))
    sets = sum(1 for kind, _ in trace.log if kind == "set")
    switches = 1 + sum(1 for a, b in zip(launches, launches[1:], strict=False)
                         if a.stream != b.stream)
    assert sets == switches  # one stream switch per run of launches on a stream, no more


# --- on a GPU: capture, replay, floors ------------------------------------------------------

@gpu
def test_graph_run_replays_per_stream_graphs_and_reports_floors() -> None:
    r = run_queue(QueueRunConfig(workload="tiny_kernel_stress", streams=4, iterations=10,
                                 warmup=2, device="cuda", detail_iterations=2, graph=True,
                                 params={"order": "per_stream"})).to_json()
    g = r["graph"]
    assert g["applied"] and g["mode"] == "per_stream" and g["graphs"] == 4
    assert g["kernels_declared"] == 4 * 100 * 4
    floor = r["floor"]
    assert isinstance(floor["eager_us_per_launch"], float) and floor["eager_us_per_launch"] > 0
    assert isinstance(floor["graph_us_per_launch"], float) and floor["graph_us_per_launch"] > 0
    assert r["summary"]["eager_floor_ratio"] > 0 and r["summary"]["graph_floor_ratio"] > 0
    assert r["config"]["graph"] is True
    if r["timing"]["kernel_source"] == "cupti":  # every captured kernel ran in every replay
        dropped = r["timing"]["profiler"]["implausible_timestamps_dropped"]  # a CUPTI clock fault
        assert r["timing"]["kernels_recorded"] + dropped == 2 * 4 * 100 * 4


@gpu
def test_replay_computes_what_the_eager_launches_compute() -> None:
    import torch

    from aorta_tui.hwqueue.backends import select_backend
    from aorta_tui.hwqueue.graphs import capture
    from aorta_tui.hwqueue.workloads.base import QueueWorkloadContext

    backend = select_backend("cuda")
    wl = workload_class("tiny_kernel_stress")({"ops_per_stream": 3})
    wl.setup(QueueWorkloadContext(torch=torch, dtype=torch.float32, stream_devices=["cuda:0"] * 2,
                             backend="cuda"))
    streams = backend.make_streams(["cuda:0"] * 2)
    plan = wl.iteration(0)
    for la in plan:
        with torch.cuda.stream(streams[la.stream]):
            la.fn()
    torch.cuda.synchronize()
    expected = [o.clone() for _, o in wl.bufs]
    captured = capture(backend, streams, plan)
    for _, o in wl.bufs:
        o.zero_()
    torch.cuda.synchronize()
    for la in captured.plan:
        with torch.cuda.stream(streams[la.stream]):
            la.fn()
    torch.cuda.synchronize()
    for (_, o), e in zip(wl.bufs, expected, strict=True):
        assert torch.equal(o, e)


@gpu
def test_a_workload_with_cross_stream_waits_is_captured_as_one_iteration_graph() -> None:
    r = run_queue(QueueRunConfig(workload="fsdp_tp", streams=4, iterations=4, warmup=1,
                                 device="cuda", size="tiny", detail_iterations=1, graph=True)).to_json()
    assert r["graph"]["mode"] == "whole_iteration" and r["graph"]["graphs"] == 1
    assert r["summary"]["throughput"] > 0


@gpu
def test_graph_with_event_timing_times_each_replay() -> None:
    r = run_queue(QueueRunConfig(workload="hetero_kernels", streams=4, iterations=3, warmup=1,
                                 device="cuda", size="tiny", timing="events", graph=True)).to_json()
    assert r["graph"]["applied"]
    assert r["timing"]["launches_recorded"] == 3 * 4  # one replay per stream per iteration
