"""Diff: the real H200 snapshot against the real CPU-box one, ranking rules, volatility,
upstream files, and properties of the diff on arbitrary field changes."""

from __future__ import annotations

import copy
import json

import hypothesis.strategies as st
import pytest
from envsnap_helpers import FIXTURES, typed
from envsnap_helpers import load_fixture as _load
from hypothesis import HealthCheck, given, settings

from aorta_tui.envsnap import diff_snapshots, iter_leaves
from aorta_tui.envsnap.diff import render_text
from aorta_tui.envsnap.rules import classify


def diff(a: dict, b: dict, **options):
    """``diff_snapshots`` of two snapshots' JSON, each read as ``load_snapshot`` reads it."""
    return diff_snapshots(typed(a), typed(b), **options)


def by_path(report) -> dict:
    return {e.path: e for e in report.entries}


def test_cpu_box_against_h200_ranks_the_gpu_stack_as_numerics(cpu_box: dict, h200: dict) -> None:
    report = diff(cpu_box, h200)
    entries = by_path(report)
    cublas = entries["cuda.cublas.version"]
    assert (cublas.change, cublas.rank, cublas.a_value, cublas.b_value) == ("changed", "numerics", None, "13.1.0")
    assert cublas.a_state == "not_applicable" and cublas.provenance_b.startswith("api:cublasGetProperty")
    arch = entries["gpus[0].architecture"]
    assert (arch.change, arch.rank, arch.b_value) == ("added", "numerics", "sm_90")
    assert entries["gpus[0].compute_units"].b_value == 132
    tf32 = entries["torch.tf32_matmul"]
    assert (tf32.rank, tf32.a_state, tf32.b_value) == ("numerics", "not_applicable", False)
    assert entries["torch.tf32_cudnn"].b_value is True
    assert entries["driver.nvidia_version"].b_value == "580.159.04"
    assert entries["driver.nvidia_version"].rank == "numerics"
    assert entries["torch.version"].a_value == "2.13.0+cpu" and entries["torch.version"].b_value == "2.11.0+cu130"
    # clocks/power limits are scheduling; the CPU model and library paths informational
    assert entries["gpus[0].power_limit_w"].rank == "scheduling"
    assert entries["gpus[0].clock_sm_max_mhz"].rank == "scheduling"
    assert entries["host.cpu_model"].rank == "informational"
    assert entries["cuda.cublas.path"].rank == "informational"
    # volatile fields (timestamps, load, current clocks, temperature) are hidden by default
    assert "probe.captured_at" not in entries and "host.load_average" not in entries
    assert "gpus[0].temperature_c" not in entries and report.hidden_volatile > 0
    assert report.has_relevant_differences
    ranks = [e.rank for e in report.entries]
    assert ranks == sorted(ranks, key=("numerics", "scheduling", "informational").index)


def test_volatile_fields_appear_with_include_volatile(cpu_box: dict, h200: dict) -> None:
    everything = by_path(diff(cpu_box, h200, include_volatile=True))
    assert everything["probe.captured_at"].volatile
    assert everything["gpus[0].temperature_c"].b_value == 42


def test_identical_snapshots_have_no_differences(h200: dict) -> None:
    report = diff(h200, copy.deepcopy(h200), include_volatile=True)
    assert report.entries == [] and not report.has_relevant_differences
    assert report.compared_fields == sum(1 for _ in iter_leaves(h200))


def _set_var(snap: dict, name: str, value: str) -> dict:
    snap["env_vars"][name].update(value=value, set=True)
    return snap


@pytest.mark.parametrize(("name", "rank"), [
    ("NVIDIA_TF32_OVERRIDE", "numerics"),
    ("CUBLAS_WORKSPACE_CONFIG", "numerics"),
    ("NCCL_ALGO", "numerics"),
    ("HIPBLASLT_OVERRIDE_COMPUTE_TYPE_XF32", "numerics"),
    ("NCCL_MAX_NCHANNELS", "scheduling"),
    ("CUDA_DEVICE_MAX_CONNECTIONS", "scheduling"),
    ("GPU_MAX_HW_QUEUES", "scheduling"),
    ("TORCH_LOGS", "informational"),
    ("HIPBLASLT_LOG_LEVEL", "informational"),
])
def test_env_var_difference_is_ranked_by_its_category(h200: dict, name: str, rank: str) -> None:
    other = _set_var(copy.deepcopy(h200), name, "1")
    report = diff(h200, other)
    assert [(e.path, e.rank, e.a_value, e.b_value) for e in report.entries] == [
        (f"env_vars.{name}", rank, None, "1")]
    assert report.has_relevant_differences is (rank != "informational")


def test_only_timestamps_differ_means_no_relevant_difference(h200: dict) -> None:
    later = copy.deepcopy(h200)
    later["probe"]["captured_at"]["value"] = "2027-01-01T00:00:00Z"
    later["host"]["load_average"]["value"] = [9.0, 9.0, 9.0]
    later["gpus"][0]["clock_sm_mhz"]["value"] = 1980
    report = diff(h200, later)
    assert report.entries == [] and report.hidden_volatile == 3


def test_a_removed_gpu_is_reported_field_by_field(h200: dict) -> None:
    fewer = copy.deepcopy(h200)
    fewer["gpus"] = []
    entries = by_path(diff(h200, fewer))
    assert entries["gpus[0].name"].change == "removed" and entries["gpus[0].name"].rank == "numerics"


@pytest.mark.parametrize(("path", "rank", "volatile"), [
    ("rocm.hipblaslt.header_version", "numerics", False),
    ("rocm.root", "informational", False),
    ("driver.amdgpu_params", "scheduling", False),
    ("driver.mps_daemon", "scheduling", False),
    ("torch.sdpa_flash", "numerics", False),
    ("torch.deterministic_algorithms", "numerics", False),
    ("torch.float32_matmul_precision", "numerics", False),
    ("torch.allocator_backend", "scheduling", False),
    ("torch.loaded_libraries.cublas.version", "numerics", False),
    ("torch.loaded_libraries.cublas.path", "informational", False),
    ("torch.import_seconds", "informational", True),
    ("gpus[3].partition_mode", "scheduling", False),
    ("gpus[0].clock_sm_mhz", "scheduling", True),
    ("host.cgroup_cpu_limit", "scheduling", False),
    ("host.hostname_hash", "informational", True),
    ("python.packages.triton", "numerics", False),
    ("python.executable", "informational", False),
])
def test_ranking_rules(path: str, rank: str, volatile: bool) -> None:
    assert classify(path) == (rank, volatile)


def test_two_upstream_files_diff_generically(upstream_cpu_box: dict, upstream_h200: dict) -> None:
    report = diff(upstream_cpu_box, upstream_h200)
    entries = by_path(report)
    assert report.mode == "upstream"
    assert entries["pytorch_version"].rank == "numerics"
    assert entries["pytorch_version"].b_value == "2.11.0+cu130"
    assert entries["host.glibc_version"].b_value == "2.39"
    assert "captured_at" not in entries  # volatile
    assert report.has_relevant_differences


def test_upstream_against_aorta_tui_compares_common_fields(upstream_h200: dict, h200: dict) -> None:
    report = diff(upstream_h200, h200)
    assert report.mode == "mixed" and report.notes
    # same machine, same interpreter, same environment: the common fields agree
    assert report.compared_fields > 100
    assert not report.has_relevant_differences, render_text(report)
    # and a real difference on the aorta-tui side shows up under aorta-tui's path
    changed = _set_var(copy.deepcopy(h200), "DISABLE_TF32", "1")
    entries = by_path(diff(upstream_h200, changed))
    assert entries["env_vars.DISABLE_TF32"].rank == "numerics"
    assert entries["env_vars.DISABLE_TF32"].provenance_a.startswith("upstream env.json")
    # a variable upstream does not record is not a common field: no false "added"
    only_ours = _set_var(copy.deepcopy(h200), "NCCL_ALGO", "Ring")
    assert "env_vars.NCCL_ALGO" not in by_path(diff(upstream_h200, only_ours))


def test_upstream_cpu_box_against_h200_flags_torch(upstream_cpu_box: dict, h200: dict) -> None:
    entries = by_path(diff(upstream_cpu_box, h200))
    torch = entries["torch.version"]  # upstream's venv on the CPU box had no torch
    assert (torch.change, torch.rank, torch.a_value, torch.b_value) == (
        "changed", "numerics", None, "2.11.0+cu130")
    assert entries["host.glibc"].a_value == "2.36" and entries["host.glibc"].b_value == "2.39"


def test_report_to_dict_is_json(cpu_box: dict, h200: dict) -> None:
    data = json.loads(json.dumps(diff(cpu_box, h200).to_dict()))
    assert data["has_relevant_differences"] is True
    assert sum(data["counts"].values()) == len(data["entries"])
    first = data["entries"][0]
    assert set(first) >= {"path", "section", "change", "rank", "a_value", "b_value", "provenance_a", "provenance_b"}


def test_render_text_groups_by_section(cpu_box: dict, h200: dict) -> None:
    text = render_text(diff(cpu_box, h200))
    assert "[cuda]" in text and "[gpus]" in text and "cuda.cublas.version" in text
    assert text.index("[cuda]") < text.index("[python]")  # sections with numerics first


_H200 = _load("h200.json")
_PATHS = sorted(p for p, _ in iter_leaves(_H200))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sets(st.sampled_from(_PATHS), min_size=1, max_size=8), st.integers(0, 10**6))
def test_every_changed_field_is_reported_exactly_once(paths: set[str], marker: int) -> None:
    other = copy.deepcopy(_H200)
    leaves = dict(iter_leaves(other))
    for path in paths:
        leaves[path]["value"] = f"mutated-{marker}"
        leaves[path]["state"] = "ok"
    report = diff(_H200, other, include_volatile=True)
    assert {e.path for e in report.entries} == paths
    assert all(e.change == "changed" and e.b_value == f"mutated-{marker}" for e in report.entries)
    swapped = diff(other, _H200, include_volatile=True)
    assert sorted(json.dumps([e.path, e.a_value, e.b_value]) for e in swapped.entries) == sorted(
        json.dumps([e.path, e.b_value, e.a_value]) for e in report.entries)


def test_fixture_files_exist() -> None:
    assert (FIXTURES / "h200.json").is_file() and (FIXTURES / "cpu-box.json").is_file()
