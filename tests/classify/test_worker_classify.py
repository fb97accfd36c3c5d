"""Classifier: built-in patterns, recipe rules, verdict precedence, scanning robustness."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.classify import (
    BUILTIN_PATTERNS,
    KERNEL_PATTERNS,
    LOG_PATTERNS,
    KernelEvent,
    PatternRule,
    builtin_detector_ids,
    classify,
    extract_step_times,
)
from aorta_tui.classify.scan import Matcher, scan_file
from aorta_tui.classify.tiers import verdict_of
from aorta_tui.trial.hang import HangReport
from aorta_tui.trial.supervisor import ProcessOutcome


def outcome(**kw: object) -> ProcessOutcome:
    base: dict[str, object] = dict(
        pid=1234, exit_code=0, signal=None, core_dumped=False, timed_out=False, cancelled=False,
        hang=None, exec_error=None, wall_s=1.0, started_at=0.0, ended_at=1.0, peak_rss_kb=None,
        gpu_peak_mem_bytes=None, gpu_mem_reason="n/a", stdout_bytes=0, stderr_bytes=0,
        truncated=False,
    )  # fmt: skip
    base.update(kw)
    return ProcessOutcome(**base)  # type: ignore[arg-type]


def logs(tmp_path: Path, stdout: str = "", stderr: str = "") -> tuple[Path, Path]:
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    out.write_text(stdout)
    err.write_text(stderr)
    return out, err


def run(tmp_path: Path, stdout: str = "", stderr: str = "", oc: ProcessOutcome | None = None, **kw):
    out, err = logs(tmp_path, stdout, stderr)
    return classify(oc or outcome(), stdout_path=out, stderr_path=err, **kw)


# -- built-in patterns ---------------------------------------------------------------------


@pytest.mark.parametrize("pattern", BUILTIN_PATTERNS, ids=lambda p: p.id)
def test_every_sample_matches_its_own_pattern_only(pattern) -> None:
    for sample in pattern.samples():
        assert pattern.regex.search(sample), (pattern.id, sample)
        others = [p.id for p in BUILTIN_PATTERNS if p is not pattern and p.regex.search(sample)]
        assert others == [], f"{pattern.id}'s sample {sample!r} also matches {others}"
        if pattern.tier == 4:  # the scanner's prefilter: every tier-4 match holds a needle
            assert any(n in sample for n in pattern.needles), (pattern.id, sample)


@pytest.mark.parametrize("pattern", LOG_PATTERNS, ids=lambda p: p.id)
def test_every_log_sample_is_detected_through_the_scanner(tmp_path: Path, pattern) -> None:
    c = run(tmp_path, stdout="ordinary line\n" + pattern.sample + "\nanother line\n")
    det = next(d for d in c.detections if d.id == pattern.id)
    assert det.tier == 4 and det.line_no == 2 and det.stream == "stdout"
    assert det.severity == pattern.severity
    assert c.verdict == ("fail" if pattern.severity == "fail" else "pass")
    # The sample carries one of the pattern's needles (the scanner's prefilter).
    assert any(n in pattern.sample for n in pattern.needles)


@pytest.mark.parametrize(
    ("line", "captures"),
    [
        ("[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
         "Timed out waiting 5000ms for recv operation to complete", {"timeout_ms": "5000", "op": "recv"}),
        ("[E1129 ProcessGroupGloo.cpp:67] [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms",
         {"ranks": "1", "timeout_ms": "2000"}),
        ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, "
         "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
         {"op": "ALLREDUCE", "timeout_ms": "600000"}),
        ("DistBackendError: NCCL timeout in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:101",
         {"where": "/pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:101"}),
    ],
)
def test_collective_timeout_captures_one_set_of_names_for_every_spelling(
        tmp_path: Path, line: str, captures: dict[str, str]) -> None:
    c = run(tmp_path, stderr=line + "\n")
    [det] = [d for d in c.detections if d.id == "collective_timeout"]
    assert det.captures == captures


def test_a_collective_timeout_outranks_the_crash_and_traceback_it_ends_in(tmp_path: Path) -> None:
    # an NCCL watchdog timeout aborts the rank; torchrun then reports the SIGABRT
    stderr = ("[rank1]:[E1129 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
              "WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=20000) ran for 20004 "
              "milliseconds before timing out.\n"
              "Fatal Python error: Aborted\n"
              "Traceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: boom\n"
              "  traceback : Signal 6 (SIGABRT) received by PID 4243\n")
    c = run(tmp_path, stderr=stderr, oc=outcome(exit_code=1))
    assert set(c.fired) == {"exit_nonzero", "collective_timeout", "process_crash", "python_traceback"}
    assert c.reason.startswith("a collective operation timed out")
    # a recipe pattern also outranks a crash report (it is the job's own, specific detector)
    rule = PatternRule("my_marker", re.compile(r"MARKER (?P<n>\d+)"))
    c = run(tmp_path, stderr="MARKER 7\nSegmentation fault\n", oc=outcome(exit_code=1), custom_rules=[rule])
    assert c.reason.startswith("custom pattern 'my_marker' matched")
    # alone, the crash still explains the trial better than the exit code
    c = run(tmp_path, stderr="Segmentation fault\n", oc=outcome(exit_code=139))
    assert c.reason.startswith("a process of the trial crashed")


def test_ids_are_unique_and_tiers_right() -> None:
    all_ids = [p.id for p in BUILTIN_PATTERNS]
    assert len(all_ids) == len(set(all_ids))
    assert {p.tier for p in KERNEL_PATTERNS} == {3} and {p.tier for p in LOG_PATTERNS} == {4}
    table = builtin_detector_ids()
    assert table["cuda_error"] == 4 and table["nvidia_xid"] == 3 and table["hang"] == 2
    assert table["exit_nonzero"] == 1


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("RuntimeError: CUDA error: device-side assert triggered", {"cuda_error", "device_side_assert"}),
        ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 20.00 MiB", {"out_of_memory"}),
        ("hipErrorOutOfMemory", {"out_of_memory", "hip_error"}),
        ("ncclInternalError: Internal check failed.", {"nccl_error"}),
        ("RCCL error in: ProcessGroupNCCL.cpp:123", {"nccl_error"}),
        ("Epoch 3: train_loss=NaN", {"nan_loss"}),
        ("val loss: -inf", {"nan_loss"}),
        ("loss is Infinity", {"nan_loss"}),
        # Near misses: none of these is a failure.
        ("loss = 0.125 (nan guard off)", set()),
        ("NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", set()),
        ("cudaError_t status = cudaSuccess;", set()),
        ("print('CUDA error handling is enabled')", set()),
        ("gloss = 1.0", set()),
        ("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access", {"cuda_error", "illegal_memory_access"}),
        ("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED", {"gpu_library_error"}),
        ("rocblas_status_internal_error", {"gpu_library_error"}),
        ("CUBLAS_STATUS_SUCCESS", set()),
        ("rocblas_status_success", set()),
        ("bash: line 1:  4242 Segmentation fault      (core dumped) ./a.out", {"process_crash"}),
        ("Fatal Python error: Aborted", {"process_crash"}),
        # torchrun's failure report: an abort (NCCL's watchdog ends in one) is a crash ...
        ("  traceback : Signal 6 (SIGABRT) received by PID 4243", {"process_crash"}),
        # ... but the surviving rank it stopped on purpose is not (real torch 2.13 lines)
        ("  traceback : Signal 15 (SIGTERM) received by PID 24225", set()),
        ("  traceback : Signal 9 (SIGKILL) received by PID 24225", set()),
        ("W1129 09:47:45.762000 24107 torch/distributed/elastic/multiprocessing/api.py:1028] "
         "Sending process 24225 closing signal SIGTERM", set()),
        ("  exitcode  : -15 (pid: 24225)  (SIGTERM)", set()),
        # gloo spellings of a collective timeout, and near misses
        ("Timed out waiting 30000ms for send operation to complete", {"collective_timeout"}),
        ("[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 600000 ms", {"collective_timeout"}),
        ("Timed out waiting for pending UserRRefs to be confirmed by owner and parent.", set()),
        ("rank 1 passed monitoredBarrier in 12 ms", set()),
    ],
)
def test_pattern_table(line: str, expected: set[str]) -> None:
    assert {p.id for p in LOG_PATTERNS if p.regex.search(line)} == expected


# Fragments that assemble into lines near the patterns (and often onto them).
_FRAGMENTS = st.sampled_from([
    "loss", "Loss", "train_loss", " ", "=", ": ", " is ", "nan", "NaN", "inf", "-Inf", "Infinity",
    "CUDA error: ", "cudaErrorLaunchFailure", "HIP error: ", "hipErrorNoDevice", "HSA_STATUS_ERROR_X",
    "nccl", "ncclSystemError", "NCCL error", "RCCL error", "NCCL WARN ", "out of memory", "CUDA",
    "OutOfMemoryError", "Traceback (most recent call last):", "device-side assert triggered",
    "block: [0,0,0], thread: [1,0,0] Assertion", "Watchdog caught collective operation timeout",
    "Memory access fault by GPU node-1", "an illegal memory access was encountered",
    "cudaErrorIllegalAddress", "x", "7", "_", "é", "\r", "CUDA_ERROR_LAUNCH_FAILED", "CUBLAS",
    "_STATUS_", "SUCCESS", "EXECUTION_FAILED", "rocblas_status_", "success", "miopenStatus",
    "Timed out waiting ", "5000ms for recv operation", "ms for send operation", "Rank 1 ", "Ranks 1, 2 ",
    "failed to pass monitoredBarrier in 2000 ms", "NCCL timeout in: ", "Signal 15 (SIGTERM) received by PID 9",
    "Signal 6 (SIGABRT) received by PID 9",
    "Success", "rocBLAS error", "Segmentation fault", "Fatal Python error: ", "Signal 11 (SIGSEGV)",
    " received by PID 12", "(", ")",
])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=8))
def test_needles_cover_every_match(fragments: list[str]) -> None:
    """The prefilter never hides a match: whenever a regex matches, a needle is present."""
    line = "".join(fragments)
    for p in LOG_PATTERNS:
        if p.regex.search(line):
            assert any(n in line for n in p.needles), (p.id, line)


# -- tier 1 / 2 / 3 via classify -------------------------------------------------------------


def test_verdict_precedence_fail_over_error(tmp_path: Path) -> None:
    # A timeout (error) whose log shows an OOM (fail) is a fail.
    c = run(tmp_path, stderr="torch.OutOfMemoryError: CUDA out of memory.\n",
            oc=outcome(timed_out=True, exit_code=None, signal=15))  # fmt: skip
    assert c.verdict == "fail"
    assert {"timeout", "out_of_memory"} <= {d.id for d in c.detections}
    assert "out of memory" in c.reason


def test_core_dump_and_signal(tmp_path: Path) -> None:
    c = run(tmp_path, oc=outcome(exit_code=None, signal=6, core_dumped=True))
    assert c.verdict == "fail"
    assert [d.id for d in c.detections] == ["killed_by_signal", "core_dumped"]
    assert "SIGABRT" in c.reason


def test_hang_report_becomes_a_tier2_fail(tmp_path: Path) -> None:
    report = HangReport(signals={"output_silence": 31.0, "io_idle": 30.5, "gpu_idle": None},
                        window_s=30, grace_s=60, elapsed_s=121)  # fmt: skip
    c = run(tmp_path, oc=outcome(hang=report, signal=15, exit_code=None))
    assert c.verdict == "fail" and [d.id for d in c.detections] == ["hang"]
    assert c.detections[0].captures["signals"]["io_idle"] == 30.5


def test_kernel_events_are_tier3_fails_grouped_by_id(tmp_path: Path) -> None:
    events = [
        KernelEvent("NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.", "nvidia_xid",
                    12.5, {"xid": "79", "device": "PCI:0000:01:00"}),
        KernelEvent("NVRM: Xid (PCI:0000:01:00): 79, pid=1, again", "nvidia_xid", 12.6, {"xid": "79"}),
    ]  # fmt: skip
    c = run(tmp_path, kernel_events=events)
    assert c.verdict == "fail"
    (det,) = c.detections
    assert (det.tier, det.id, det.count, det.stream) == (3, "nvidia_xid", 2, "kernel")
    assert "Xid error 79" in det.message


def test_kernel_log_unavailable_is_said_not_hidden(tmp_path: Path) -> None:
    c = run(tmp_path, kernel_unavailable="cannot read /dev/kmsg (Operation not permitted)")
    assert c.verdict == "pass"
    (det,) = c.detections
    assert det.tier == 3 and det.severity == "info"
    assert "not available (cannot read /dev/kmsg" in det.message


def test_disabled_detectors_by_id_tier_prefix_and_whole_tier(tmp_path: Path) -> None:
    text = "RuntimeError: CUDA error: misaligned address\nstep 3 | loss = nan\n"
    base = run(tmp_path, stderr=text, oc=outcome(exit_code=1))
    assert {"cuda_error", "nan_loss", "exit_nonzero"} <= {d.id for d in base.detections}
    c = run(tmp_path, stderr=text, oc=outcome(exit_code=1), disabled=["cuda_error", "tier4:nan_loss"])
    assert {d.id for d in c.detections} == {"exit_nonzero"}
    c = run(tmp_path, stderr=text, oc=outcome(exit_code=1), disabled=["tier4", "tier1"])
    assert c.detections == [] and c.verdict == "pass"


def test_workload_result_failures_are_tier4(tmp_path: Path) -> None:
    result = {"passed": False, "failures": [
        {"code": "nonfinite_loss", "message": "loss became NaN at step 17", "details": {"step": 17}},
        {"code": "mismatch", "message": "outputs differ", "details": None},
    ]}  # fmt: skip
    c = run(tmp_path, workload_result=result)
    assert c.verdict == "fail"
    assert [d.id for d in c.detections] == ["workload:nonfinite_loss", "workload:mismatch"]
    assert c.detections[0].captures == {"step": 17}
    assert c.reason == "loss became NaN at step 17"
    c = run(tmp_path, workload_result={"passed": False, "failures": []})
    assert [d.id for d in c.detections] == ["workload:failed"]
    assert run(tmp_path, workload_result={"passed": True, "failures": []}).verdict == "pass"


def test_missing_log_files_are_fine(tmp_path: Path) -> None:
    c = classify(outcome(), stdout_path=tmp_path / "nope.log", stderr_path=None)
    assert c.verdict == "pass" and c.detections == []


def test_warnings_do_not_fail_but_are_named(tmp_path: Path) -> None:
    c = run(tmp_path, stdout="h:1:2 [0] NCCL WARN NET/IB : no device found\n")
    assert c.verdict == "pass"
    assert "nccl_warn" in c.reason


def test_counts_are_capped_and_reported(tmp_path: Path) -> None:
    c = run(tmp_path, stdout="NCCL WARN again\n" * 1500)
    (det,) = c.detections
    assert det.count == 1000 and "1000+ lines" in det.message


def test_verdict_of_empty_is_pass() -> None:
    assert verdict_of([]) == ("pass", "no failure detected")


# -- tier 5: recipe rules -----------------------------------------------------------------------


def test_custom_rule_with_numeric_captures_and_plain_lambda(tmp_path: Path) -> None:
    rule = PatternRule(
        id="slow_step",
        regex=re.compile(r"step (?P<step>\d+) took (?P<ms>[\d.]+) ms on (?P<dev>\w+)"),
        on_match="fail",
        condition=lambda c: c["ms"] > 100,
    )
    text = "step 1 took 50.5 ms on gpu0\nstep 2 took 250.25 ms on gpu1\nstep 3 took 300 ms on gpu0\n"
    c = run(tmp_path, stdout=text, custom_rules=[rule])
    assert c.verdict == "fail"
    (det,) = c.detections
    assert (det.tier, det.id, det.line_no, det.count) == (5, "slow_step", 2, 2)
    assert det.captures == {"step": 2.0, "ms": 250.25, "dev": "gpu1"}
    assert det.evidence == "step 2 took 250.25 ms on gpu1"


def test_condition_false_everywhere_means_no_match(tmp_path: Path) -> None:
    rule = PatternRule("big", re.compile(r"value=(?P<v>\d+)"), "fail", condition=lambda c: c["v"] > 10)
    c = run(tmp_path, stdout="value=1\nvalue=2\n", custom_rules=[rule])
    assert c.verdict == "pass" and c.detections == []


def test_required_for_pass_never_matched_fails(tmp_path: Path) -> None:
    rule = PatternRule("done", re.compile(r"^TRAINING COMPLETE$"), "info", required_for_pass=True)
    c = run(tmp_path, stdout="step 1\nstep 2\n", custom_rules=[rule])
    assert c.verdict == "fail"
    (det,) = c.detections
    assert det.id == "done" and det.severity == "fail" and det.count == 0
    assert "never matched" in det.message
    # `^...$` are line anchors although the rule was compiled without MULTILINE.
    ok = run(tmp_path, stdout="step 1\nTRAINING COMPLETE\nbye\n", custom_rules=[rule])
    assert ok.verdict == "pass"
    assert [(d.id, d.severity, d.line_no) for d in ok.detections] == [("done", "info", 2)]


def test_required_rule_with_condition_needs_the_condition(tmp_path: Path) -> None:
    rule = PatternRule("acc", re.compile(r"accuracy (?P<acc>[\d.]+)"), "info", True,
                       lambda c: c["acc"] >= 0.9)  # fmt: skip
    assert run(tmp_path, stdout="accuracy 0.5\n", custom_rules=[rule]).verdict == "fail"
    assert run(tmp_path, stdout="accuracy 0.5\naccuracy 0.93\n", custom_rules=[rule]).verdict == "pass"


def test_a_failing_condition_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    rule = PatternRule("opt", re.compile(r"x=(?P<x>\d+)?"), "fail", condition=lambda c: c["x"] > 1)
    c = run(tmp_path, stdout="x=\nx=5\n", custom_rules=[rule])
    assert c.verdict == "fail"  # x=5 still counts
    warn = next(d for d in c.detections if d.severity == "warn")
    assert "TypeError" in warn.message


def test_warn_rule_does_not_fail(tmp_path: Path) -> None:
    rule = PatternRule("retry", re.compile(r"retrying"), "warn")
    c = run(tmp_path, stderr="retrying in 1s\n", custom_rules=[rule])
    assert c.verdict == "pass" and c.detections[0].severity == "warn"


# -- scanning robustness -------------------------------------------------------------------------


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=20_000), big_line=st.integers(min_value=0, max_value=3))
def test_arbitrary_bytes_never_raise(tmp_path: Path, data: bytes, big_line: int) -> None:
    path = tmp_path / "fuzz.log"
    # Invalid UTF-8, NULs, \r, and sometimes a line longer than a scan block.
    payload = data + (b"\xff\xfe" + b"z" * (1 << 20) + b"CUDA error: x") * (big_line == 3)
    path.write_bytes(payload)
    rule = PatternRule("any", re.compile(r"(?P<n>\d+)"), "info", True, lambda c: c["n"] > 5)
    c = classify(outcome(), stdout_path=path, stderr_path=path, custom_rules=[rule])
    assert c.verdict in ("pass", "fail")
    extract_step_times(path, r"(?P<ms>\d+)")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.text(alphabet="ab =:\t\r0123é", max_size=40), max_size=60),
    at=st.integers(min_value=0, max_value=60),
    block=st.integers(min_value=64, max_value=2048),
)
def test_line_numbers_survive_any_block_size(tmp_path: Path, lines: list[str], at: int, block: int) -> None:
    at = min(at, len(lines))
    lines = [*lines[:at], "boom: CUDA error: marker", *lines[at:]]
    path = tmp_path / "lines.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pattern = next(p for p in LOG_PATTERNS if p.id == "cuda_error")
    mt = Matcher("cuda_error", pattern.regex, lambda m: {}, pattern.needles)
    scan_file(path, "stdout", [mt], block_bytes=block)
    assert mt.first is not None
    assert mt.first.line_no == at + 1
    assert mt.first.evidence == "boom: CUDA error: marker"


def test_progress_bar_evidence_keeps_the_matching_piece(tmp_path: Path) -> None:
    text = "10%|#  | 1/10\r20%|## | 2/10\rRuntimeError: CUDA error: unspecified launch failure\n"
    c = run(tmp_path, stderr=text)
    det = next(d for d in c.detections if d.id == "cuda_error")
    assert det.evidence == "RuntimeError: CUDA error: unspecified launch failure"


# -- step times ----------------------------------------------------------------------------------


def test_step_times_units(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    p.write_text("step 1 time 120.0 ms\nnoise\nstep 2 time 80 ms\nstep 3 time abc ms\n")
    assert extract_step_times(p, r"time (?P<ms>[\d.]+) ms") == [0.12, 0.08]
    assert extract_step_times(p, r"time ([\d.]+) ms") == [120.0, 80.0]  # first group: seconds
    p.write_text("iter 1: step_time=0.25s\niter 2: step_time=0.5s\n")
    assert extract_step_times(p, r"step_time=(?P<step_time>[\d.]+)s") == [0.25, 0.5]
    p.write_text("3.5\nx\n4\n")
    assert extract_step_times(p, r"^[\d.]+$") == [3.5, 4.0]  # no group: the whole match
    assert extract_step_times(tmp_path / "missing.log", r"(\d+)") == []
    with pytest.raises(re.error):
        extract_step_times(p, r"(unclosed")


def test_docs_list_every_builtin_detector() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "classifier.md").read_text()
    missing = [i for i in builtin_detector_ids() if f"`{i}`" not in doc]
    assert missing == [], f"docs/classifier.md does not mention {missing}"


def test_unknown_exit_status_is_an_error_not_a_pass(tmp_path: Path) -> None:
    c = run(tmp_path, oc=outcome(exit_code=None, signal=None))
    assert c.verdict == "error" and [d.id for d in c.detections] == ["exit_unknown"]


def test_grown_gpu_error_counters_are_tier3(tmp_path: Path) -> None:
    oc = outcome(gpu_counters_delta={"GPU-a": {"ecc_uncorrected": 2, "ecc_corrected": 7}})
    c = run(tmp_path, oc=oc)
    assert c.verdict == "fail"
    assert [(d.tier, d.id, d.severity, d.count) for d in c.detections] == [
        (3, "gpu_ecc_uncorrected", "fail", 2), (3, "gpu_ecc_corrected", "info", 7)]
    assert "GPU GPU-a" in c.reason
    assert run(tmp_path, oc=outcome(gpu_counters_delta={})).verdict == "pass"


def test_non_finite_captures_reach_the_condition_as_floats_and_the_record_as_text(tmp_path: Path) -> None:
    import json
    import math

    seen: list[float] = []

    def cond(c: dict) -> bool:
        seen.append(c["loss"])
        return math.isnan(c["loss"])

    rule = PatternRule("nanloss", re.compile(r"loss=(?P<loss>\S+)"), "fail", condition=cond)
    c = run(tmp_path, stdout="loss=0.5\nloss=nan\n", custom_rules=[rule])
    assert seen[0] == 0.5 and math.isnan(seen[1])
    det = next(d for d in c.detections if d.id == "nanloss")
    assert det.captures == {"loss": "nan"}
    json.loads(json.dumps(c.to_dict(), allow_nan=False))
