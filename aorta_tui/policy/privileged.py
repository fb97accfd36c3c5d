"""The helper's GPU-knob verbs (root side): a policy preset's clock level and power limit.

``gpu_read`` reads a device's state with the vendor tool; ``gpu_apply`` sets the knobs of the
allow-list below, each an integer within its bounds (the ones a preset may carry,
``policy/presets.py``), after reading the state it will put back; ``gpu_restore`` puts back the
state the helper itself read (the unprivileged side sends no state to restore, so it cannot
make the helper write values of its choosing). What is still applied when the tool ends, or
dies, is restored by ``shutdown``. The vendor tools are run by name from root's ``PATH`` (sudo's
``secure_path``), never from a path the unprivileged side gives.
"""

from __future__ import annotations

import threading
from typing import Any

from aorta_tui.policy.gpu_control import State, vendor_backend
from aorta_tui.policy.presets import CLOCK_LEVEL_RANGE, POWER_LIMIT_W_RANGE, GpuControlSettings
from aorta_tui.privsep import protocol as P
from aorta_tui.privsep.helper import Result, Verb, VerbFamily

BACKENDS = ("auto", "nvidia", "rocm")
DEVICE = P.Int(0, 63)
# knob -> its bounds, the same a policy file is held to
KNOBS: dict[str, P.Int] = {"clock_level": P.Int(*CLOCK_LEVEL_RANGE, optional=True),
                           "power_limit_w": P.Int(*POWER_LIMIT_W_RANGE, optional=True)}


class Knobs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._applied: dict[tuple[str, int], State] = {}  # (backend, device) -> state to restore

    def read(self, args: dict[str, Any]) -> Result:
        backend = vendor_backend(args["backend"])
        return {"tool": backend.name, "state": backend.read_state(args["device"])}, ()

    def apply(self, args: dict[str, Any]) -> Result:
        if args["clock_level"] is None and args["power_limit_w"] is None:
            raise P.ProtocolError(P.BAD_ARGUMENT, "gpu_apply sets no knob")
        backend = vendor_backend(args["backend"])
        key = (args["backend"], args["device"])
        with self._lock:
            if key not in self._applied:  # the state before the first change is what comes back
                self._applied[key] = backend.read_state(args["device"])
            previous = self._applied[key]
        settings = GpuControlSettings(clock_level=args["clock_level"], power_limit_w=args["power_limit_w"])
        backend.apply(args["device"], settings, previous)
        return {"applied": settings.to_dict()}, ()

    def restore(self, args: dict[str, Any]) -> Result:
        with self._lock:
            previous = self._applied.pop((args["backend"], args["device"]), None)
        if previous is None:
            return {"restored": False}, ()
        vendor_backend(args["backend"]).restore(args["device"], previous)
        return {"restored": True}, ()

    def shutdown(self) -> None:
        with self._lock:
            keys = list(self._applied)
        for backend, device in keys:
            self.restore({"backend": backend, "device": device})


def family() -> VerbFamily:
    knobs = Knobs()
    target: dict[str, P.Check] = {"backend": P.OneOf(BACKENDS), "device": DEVICE}
    return VerbFamily(
        verbs={
            "gpu_read": Verb(target, knobs.read),
            "gpu_apply": Verb({**target, **KNOBS}, knobs.apply),
            "gpu_restore": Verb(target, knobs.restore),
        },
        shutdown=knobs.shutdown,
    )
