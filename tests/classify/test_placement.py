"""Where a trial ran, as typed input to the classifier (issue 36: executors never classify)."""

from __future__ import annotations

from pathlib import Path

from aorta_tui.classify import classify
from aorta_tui.classify.dmesg import KernelEvent
from aorta_tui.classify.placement import Placement
from aorta_tui.trial.supervisor import ProcessOutcome


def _killed(pid: int | None = 1234) -> ProcessOutcome:
    return ProcessOutcome(pid=pid, exit_code=None, signal=9, core_dumped=False, timed_out=False,  # type: ignore[call-arg]
                          cancelled=False, hang=None, exec_error=None, wall_s=1.0, started_at=0.0,
                          ended_at=1.0, peak_rss_kb=None, gpu_peak_mem_bytes=None, gpu_mem_reason="n/a",
                          stdout_bytes=0, stderr_bytes=0, truncated=False)


def _classify(tmp_path: Path, placement: Placement | None, **kw: object):
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    out.write_text("")
    err.write_text("")
    return classify(_killed(), stdout_path=out, stderr_path=err, placement=placement, **kw)  # type: ignore[arg-type]


def test_a_cancelled_job_explains_the_killed_process(tmp_path: Path) -> None:
    bare = _classify(tmp_path, None)
    assert any(d.id == "killed_by_signal" for d in bare.detections)
    got = _classify(tmp_path, Placement(job_id="77", node="n1", state="CANCELLED"))
    assert got.detections[0].id == "slurm_cancelled" and "job 77 on n1" in got.detections[0].message
    assert not any(d.id == "killed_by_signal" for d in got.detections)  # the scheduler's doing
    assert got.verdict == "error"


def test_a_failed_job_whose_wrapper_wrote_the_outcome_is_left_to_the_process(tmp_path: Path) -> None:
    got = _classify(tmp_path, Placement(job_id="8", node=None, state="FAILED", outcome_written=True))
    assert not any(d.id.startswith("slurm_") for d in got.detections)
    assert any(d.id == "killed_by_signal" for d in got.detections)


def test_the_nodes_kernel_log_replaces_this_machines(tmp_path: Path) -> None:
    here = [KernelEvent("NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus", "nvidia_xid", 1.0,
                        {"xid": "79"})]
    local = _classify(tmp_path, None, kernel_events=here)
    assert any(d.tier == 3 and d.id == "nvidia_xid" for d in local.detections)
    node = _classify(tmp_path, Placement(job_id="9", node="n2", state="COMPLETED", kernel_events=()),
                     kernel_events=here)
    assert not any(d.tier == 3 and d.id == "nvidia_xid" for d in node.detections)
