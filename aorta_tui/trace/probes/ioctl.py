"""``ioctl``: syscall tracepoints sys_enter_ioctl -> sys_exit_ioctl, per ioctl command."""

from __future__ import annotations

from aorta_tui.trace.metrics import Metric
from aorta_tui.trace.probes.base import (
    Instance,
    ProbeContext,
    ProbeDetection,
    ProbeSet,
    tracefs_missing,
)
from aorta_tui.trace.probes.kernel_common import record_events


class IoctlProbes(ProbeSet):
    name = "ioctl"
    description = "ioctl syscall duration per command (GPU drivers are driven through ioctls)"
    template = "ioctl.bt"
    metrics = (
        Metric(
            "ioctl",
            "duration",
            "ioctl syscall duration (tracepoints syscalls:sys_enter_ioctl -> sys_exit_ioctl, same thread); key = ioctl cmd, aux = fd",
            key_name="ioctl cmd",
            probe_type="tracepoint",
            probe_hits=2,
            aux_name="fd",
        ),
    )

    def detect(self, ctx: ProbeContext) -> ProbeDetection:
        if ctx.tracefs is None:
            return tracefs_missing(self.name)
        det = ProbeDetection(probe_set=self.name, available=False)
        enter, exit_ = record_events(det, ctx.tracefs, ("syscalls", "sys_enter_ioctl"),
                                     ("syscalls", "sys_exit_ioctl"))
        if enter is None or exit_ is None:
            det.reason = "syscall tracepoints are absent (kernel built without CONFIG_FTRACE_SYSCALLS)"
            return det
        if "cmd" not in enter or "fd" not in enter:
            det.reason = f"sys_enter_ioctl has no cmd/fd fields (has {sorted(enter)})"
            return det
        det.available = True
        det.instances.append(Instance("ioctl", {"cmd_field": "cmd", "fd_field": "fd"}))
        return det
