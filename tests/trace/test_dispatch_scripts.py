"""The H200 check of issue 24 is one call with one table (scripts/gpu_dispatch_check.sh ->
scripts/dispatch_check.py): what of it can run on this CPU box runs here. A stage that fails
(no GPU) is a FAIL row, a stage that would outrun the budget a NOT RUN row with the reason,
and the table and the per-stage summary always come out; the benchmark's summary and the
profiler-trace parser the no-backlog reference uses are checked on their own."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CUDA_INJECTION64_PATH": ""}


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "dispatch_check.py"), "--out", "out", *args],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=timeout)


def test_a_budget_too_small_says_not_run_for_every_stage(tmp_path: Path) -> None:
    r = _check(tmp_path, "--deadline-s", "20")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    table = (tmp_path / "out" / "dispatch-check.md").read_text()
    for stage in ("build", "backlog", "nobacklog", "counts", "paced", "crosscheck", "queue", "profiler", "cost"):
        assert f"| {stage}: NOT RUN | " in table and f"| {stage} | NOT RUN |" in table, stage


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_failing_stages_are_rows_and_the_refusal_stage_runs_here(tmp_path: Path) -> None:
    """No GPU: backlog fails (no libcuda to attach to), the queue stage's auto run fails (no GPU)
    and its --timing cupti --ebpf-trace case is refused with exit 2 as it must be on the H200."""
    r = _check(tmp_path, "--stages", "backlog,queue", "--deadline-s", "200")
    assert r.returncode == 1, r.stdout + r.stderr
    table = (tmp_path / "out" / "dispatch-check.md").read_text()
    assert "| backlog: stage raised | SystemExit" in table
    assert "| queue --timing cupti --ebpf-trace: refused up front | exit 2: error: --timing cupti with --ebpf-trace" in table
    assert table.count("| PASS |") == 1 and "| backlog | FAIL |" in table and "| queue | FAIL |" in table
    assert "stage wall time" in table
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run([sys.executable, str(REPO / "scripts" / "dispatch_check.py"), "--out", "o", "--stages", "nope"],
                       cwd=tmp_path, env=ENV, capture_output=True, text=True, check=True)


def test_benchmark_summary_pairs_by_round_and_judges_each_target() -> None:
    bench = _module(REPO / "benchmarks" / "dispatch_overhead.py", "dispatch_overhead_t")
    rounds = []
    for r in range(12):
        base = 4600 + (r % 3) * 50  # the untraced figure drifts between rounds; pairs remove it
        rounds.append([{"round": r, "mode": "bare", "valid": True, "ns_per_launch": base},
                       {"round": r, "mode": "collector", "valid": True, "ns_per_launch": base + 700 + r % 2 * 20},
                       {"round": r, "mode": "full", "valid": True, "ns_per_launch": base + 2600},
                       {"round": r, "mode": "full-ebpf", "valid": r % 4 != 0, "ns_per_launch": base + 5000}])
    s = bench.summarise(rounds, ["bare", "collector", "full", "full-ebpf"])
    assert s["targets"] == {"collector": "met", "full": "missed"}
    col = s["modes"]["collector"]["added_vs_bare_ns"]
    assert col["pairs"] == 12 and 700 <= col["median"] <= 720 and col["ci95"][1] <= 1000
    assert s["modes"]["full-ebpf"]["invalid_runs"] == 3 and s["modes"]["full-ebpf"]["added_vs_bare_ns"]["pairs"] == 9
    table = "\n".join(bench.c_table(s))
    assert "collector target (added <= 1 us per launch, 95% CI upper end): met" in table
    assert "full target (added <= 2 us per launch, 95% CI upper end): missed" in table
    assert set(bench.C_MODES) == {"bare", "collector-activity", "collector", "ebpf", "full-ebpf", "full"}


@pytest.fixture(scope="module")
def backlog() -> ModuleType:
    pytest.importorskip("torch")
    return _module(REPO / "scripts" / "dispatch" / "backlog.py", "backlog_t")


def test_profiler_reference_pairs_launches_and_kernels_by_correlation(backlog: ModuleType) -> None:
    events = [{"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ts": 100.0, "args": {"correlation": 7}},
              {"name": "vectorized_elementwise_kernel", "cat": "kernel", "ts": 109.5, "args": {"correlation": 7}},
              {"name": "cudaLaunchKernel", "cat": "cuda_runtime", "ts": 200.0, "args": {"correlation": 8}},
              {"name": "cudaStreamSynchronize", "cat": "cuda_runtime", "ts": 201.0, "args": {"correlation": 9}},
              {"name": "other_kernel", "cat": "kernel", "ts": 250.0, "args": {"correlation": 9}}]
    assert backlog.delays_from_trace(events) == [9500.0]  # 8 has no kernel, 9 is no launch
    assert backlog.delays_from_trace(json.loads(json.dumps({"x": events}))["x"][::-1]) == [9500.0]


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
                     max_leaves=20)
_event = st.fixed_dictionaries({}, optional={
    "name": st.sampled_from(["cudaLaunchKernel", "cuLaunchKernel", "x"]) | st.text(max_size=5),
    "cat": st.sampled_from(["kernel", "cuda_runtime"]), "ts": st.floats(-1e9, 1e9) | _json,
    "args": st.fixed_dictionaries({}, optional={"correlation": st.integers(0, 5) | _json}) | _json})


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=300, deadline=None)
@given(st.lists(_event | _json, max_size=30) | _json)
def test_profiler_trace_parser_never_raises_and_only_pairs_real_pairs(backlog: ModuleType, events: object) -> None:
    out = backlog.delays_from_trace(events)
    assert isinstance(out, list) and all(isinstance(v, float) for v in out)
    if isinstance(events, list):
        kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel"]
        assert len(out) <= len(kernels)
