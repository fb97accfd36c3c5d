"""Every queue workload runs end to end on the CPU backend (tiny sizes, emulated streams)."""

from __future__ import annotations

import pytest

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.core.events import Measurement, Progress
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.hwqueue.run import run_queue
from aorta_tui.hwqueue.workloads import WORKLOADS, all_infos, workload_class

UPSTREAM_CATEGORIES = {  # category and recommended streams as amd-aorta 0.3.0 lists them
    "hetero_kernels": ("latency_sensitive", 2, 64, 8),
    "tiny_kernel_stress": ("latency_sensitive", 1, 64, 16),
    "large_gemm_only": ("latency_sensitive", 1, 16, 4),
    "graph_subgraphs": ("latency_sensitive", 4, 32, 8),
    "fsdp_tp": ("distributed", 4, 16, 10),
    "moe": ("distributed", 4, 32, 16),
    "activation_ckpt": ("distributed", 4, 12, 6),
    "grad_accum": ("distributed", 2, 16, 6),
    "comms_compute_overlap": ("distributed", 1, 32, 4),
    "continuous_batch": ("inference", 4, 16, 8),
    "speculative_decode": ("inference", 4, 12, 6),
    "rag_pipeline": ("inference", 4, 12, 8),
    "async_dataload": ("pipeline", 4, 12, 6),
    "zero_offload": ("pipeline", 4, 12, 6),
    "torch_compile": ("pipeline", 4, 12, 8),
}


def test_registry_has_the_fifteen_with_upstream_categories_and_ranges() -> None:
    infos = {i.name: i for i in all_infos()}
    assert set(infos) == set(UPSTREAM_CATEGORIES)
    for name, (cat, lo, hi, rec) in UPSTREAM_CATEGORIES.items():
        i = infos[name]
        assert (i.category, i.min_streams, i.max_streams, i.recommended_streams) == (cat, lo, hi, rec)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workload_runs_on_cpu_and_every_figure_is_real_or_explained(name: str) -> None:
    info = workload_class(name).info()
    streams = min(max(info.min_streams, 4), info.max_streams)
    events: list = []
    cfg = QueueRunConfig(workload=name, streams=streams, iterations=2, warmup=1, device="cpu",
                         size="tiny", keep_timeline=True)
    r = run_queue(cfg, on_event=events.append).to_json()

    assert r["schema_version"] == 1 and r["emulated"] is True
    assert r["workload"]["name"] == name and r["config"]["streams"] == streams
    s = r["summary"]
    assert s["throughput"] > 0 and s["wall_s"] > 0
    assert r["summary_units"]["throughput"] == info.throughput_unit
    assert 0 < s["achieved_concurrency"] <= streams
    assert s["latency_p50_ms"] > 0 and s["latency_p50_ms"] <= s["latency_p99_ms"]
    # not measurable in CPU emulation: null with a reason, never 0.0
    for key in ("launch_delay_mean_us", "queue_depth_max"):
        assert s[key] is None
    assert "synchronously" in r["unavailable"]["launch_delay_us"]
    assert r["metrics"]["memory"] is None and r["unavailable"]["memory"]
    # every recorded launch is in the timeline, on a stream that exists, in time order per stream
    tl = r["timeline"]
    assert len(tl) == r["timing"]["launches_recorded"] > 0
    assert {row[1] for row in tl} <= set(range(streams))
    for row in tl:
        assert row[5] <= row[6]  # device start <= end
    used = {row[1] for row in tl}
    for ps in r["metrics"]["per_stream"]:
        if ps["stream"] in used:
            assert ps["busy_ms"] > 0
        else:
            assert ps["busy_ms"] is None and f"per_stream[{ps['stream']}].busy_ms" in r["unavailable"]
    # throughput is the declared work over the measured wall time
    expected = r["workload"]["work_per_iteration"] * 2 / s["wall_s"] / workload_class(name).throughput_scale
    assert s["throughput"] == pytest.approx(expected)
    assert sum(r["samples"]["iteration_period_ms"]) == pytest.approx(s["wall_s"] * 1e3)
    kinds = [type(e) for e in events]
    assert Progress in kinds and kinds[-1] is Measurement
    assert events[-1].values == s


def test_output_is_written_and_announced(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from aorta_tui.core.events import ResultWritten

    events: list = []
    out = tmp_path / "r.json"
    r = run_queue(QueueRunConfig(workload="tiny_kernel_stress", streams=1, iterations=1, warmup=0,
                                 device="cpu", size="tiny"), on_event=events.append, output=out).to_json()
    import json

    assert json.loads(out.read_text())["run_id"] == r["run_id"]
    assert isinstance(events[-1], ResultWritten) and events[-1].path == str(out)


def test_dtype_is_selectable() -> None:
    r = run_queue(QueueRunConfig(workload="hetero_kernels", streams=2, iterations=1, warmup=0,
                                 device="cpu", size="tiny", dtype="bfloat16")).to_json()
    assert r["workload"]["dtype"] == "bfloat16"


def test_sync_modes_all_measure() -> None:
    for mode in ("per_iteration", "end_only", "none"):
        r = run_queue(QueueRunConfig(workload="tiny_kernel_stress", streams=2, iterations=2,
                                     warmup=0, device="cpu", size="tiny", sync_mode=mode)).to_json()
        assert r["config"]["sync_mode"] == mode and r["summary"]["throughput"] > 0


def test_params_are_typed_and_unknown_ones_suggest_a_fix() -> None:
    r = run_queue(QueueRunConfig(workload="tiny_kernel_stress", streams=1, iterations=1, warmup=0,
                                 device="cpu", size="tiny", params={"ops_per_stream": "3"})).to_json()
    assert r["workload"]["params"]["ops_per_stream"] == 3
    assert r["timing"]["launches_recorded"] == 3
    with pytest.raises(UsageError) as exc:
        workload_class("tiny_kernel_stress")({"ops_per_strem": 3})
    assert "ops_per_stream" in exc.value.render()
    with pytest.raises(UsageError, match="expected an integer"):
        workload_class("tiny_kernel_stress")({"ops_per_stream": "many"})


def test_bad_configs_fail_before_any_work() -> None:
    with pytest.raises(UsageError) as exc:
        QueueRunConfig(workload="hetero_kernel", streams=2).validate()
    assert "hetero_kernels" in exc.value.render()
    with pytest.raises(UsageError, match="4..32"):
        QueueRunConfig(workload="moe", streams=2, device="cpu").validate()
    with pytest.raises(UsageError, match="sync mode"):
        QueueRunConfig(workload="moe", streams=4, device="cpu", sync_mode="sometimes").validate()
    with pytest.raises(UsageError, match="cannot be spread"):
        QueueRunConfig(workload="moe", streams=4, devices=["cuda:0", "cuda:1"]).validate()


def test_cuda_without_a_gpu_is_an_environment_problem() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(EnvironmentProblem):
        run_queue(QueueRunConfig(workload="tiny_kernel_stress", streams=1, device="cuda"))


def test_ebpf_trace_on_a_cpu_run_is_refused_up_front() -> None:
    with pytest.raises(UsageError, match="nothing to trace"):
        QueueRunConfig(workload="tiny_kernel_stress", streams=1, device="cpu",
                       ebpf_trace=True).validate()


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_timing_cupti_with_ebpf_trace_is_refused_up_front_with_the_reason(device: str) -> None:
    """Issue 24 item 2: one CUPTI subscriber per process; the collector of --ebpf-trace holds it
    during the measured pass, so --timing cupti's profiler would record nothing (was exit 70)."""
    with pytest.raises(UsageError, match="CUPTI allows one subscriber") as err:
        QueueRunConfig(workload="tiny_kernel_stress", streams=1, device=device, timing="cupti",
                       ebpf_trace=True).validate()
    assert err.value.exit_code == 2 and "--timing auto" in (err.value.hint or "")


def test_timing_cupti_with_ebpf_trace_cli_is_exit_2_before_any_work(tmp_path) -> None:
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "run", "tiny_kernel_stress", "--device", "cuda",
                        "--timing", "cupti", "--ebpf-trace"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "CUPTI allows one" in p.stderr and "--timing auto" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "aorta-out").exists() or not any((tmp_path / "aorta-out").rglob("*.json"))


def test_timing_cupti_with_no_kernel_records_is_an_environment_problem_naming_the_injected_tool(monkeypatch) -> None:
    """A CUPTI client injected into the process (aorta-tui's own collector under `trace queue --
    aorta-tui queue run --timing cupti`) leaves the profiler nothing: exit 3 with the reason and
    the fix, not exit 70 (issue 24 item 2)."""
    from aorta_tui.hwqueue import harness

    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/x/libaorta_cupti.so")
    with pytest.raises(EnvironmentProblem) as err:
        harness._no_device_activity()
    assert err.value.exit_code == 3 and "CUDA_INJECTION64_PATH=/x/libaorta_cupti.so" in err.value.message
    assert "--device-timestamps off" in (err.value.hint or "")
