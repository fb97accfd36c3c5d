"""Where a trial ran, when it was not this machine: the executor's facts as typed input to the
classifier (issue 36: executors never classify).

The Slurm executor (``executor/slurm.py``) sees how the scheduler ended a job and reads the
compute node's kernel log; it hands both here as a :class:`Placement`, and ``classify`` turns
them into detections with the rest. The scheduler's final states that explain a trial better
than its process does are a table of this package, beside the other detectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aorta_tui.classify.dmesg import KernelEvent
from aorta_tui.classify.model import Detection, Severity

# Slurm's final states that explain a trial better than its process does: detection id,
# severity, what happened. A trial cancelled by Ctrl-C of the orchestrator is not one of them
# (it has no result and runs again on --resume).
SLURM_STATES: dict[str, tuple[str, Severity, str]] = {
    "CANCELLED": ("slurm_cancelled", "error", "its Slurm job was cancelled (scancel)"),
    "TIMEOUT": ("slurm_timeout", "error", "its Slurm job reached its time limit"),
    "NODE_FAIL": ("slurm_node_fail", "error", "the node failed while its Slurm job ran"),
    "PREEMPTED": ("slurm_preempted", "error", "its Slurm job was preempted"),
    "BOOT_FAIL": ("slurm_boot_fail", "error", "the node failed to boot for its Slurm job"),
    "DEADLINE": ("slurm_deadline", "error", "its Slurm job passed its deadline"),
    "OUT_OF_MEMORY": ("slurm_out_of_memory", "fail", "its Slurm job ran out of memory"),
    "FAILED": ("slurm_job_failed", "error", "its Slurm job failed before the trial's outcome "
               "was written"),
    "LOST": ("slurm_job_lost", "error", "neither squeue nor sacct knows its Slurm job any more, "
             "and it wrote no outcome"),
}
# tier-1 detections that describe how the scheduler ended the process, not the trial
PROCESS_CONSEQUENCES = frozenset({"killed_by_signal", "exit_nonzero", "exit_unknown", "cancelled",
                                  "core_dumped", "timeout"})


@dataclass(frozen=True)
class Placement:
    """A trial that ran under a scheduler, as its executor saw it."""

    job_id: str | None
    node: str | None
    state: str | None  # the job's final state (squeue/sacct), COMPLETED when it ran to its end
    reason: str | None = None
    signal: str | None = None  # what Slurm sent the task, by name (SIGTERM): ExecutorFacts.signal
    outcome_written: bool = False  # the wrapper ran and wrote the trial's own outcome
    # The compute node's kernel log (None: not read there; this machine's stands)
    kernel_events: Sequence[KernelEvent] | None = None
    kernel_unavailable: str | None = None

    def state_detection(self) -> Detection | None:
        """The job's final state as a tier-1 detection, where it explains the trial."""
        typed = SLURM_STATES.get(self.state or "") if self.state != "COMPLETED" else None
        if self.state == "FAILED" and self.signal is None and self.outcome_written:
            return None  # the wrapper ran and wrote the trial's outcome: the process explains it
        if typed is None:
            return None
        det_id, severity, text = typed
        where = f" on {self.node}" if self.node else ""
        reason = f" ({self.reason})" if self.reason else ""
        return Detection(1, det_id, severity, f"{text}: job {self.job_id}{where}{reason}",
                         captures={"job_id": self.job_id, "state": self.state, "node": self.node})
