"""The device half's one-sentence status (aorta_tui/trace/device/attach.py): complete, or
"not available" / "partly available" with the reason, never a silent gap."""

from __future__ import annotations

from aorta_tui.trace.device.attach import process_problem, status_line

CLEAN = {"errors": [], "exited_cleanly": True, "kernel_records": 2000,
         "stats": {"launch_callbacks": 2000, "dropped_ring": 0, "dropped_pipe": 0, "dropped_cupti": 0,
                   "dropped_staging": 0}}


def test_every_launch_with_a_kernel_is_available() -> None:
    assert process_problem("7", CLEAN) is None
    assert status_line({"7": CLEAN}, None) == "available"


def test_a_cupti_error_in_the_program_is_not_available_with_it() -> None:
    p = {**CLEAN, "kernel_records": 0,
         "errors": ["cuptiSubscribe failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (another profiler "
                    "already uses CUPTI in this process)"]}
    s = status_line({"7": p}, None)
    assert s.startswith("pid 7: not available: cuptiSubscribe failed") and "MULTIPLE_SUBSCRIBERS" in s


def test_records_taken_by_another_cupti_client_are_partly_available_and_counted() -> None:
    # torch.profiler inside the program took the activity records for 2,000 of 6,000 launches
    p = {**CLEAN, "kernel_records": 4000, "stats": {**CLEAN["stats"], "launch_callbacks": 6000}}
    s = status_line({"7": p}, None)
    assert s.startswith("pid 7: partly available: 2000 of 6000 launches") and "another CUPTI client" in s


def test_dropped_records_explain_the_gap_and_are_no_takeover() -> None:
    p = {**CLEAN, "kernel_records": 1500, "stats": {**CLEAN["stats"], "dropped_pipe": 500}}
    assert process_problem("7", p) is None


def test_more_kernels_than_callbacks_is_graphs_not_a_problem() -> None:
    assert process_problem("7", {**CLEAN, "kernel_records": 9000}) is None


def test_a_process_killed_before_its_final_flush_is_not_judged() -> None:
    # without BYE the last records may still be in flight: the notes say so, not this check
    assert process_problem("7", {**CLEAN, "exited_cleanly": False, "kernel_records": 10}) is None


def test_no_process_and_a_reason() -> None:
    assert status_line({}, "turned off (--device-timestamps off)") == "not available: turned off (--device-timestamps off)"
    assert status_line({}, None) == "not available: no record came from the collector"
