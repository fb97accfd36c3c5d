"""``errors``: GPU error tracepoints (NVIDIA Xid; amdgpu reset register dumps) where they exist."""

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

CANDIDATES = (
    # metric, group, event, key fields, aux fields, label fields
    ("xid", "nvidia", "nvidia_dev_xid", ("error_code",), ("dev",), ("msg", "dev")),
    ("amdgpu_reset", "amdgpu", "amdgpu_reset_reg_dumps", ("address",), ("value",), ()),
)


class ErrorProbes(ProbeSet):
    name = "errors"
    description = "GPU error events: NVIDIA Xid (nvidia:nvidia_dev_xid), amdgpu reset register dumps"
    template = "errors.bt"
    metrics = (
        Metric("xid", "point", "NVIDIA Xid errors (tracepoint nvidia:nvidia_dev_xid); key = Xid code",
               key_name="xid code", probe_type="tracepoint", aux_name="device"),
        Metric("amdgpu_reset", "point",
               "amdgpu reset register dumps, emitted while a GPU reset runs (tracepoint amdgpu:amdgpu_reset_reg_dumps)",
               key_name="register", probe_type="tracepoint", aux_name="value"),
    )

    def detect(self, ctx: ProbeContext) -> ProbeDetection:
        if ctx.tracefs is None:
            return tracefs_missing(self.name)
        det = ProbeDetection(probe_set=self.name, available=False)
        for metric, group, event, keys, auxs, labels in CANDIDATES:
            (f,) = record_events(det, ctx.tracefs, (group, event))
            if f is None:
                continue
            det.instances.append(Instance("error", {
                "group": group, "event": event, "metric": metric,
                "key": num(f, *keys) or "0", "aux": num(f, *auxs) or "0",
                "label": text(f, *labels) or '"-"'}))
        det.available = bool(det.instances)
        if not det.available:
            det.reason = "no GPU error tracepoint exists here (no nvidia or amdgpu driver loaded)"
            det.fix = "run on a GPU machine with the vendor kernel driver loaded"
        return det
