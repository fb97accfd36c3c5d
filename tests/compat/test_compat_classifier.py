"""Issue 14, item 2: the classifier catches what upstream AORTA's does, and upstream's detector
ids work in ``disable_detectors``. Sample lines here are our own realistic lines (upstream's
own samples are run by test_compat_corpus.py, read from its sdist)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aorta_tui.classify import PatternRule, classify
from aorta_tui.classify.dmesg import match_kernel_line
from aorta_tui.classify.upstream_ids import UPSTREAM_ALIASES
from aorta_tui.core.errors import RecipeError
from aorta_tui.recipe import load_recipe_text
from aorta_tui.trial.supervisor import ProcessOutcome


def _outcome(exit_code: int | None = 0, signal: int | None = None, **kw) -> ProcessOutcome:
    base = dict(
        pid=1, exit_code=exit_code, signal=signal, core_dumped=False, timed_out=False,
        cancelled=False, hang=None, exec_error=None, wall_s=1.0, started_at=0.0, ended_at=1.0,
        peak_rss_kb=None, gpu_peak_mem_bytes=None, gpu_mem_reason="test", stdout_bytes=0,
        stderr_bytes=0, truncated=False,
    )
    base.update(kw)
    return ProcessOutcome(**base)  # type: ignore[arg-type]


def _log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "stdout.log"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("line", "expected"), [
    ("amdgpu 0000:c1:00.0: amdgpu: SDMA hang detected on sdma1, resetting", "amdgpu_sdma_timeout"),
    ("[drm] sdma semaphore timeout on queue 3", "amdgpu_sdma_timeout"),
    ("  VM_L2_PROTECTION_FAULT_STATUS:0x00841051", "amdgpu_vm_fault"),
    ("amdgpu 0000:0c:00.0: amdgpu: XGMI: link down between node 2 and node 3", "xgmi_link_error"),
    ("amdgpu 0000:8c:00.0: amdgpu: xgmi: failed to train link 1 (error -110)", "xgmi_link_error"),
    ("pcieport 0000:40:01.1: AER: Fatal error received from 0000:41:00.0", "pcie_aer_fatal"),
    ("amdgpu 0000:c1:00.0: amdgpu: gpu reset begin!", "amdgpu_reset"),
])
def test_kernel_lines_upstream_catches_are_caught(line: str, expected: str) -> None:
    hit = match_kernel_line(line)
    assert hit is not None and hit[0].id == expected


@pytest.mark.parametrize("line", [
    "amdgpu 0000:0c:00.0: amdgpu: XGMI initialized with 4 links",
    "amdgpu: XGMI hive 0x1234 has 8 nodes",
    "pcieport 0000:00:01.1: AER: enabled with IRQ 28",
])
def test_healthy_kernel_lines_stay_quiet(line: str) -> None:
    assert match_kernel_line(line) is None


@pytest.mark.parametrize(("text", "expected"), [
    ("RuntimeError: hipMalloc failed: hipError_OutOfMemory (status=2)", {"out_of_memory", "hip_error"}),
    ("kernel launch returned cudaError_LaunchFailure (719) at attn.cu:88", {"cuda_error"}),
    ("hsa api call failure at: /src/rocminfo.cc:1193  Error code: 4104", {"rocm_error"}),
    ("node-3:118:204 [2] RCCL ERROR failed to connect to peer 5", {"nccl_error"}),
    ("epoch 3 step 40: train_loss NaN, skipping the update", {"nan_loss"}),
    ("[trainer] LOSS IS NAN at step 812", {"nan_loss"}),
])
def test_log_lines_upstream_fails_are_failed(tmp_path: Path, text: str, expected: set[str]) -> None:
    log = _log(tmp_path, f"starting\n{text}\ndone\n")
    c = classify(_outcome(), stdout_path=log, stderr_path=log)
    assert c.verdict == "fail"
    assert expected <= set(c.fired), c.fired


def test_the_type_name_cudaError_t_is_no_error(tmp_path: Path) -> None:
    log = _log(tmp_path, "debug: cudaError_t status = cudaSuccess\nloss 0.25\n")
    assert classify(_outcome(), stdout_path=log, stderr_path=log).verdict == "pass"


def test_custom_prefix_disables_a_custom_pattern(tmp_path: Path) -> None:
    log = _log(tmp_path, "boom\n")
    rule = PatternRule("boom", re.compile("boom"), "fail")
    on = classify(_outcome(), stdout_path=log, stderr_path=log, custom_rules=[rule])
    off = classify(_outcome(), stdout_path=log, stderr_path=log, custom_rules=[rule],
                   disabled=["custom:boom"])
    assert on.verdict == "fail" and off.verdict == "pass"
    assert "boom" not in off.fired


def test_required_custom_pattern_disabled_is_not_required(tmp_path: Path) -> None:
    log = _log(tmp_path, "nothing\n")
    rule = PatternRule("done", re.compile("DONE"), "info", required_for_pass=True)
    c = classify(_outcome(), stdout_path=log, stderr_path=log, custom_rules=[rule],
                 disabled=["custom:done"])
    assert c.verdict == "pass"


@pytest.mark.parametrize(("alias", "signal", "disabled"), [
    ("tier1:sigsegv", 11, True), ("tier1:sigsegv", 6, False), ("tier1:sigabrt", 6, True),
    ("tier1:sigbus", 7, True), ("tier1:sigbus", 11, False),
    ("tier1:exit_nonzero", 9, True), ("tier1:exit_nonzero", 15, True),
    ("tier1:exit_nonzero", 11, False),
])
def test_upstream_signal_ids_disable_that_signal_only(tmp_path: Path, alias: str, signal: int,
                                                       disabled: bool) -> None:
    log = _log(tmp_path, "")
    c = classify(_outcome(exit_code=None, signal=signal), stdout_path=log, stderr_path=log,
                 disabled=[alias])
    assert ("killed_by_signal" not in c.fired) is disabled
    assert c.verdict == ("pass" if disabled else "fail")


@pytest.mark.parametrize(("alias", "text", "ours"), [
    ("tier4:nan_signature", "loss is NaN\n", "nan_loss"),
    ("tier4:nccl_rccl_error", "NCCL error: unhandled system error\n", "nccl_error"),
    ("tier4:rocm_error", "Error code: 7\n", "rocm_error"),
    ("tier4:hip_error", "HIP error: invalid argument\n", "hip_error"),
    ("TIER4:cuda_error", "CUDA error: misaligned address\n", "cuda_error"),
])
def test_upstream_log_ids_disable_their_counterpart(tmp_path: Path, alias: str, text: str,
                                                    ours: str) -> None:
    log = _log(tmp_path, text)
    assert ours in classify(_outcome(), stdout_path=log, stderr_path=log).fired
    c = classify(_outcome(), stdout_path=log, stderr_path=log, disabled=[alias])
    assert ours not in c.fired and c.verdict == "pass"


def test_there_are_22_upstream_ids() -> None:
    assert len(UPSTREAM_ALIASES) == 22


_RECIPE = """\
schema_version: 1
workload: gpu_smoke
trials: 1
steps: 1
cells: [{{name: a, mitigations: [none], environment: local}}]
custom_patterns:
  - {{id: boom, match: {{regex: boom}}}}
disable_detectors: {ids}
"""


def test_every_upstream_id_is_accepted_by_validation() -> None:
    r = load_recipe_text(_RECIPE.format(ids=sorted(UPSTREAM_ALIASES) + ["custom:boom"]))
    assert "tier3:vram_growth" in r.disable_detectors


def test_no_counterpart_ids_get_a_note(registry) -> None:
    from aorta_tui.sweep.plan_summary import summarize

    r = load_recipe_text(_RECIPE.format(ids=["tier3:vram_growth", "tier4:nan_signature"]))
    notes = [w for w in summarize(r, registry)["warnings"] if "disables nothing" in w]
    assert len(notes) == 1 and "tier3:vram_growth" in notes[0]


@pytest.mark.parametrize(("token", "hint"), [
    ("tier3:vram_growht", "did you mean 'tier3:vram_growth'"),
    ("tier4:nan_signatur", "did you mean 'tier4:nan_signature'"),
    ("custom:bom", "did you mean 'custom:boom'"),
    ("tier1:sigsev", "did you mean 'tier1:sigsegv'"),
])
def test_unknown_id_says_did_you_mean(token: str, hint: str) -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe_text(_RECIPE.format(ids=[token]))
    (issue,) = err.value.issues  # type: ignore[attr-defined]
    assert hint in (issue.hint or ""), issue
    assert issue.line == 8 and issue.path == "disable_detectors[0]"
