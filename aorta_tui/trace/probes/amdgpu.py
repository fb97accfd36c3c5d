"""``amdgpu``: amdgpu CS ioctl -> scheduler run_job (the graphics/legacy submission path).

Field names differ between kernels: older ones key jobs by ``sched_job_id``, newer ones by the
finished fence's ``context``/``seqno``. Both are read from the format files, never guessed.
HIP compute does not use this path (see the ``hsa`` set).
"""

from __future__ import annotations

from aorta_tui.trace.metrics import Metric
from aorta_tui.trace.probes.base import (
    Instance,
    ProbeContext,
    ProbeDetection,
    ProbeSet,
    tracefs_missing,
)
from aorta_tui.trace.probes.kernel_common import num, record_events, text


class AmdgpuProbes(ProbeSet):
    name = "amdgpu"
    description = "amdgpu CS ioctl -> DRM scheduler run_job latency per ring (tracepoints)"
    template = "amdgpu.bt"
    metrics = (
        Metric(
            "cs_to_run",
            "duration",
            "amdgpu CS ioctl -> scheduler run_job: time a submitted job waits before the scheduler hands it to the ring (tracepoints amdgpu_cs_ioctl -> amdgpu_sched_run_job)",
            key_name="job",
            breakdown_by="label",
            label_name="ring",
            probe_type="tracepoint",
            probe_hits=2,
            aux_name="IBs in the job",
        ),
    )

    def detect(self, ctx: ProbeContext) -> ProbeDetection:
        if ctx.tracefs is None:
            return tracefs_missing(self.name)
        det = ProbeDetection(probe_set=self.name, available=False)
        cs, run = record_events(det, ctx.tracefs, ("amdgpu", "amdgpu_cs_ioctl"),
                                ("amdgpu", "amdgpu_sched_run_job"))
        if cs is None or run is None:
            det.reason = "the amdgpu tracepoints are absent (no amdgpu driver loaded on this machine)"
            det.fix = "run on a machine with the amdgpu kernel driver loaded"
            return det
        key = _job_key(cs), _job_key(run)
        if key[0] is None or key[1] is None:
            det.reason = (f"cannot pair submit and run: no sched_job_id or context+seqno fields "
                          f"(cs_ioctl has {sorted(cs)}, run_job has {sorted(run)})")
            return det
        det.available = True
        det.instances.append(Instance("cs_to_run", {
            "submit_key": key[0], "run_key": key[1],
            "aux": num(run, "num_ibs") or "0",
            "label": text(run, "ring", "timeline") or '"-"',
        }))
        det.notes.append(f"jobs paired by {key[1]}")
        return det


def _job_key(fields) -> str | None:
    k = num(fields, "sched_job_id")
    if k:
        return k
    ctx, seq = num(fields, "context", "fence_context"), num(fields, "seqno", "fence_seqno")
    if ctx and seq:
        return f"(({ctx}) << 32) ^ ({seq})"
    return None
