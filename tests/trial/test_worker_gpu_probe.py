"""GPU tool probe and parsers; the gpu-marked tests run the real tool on a GPU machine."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.trial import gpu_probe
from aorta_tui.trial.gpu_probe import (
    GpuProcess,
    GpuSampler,
    GpuTools,
    _idle_reading,
    counter_increase,
    parse_amd_smi_ecc,
    parse_amd_smi_process,
    parse_amd_smi_usage,
    parse_nvidia_compute_apps,
    parse_nvidia_ecc,
    parse_nvidia_utilisation,
    parse_rocm_smi_pids,
    parse_rocm_smi_use,
)

NVIDIA_APPS = """\
4242, GPU-5f0c7a1e-3b7a-9d1c-2e4f-0a1b2c3d4e5f, 1536
4243, GPU-5f0c7a1e-3b7a-9d1c-2e4f-0a1b2c3d4e5f, [N/A]
"""
NVIDIA_UTIL = """\
GPU-5f0c7a1e-3b7a-9d1c-2e4f-0a1b2c3d4e5f, 0
GPU-11111111-2222-3333-4444-555555555555, [Not Supported]
"""
AMD_SMI_PROCESS = """[
  {"gpu": 0, "process_list": [
     {"process_info": {"name": "python3", "pid": 4242,
        "memory_usage": {"gtt_mem": {"value": 2097152, "unit": "B"},
                         "cpu_mem": {"value": 0, "unit": "B"},
                         "vram_mem": {"value": 512, "unit": "MB"}},
        "mem_usage": {"value": 123, "unit": "B"},
        "usage": {"gfx": {"value": 0, "unit": "ns"}}}}]},
  {"gpu": 1, "process_list": [{"process_info": "No running processes detected"}]}
]"""
AMD_SMI_USAGE = """[
  {"gpu": 0, "usage": {"gfx_activity": {"value": 0, "unit": "%"}, "umc_activity": {"value": 3, "unit": "%"}}},
  {"gpu": 1, "usage": {"gfx_activity": 97}}
]"""
ROCM_SMI_PIDS = '{"system": {"PID4242": "python3, 1, 1073741824, 0, 0", "PID77": "rccl, 2, unknown, 0, 0"}}'
ROCM_SMI_USE = '{"card0": {"GPU use (%)": "0"}, "card1": {"GPU use (%)": "12"}}'


def test_nvidia_parsers() -> None:
    apps = parse_nvidia_compute_apps(NVIDIA_APPS + "garbage line\n")
    assert apps == [
        GpuProcess(4242, "GPU-5f0c7a1e-3b7a-9d1c-2e4f-0a1b2c3d4e5f", 1536 * 1024**2),
        GpuProcess(4243, "GPU-5f0c7a1e-3b7a-9d1c-2e4f-0a1b2c3d4e5f", None),
    ]
    util = parse_nvidia_utilisation(NVIDIA_UTIL)
    assert util == {"GPU-5f0c7a1e-3b7a-9d1c-2e4f-0a1b2c3d4e5f": 0.0,
                    "GPU-11111111-2222-3333-4444-555555555555": None}  # fmt: skip


def test_amd_parsers() -> None:
    assert parse_amd_smi_process(AMD_SMI_PROCESS) == [GpuProcess(4242, "0", 512 * 1000**2)]
    assert parse_amd_smi_usage(AMD_SMI_USAGE) == {"0": 0.0, "1": 97.0}
    assert parse_rocm_smi_pids(ROCM_SMI_PIDS) == [GpuProcess(4242, "*", 1073741824), GpuProcess(77, "*", None)]
    assert parse_rocm_smi_use(ROCM_SMI_USE) == {"0": 0.0, "1": 12.0}
    for bad in ("", "not json", "[1, 2]", '{"system": 5}', "null"):
        assert parse_amd_smi_process(bad) == [] and parse_rocm_smi_pids(bad) == []
        assert parse_amd_smi_usage(bad) == {} and parse_rocm_smi_use(bad) == {}


def test_idle_reading_uses_only_the_trees_gpus() -> None:
    mine = [GpuProcess(1, "A", 10)]
    assert _idle_reading(mine, {"A": 0.0, "B": 90.0}, "nvidia-smi").idle is True
    assert _idle_reading(mine, {"A": 5.0, "B": 0.0}, "nvidia-smi").idle is False
    none = _idle_reading([], {"A": 0.0}, "nvidia-smi")
    assert none.idle is None and "no GPU context" in (none.reason or "")
    unknown = _idle_reading(mine, {"A": None}, "nvidia-smi")
    assert unknown.idle is None and "no utilisation" in (unknown.reason or "")
    # rocm-smi cannot say which GPU a process uses: all GPUs must be idle.
    assert _idle_reading([GpuProcess(1, "*", 1)], {"0": 0.0, "1": 3.0}, "rocm-smi").idle is False


def test_probe_is_cached_and_explains_itself() -> None:
    first = gpu_probe.probe()
    assert gpu_probe.probe() is first
    if first.tool is None:
        assert first.reason and gpu_probe.sampling_unavailable() == first.reason
    else:
        assert first.vendor in ("nvidia", "amd") and first.path


def test_sampler_against_a_fake_tool_on_path(tmp_path: Path) -> None:
    """A real sampler thread running a real executable that prints nvidia-smi's format.

    Stands in for the GPU tool only (there is no GPU here); the gpu-marked test below runs
    the real nvidia-smi.
    """
    script = tmp_path / "nvidia-smi"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys
        if any(a.startswith("--query-compute-apps") for a in sys.argv):
            print(f"{{os.getppid()}}, GPU-aaaa, 300")
        elif any("ecc.errors" in a for a in sys.argv):
            # Each reading finds two more uncorrectable errors; corrected ones stay put.
            state = "{tmp_path}/ecc-count"
            n = int(open(state).read()) if os.path.exists(state) else 0
            open(state, "w").write(str(n + 2))
            print(f"GPU-aaaa, {{n}}, 5")
            print("GPU-bbbb, [N/A], [N/A]")
        else:
            print("GPU-aaaa, 0")
    """))
    script.chmod(0o755)
    tools = GpuTools("nvidia", "nvidia-smi", str(script), None)
    # Root the "tree" at this test process: the fake tool reports its parent (us).
    sampler = GpuSampler(os.getpid(), tools=tools, interval_s=0.05, first_after_s=0.0,
                         want_utilisation=True)  # fmt: skip
    sampler.start()
    for _ in range(2):
        assert sampler.sampled.wait(10)
        sampler.sampled.clear()
    sampler.stop()
    peak, reason, source = sampler.result()
    assert peak == 300 * 1024**2 and reason is None
    assert source and "lower bound" in source
    reading = sampler.latest_utilisation()
    assert reading is not None and reading.idle is True and reading.idle_since is not None
    # Error counters: read at the first sample and again at stop.
    assert sampler.counters_delta == {"GPU-aaaa": {"ecc_uncorrected": 2}}
    assert sampler.counters_reason is None


def test_sampler_reports_a_trial_shorter_than_the_first_sample() -> None:
    tools = GpuTools("nvidia", "nvidia-smi", "/nonexistent/nvidia-smi", None)
    sampler = GpuSampler(os.getpid(), tools=tools, first_after_s=5.0)
    sampler.start()
    sampler.stop()
    peak, reason, _ = sampler.result()
    assert peak is None and reason and "ended before the first GPU sample" in reason
    assert sampler.counters_delta is None and "before the first GPU sample" in (sampler.counters_reason or "")


def test_error_counter_parsers_and_increase() -> None:
    nv = parse_nvidia_ecc("GPU-a, 3, 10\nGPU-b, [N/A], [N/A]\nbad\n")
    assert nv == {"GPU-a": {"ecc_uncorrected": 3, "ecc_corrected": 10}, "GPU-b": {}}
    amd = parse_amd_smi_ecc(
        '[{"gpu": 0, "ecc": {"total_correctable_count": 4, "total_uncorrectable_count": 0}},'
        ' {"gpu": 1, "ecc": {"total_correctable_count": "N/A", "total_uncorrectable_count": {"value": 1}}}]'
    )
    assert amd == {"0": {"ecc_uncorrected": 0, "ecc_corrected": 4}, "1": {"ecc_uncorrected": 1}}
    after = {"GPU-a": {"ecc_uncorrected": 5, "ecc_corrected": 10}, "GPU-c": {"ecc_uncorrected": 9}}
    assert counter_increase(nv, after) == {"GPU-a": {"ecc_uncorrected": 2}}


needs_nvidia = pytest.mark.skipif(
    gpu_probe.probe().tool != "nvidia-smi", reason="needs an NVIDIA GPU with nvidia-smi"
)


@pytest.mark.gpu
@needs_nvidia
def test_real_gpu_peak_memory_and_idle_hang(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from aorta_tui.trial.hang import HangPolicy
    from aorta_tui.trial.supervisor import ProcessSpec, run_process

    code = (
        "import torch, time, sys\n"
        "x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda')\n"
        "torch.cuda.synchronize(); print('allocated', flush=True)\n"
        "time.sleep(100)\n"
    )
    spec = ProcessSpec(
        argv=[sys.executable, "-c", code], env=dict(os.environ), cwd=tmp_path,
        stdout_path=tmp_path / "o.log", stderr_path=tmp_path / "e.log", timeout_s=45,
        # Output silence off: the hang must rest on gpu_idle and io_idle together.
        hang=HangPolicy(window_s=3.0, grace_s=2.0, disabled=frozenset({"output_silence"})),
        gpu_sample_interval_s=0.5,
    )  # fmt: skip
    out = run_process(spec)
    assert out.gpu_peak_mem_bytes is not None, out.gpu_mem_reason
    assert out.gpu_peak_mem_bytes >= 1 << 30
    assert out.hang is not None, out.to_dict()
    assert set(out.hang.held()) == {"gpu_idle", "io_idle"}, out.hang.to_dict()
    assert out.hang_note is None
    # An H200 runs with ECC on; a healthy one gains no error during the trial.
    assert out.gpu_counters_delta == {}, out.gpu_counters_reason


@pytest.mark.gpu
@needs_nvidia
def test_real_tool_answers() -> None:
    tools = gpu_probe.probe()
    assert shutil.which("nvidia-smi") == tools.path
    util = gpu_probe.query_utilisation(tools)
    assert util and all(k.startswith("GPU-") for k in util)
    counters = gpu_probe.query_error_counters(tools)
    assert set(counters) == set(util)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=400), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["gpu", "pid", "process_list", "process_info", "memory_usage", "vram_mem",
                         "value", "unit", "usage", "gfx_activity", "system", "PID12", "card0",
                         "GPU use (%)", "mem", "mem_usage", "ecc",
                         "total_uncorrectable_count", "total_correctable_count"]), children, max_size=4),
    max_leaves=12,
).map(json.dumps)))
def test_parsers_never_raise(text: str) -> None:
    for parse in (parse_nvidia_compute_apps, parse_nvidia_utilisation, parse_amd_smi_process,
                  parse_amd_smi_usage, parse_rocm_smi_pids, parse_rocm_smi_use, parse_nvidia_ecc,
                  parse_amd_smi_ecc):  # fmt: skip
        parse(text)
