"""``drm_sched``: DRM GPU scheduler tracepoints, job queued -> run -> done, per ring.

Two kernel generations are told apart by their format files:

* older (to 6.15): ``drm_sched_job`` (queued), ``drm_run_job``, ``drm_sched_process_job``;
  fields ``entity, fence, name, id, job_count, hw_job_count``; jobs keyed by ``id``, run ->
  done by the finished ``fence`` pointer;
* newer (6.16+): ``drm_sched_job_queue``, ``drm_sched_job_run``, ``drm_sched_job_done``;
  fields ``name, job_count, hw_job_count, dev, fence_context, fence_seqno, client_id``;
  jobs keyed by fence context + seqno.
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
from aorta_tui.trace.probes.kernel_common import fields_of, num, text

GROUP = "gpu_scheduler"
VARIANTS = (
    ("drm_sched_job_queue", "drm_sched_job_run", "drm_sched_job_done"),
    ("drm_sched_job", "drm_run_job", "drm_sched_process_job"),
)


class DrmSchedProbes(ProbeSet):
    name = "drm_sched"
    description = "DRM scheduler job queued -> run -> done latency and hardware queue depth per ring"
    template = "drm_sched.bt"
    metrics = (
        Metric(
            "queue_to_run",
            "duration",
            "DRM scheduler job queued -> run: time in the software queue (gpu_scheduler queue -> run tracepoints); aux = hw_job_count at run (jobs on the ring)",
            key_name="job",
            breakdown_by="label",
            label_name="ring",
            probe_type="tracepoint",
            probe_hits=2,
            aux_name="hw_job_count",
        ),
        Metric(
            "run_to_done",
            "duration",
            "DRM scheduler job run -> done: time on the hardware ring until its fence signalled (gpu_scheduler run -> done tracepoints)",
            key_name="job",
            breakdown_by="label",
            label_name="ring",
            probe_type="tracepoint",
            probe_hits=2,
        ),
    )

    def detect(self, ctx: ProbeContext) -> ProbeDetection:
        if ctx.tracefs is None:
            return tracefs_missing(self.name)
        det = ProbeDetection(probe_set=self.name, available=False)
        for q_ev, r_ev, d_ev in VARIANTS:
            q, r, d = (fields_of(ctx.tracefs, GROUP, e) for e in (q_ev, r_ev, d_ev))
            if q is None or r is None or d is None:
                continue
            det.found = [f"{GROUP}:{e}" for e in (q_ev, r_ev, d_ev)]
            if num(r, "fence_context") and num(r, "fence_seqno") and num(d, "fence_context"):
                fkey_r = f"({num(r, 'fence_context')} << 32) ^ {num(r, 'fence_seqno')}"
                fkey_q = f"({num(q, 'fence_context')} << 32) ^ {num(q, 'fence_seqno')}"
                fkey_d = f"({num(d, 'fence_context')} << 32) ^ {num(d, 'fence_seqno')}"
                queue_key, run_key, run_done_key, done_key = fkey_q, fkey_r, fkey_r, fkey_d
            elif ((q_id := num(q, "id")) and (r_id := num(r, "id"))
                  and (r_fence := num(r, "fence")) and (d_fence := num(d, "fence"))):
                queue_key, run_key, run_done_key, done_key = q_id, r_id, r_fence, d_fence
            else:
                det.reason = (f"cannot pair jobs: {r_ev} has fields {sorted(r)}, "
                              f"{d_ev} has {sorted(d)}")
                return det
            det.available = True
            det.instances.append(Instance("queue_to_run", {
                "queue_event": q_ev, "run_event": r_ev, "done_event": d_ev,
                "queue_key": queue_key, "run_key": run_key,
                "run_done_key": run_done_key, "done_key": done_key,
                "label": text(r, "name") or '"-"',
                "depth": num(r, "hw_job_count") or "0",
            }))
            det.notes.append(f"kernel variant: {q_ev} / {r_ev} / {d_ev}")
            return det
        det.missing = [f"{GROUP}:{e}" for e in VARIANTS[0] + VARIANTS[1]]
        det.reason = "no gpu_scheduler tracepoints (no DRM scheduler driver such as amdgpu loaded)"
        det.fix = "run on a machine whose GPU driver uses the DRM scheduler (amdgpu, xe, nouveau...)"
        return det
