"""Device-wide GPU knobs (clock level, power limit), opt-in and always undone.

Nothing here runs unless the user passed ``--allow-gpu-control``. Before anything changes,
the plan (the exact commands, and the restore commands) is printed; the previous state is
read first, and :class:`GpuControl` puts it back on every way out: the ``with`` block's exit
(``finally``), an ``atexit`` hook, and SIGTERM/SIGHUP handlers that unwind the run. Restoring
twice is harmless.

Backends: ``nvidia-smi`` (NVIDIA), ``rocm-smi`` (AMD) and :class:`FakeBackend`, which keeps
its "device" in a JSON file so tests (including a killed child process) can check that the
state came back. These knobs change the machine for everyone on it: never use the real
backends on a shared machine.
"""

from __future__ import annotations

import atexit
import json
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from aorta_tui.core import spawn_gate
from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.policy.presets import GpuControlSettings

if TYPE_CHECKING:
    from aorta_tui.privsep import client as privsep

State = dict[str, Any]


class GpuControlError(EnvironmentProblem):
    """A control command failed (no privilege, unsupported knob, tool missing)."""


class ControlInterrupted(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM/SIGHUP so ``finally`` blocks restore the GPU."""


class ControlBackend(Protocol):
    name: str

    def read_state(self, device: int) -> State: ...

    def plan_apply(self, device: int, settings: GpuControlSettings, state: State) -> list[str]: ...

    def apply(self, device: int, settings: GpuControlSettings, state: State) -> None: ...

    def plan_restore(self, device: int, state: State) -> list[str]: ...

    def restore(self, device: int, state: State) -> None: ...


# -- real backends -------------------------------------------------------------------------


def _run_tool(argv: list[str], timeout_s: float = 30.0) -> str:
    try:
        proc = spawn_gate.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except FileNotFoundError:
        raise GpuControlError(f"{argv[0]} is not installed",
                              hint="GPU control needs nvidia-smi (NVIDIA) or rocm-smi (AMD)"
                              ) from None
    except subprocess.TimeoutExpired:
        raise GpuControlError(f"`{' '.join(argv)}` did not answer in {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise GpuControlError(
            f"`{' '.join(argv)}` failed (exit {proc.returncode}): "
            f"{detail[-1] if detail else 'no message'}",
            hint="clock and power changes need root and a GPU that allows them")
    return proc.stdout


def level_to_clock(level: int, supported_mhz: list[int]) -> int:
    """Map level 0..7 onto a supported clock list (0 = lowest, 7 = highest)."""
    if not supported_mhz:
        raise GpuControlError("the GPU reports no supported graphics clocks")
    clocks = sorted(set(supported_mhz))
    return clocks[round(level / 7 * (len(clocks) - 1))]


class NvidiaSmiBackend:
    name = "nvidia-smi"

    def read_state(self, device: int) -> State:
        out = _run_tool(["nvidia-smi", "-i", str(device),
                         "--query-gpu=power.limit,power.default_limit",
                         "--format=csv,noheader,nounits"])
        clocks = _run_tool(["nvidia-smi", "-i", str(device),
                            "--query-supported-clocks=graphics",
                            "--format=csv,noheader,nounits"])
        try:
            limit, default = (x.strip() for x in out.strip().splitlines()[0].split(","))
            return {
                "power_limit_w": round(float(limit)),
                "default_power_limit_w": round(float(default)),
                "supported_graphics_mhz": sorted({int(float(x)) for x in clocks.split()
                                                  if x.strip()}),
                # nvidia-smi cannot report an existing clock lock; restoring resets it (-rgc).
                "clock_lock": "unknown",
            }
        except (ValueError, IndexError):
            raise GpuControlError(f"nvidia-smi reported no usable power limit / clocks for GPU "
                                  f"{device} ({out.strip()[:80]!r})",
                                  hint="this GPU may not allow power or clock control") from None

    def _apply_argvs(self, device: int, settings: GpuControlSettings, state: State
                     ) -> list[list[str]]:
        argvs = []
        if settings.clock_level is not None:
            mhz = level_to_clock(settings.clock_level, state.get("supported_graphics_mhz", []))
            argvs.append(["nvidia-smi", "-i", str(device), "-lgc", f"{mhz},{mhz}"])
        if settings.power_limit_w is not None:
            argvs.append(["nvidia-smi", "-i", str(device), "-pl", str(settings.power_limit_w)])
        return argvs

    def _restore_argvs(self, device: int, state: State) -> list[list[str]]:
        return [["nvidia-smi", "-i", str(device), "-rgc"],
                ["nvidia-smi", "-i", str(device), "-pl", str(state["power_limit_w"])]]

    def plan_apply(self, device: int, settings: GpuControlSettings, state: State) -> list[str]:
        return [" ".join(a) for a in self._apply_argvs(device, settings, state)]

    def apply(self, device: int, settings: GpuControlSettings, state: State) -> None:
        for argv in self._apply_argvs(device, settings, state):
            _run_tool(argv)

    def plan_restore(self, device: int, state: State) -> list[str]:
        return [" ".join(a) for a in self._restore_argvs(device, state)]

    def restore(self, device: int, state: State) -> None:
        _restore_all(self._restore_argvs(device, state))


class RocmSmiBackend:
    name = "rocm-smi"

    def read_state(self, device: int) -> State:
        out = _run_tool(["rocm-smi", "-d", str(device), "--showperflevel", "--showmaxpower",
                         "--json"])
        try:
            card = next(iter(json.loads(out).values()))
        except (ValueError, StopIteration, AttributeError):
            raise GpuControlError("could not read rocm-smi's JSON state") from None
        perf = next((v for k, v in card.items() if "performance level" in k.lower()), "auto")
        power = next((v for k, v in card.items() if "max graphics package power" in k.lower()),
                     None)
        try:
            watts = round(float(power)) if power not in (None, "") else None
        except (TypeError, ValueError):
            watts = None  # restore then resets the power cap to the default
        return {"perf_level": str(perf).lower(), "power_limit_w": watts}

    def _apply_argvs(self, device: int, settings: GpuControlSettings) -> list[list[str]]:
        d = ["rocm-smi", "-d", str(device), "--autorespond", "y"]
        argvs = []
        if settings.clock_level is not None:
            argvs.append([*d, "--setperflevel", "manual"])
            argvs.append([*d, "--setsclk", str(settings.clock_level)])
        if settings.power_limit_w is not None:
            argvs.append([*d, "--setpoweroverdrive", str(settings.power_limit_w)])
        return argvs

    def _restore_argvs(self, device: int, state: State) -> list[list[str]]:
        d = ["rocm-smi", "-d", str(device), "--autorespond", "y"]
        argvs = [[*d, "--setperflevel", state.get("perf_level") or "auto"]]
        if state.get("power_limit_w") is not None:
            argvs.append([*d, "--setpoweroverdrive", str(state["power_limit_w"])])
        else:
            argvs.append([*d, "--resetpoweroverdrive"])
        return argvs

    def plan_apply(self, device: int, settings: GpuControlSettings, state: State) -> list[str]:
        return [" ".join(a) for a in self._apply_argvs(device, settings)]

    def apply(self, device: int, settings: GpuControlSettings, state: State) -> None:
        for argv in self._apply_argvs(device, settings):
            _run_tool(argv)

    def plan_restore(self, device: int, state: State) -> list[str]:
        return [" ".join(a) for a in self._restore_argvs(device, state)]

    def restore(self, device: int, state: State) -> None:
        _restore_all(self._restore_argvs(device, state))


def _restore_all(argvs: list[list[str]]) -> None:
    # Try every restore step even when one fails, then report the failures together.
    failures = []
    for argv in argvs:
        try:
            _run_tool(argv)
        except GpuControlError as exc:
            failures.append(exc.message)
    if failures:
        raise GpuControlError("restoring the GPU state failed: " + "; ".join(failures),
                              hint="restore it by hand with the commands printed in the plan")


class FakeBackend:
    """A pretend GPU whose state lives in a JSON file: ``{"DEVICE": {"clock_level": .., ...}}``.

    ``fail_on`` makes ``apply`` raise for that knob, to test partial applies.
    """

    name = "fake"

    def __init__(self, state_path: str | Path, *, fail_on: str | None = None) -> None:
        self.path = Path(state_path)
        self.fail_on = fail_on
        self.calls: list[str] = []

    def _load(self) -> dict[str, State]:
        if not self.path.exists():
            return {}
        return json.loads(self.path.read_text())

    def _device(self, device: int) -> State:
        return self._load().get(str(device), {"clock_level": None, "power_limit_w": 700})

    def _store(self, device: int, state: State) -> None:
        data = self._load()
        data[str(device)] = state
        atomic_write_json(self.path, data)

    def read_state(self, device: int) -> State:
        self.calls.append("read")
        return dict(self._device(device))

    def plan_apply(self, device: int, settings: GpuControlSettings, state: State) -> list[str]:
        return [f"fake: device {device} {k}={v}" for k, v in settings.to_dict().items()
                if v is not None]

    def apply(self, device: int, settings: GpuControlSettings, state: State) -> None:
        current = self._device(device)
        for key, value in settings.to_dict().items():
            if value is None:
                continue
            if key == self.fail_on:
                self.calls.append(f"apply-failed:{key}")
                raise GpuControlError(f"fake backend refuses {key}")
            current[key] = value
            self._store(device, current)
            self.calls.append(f"apply:{key}={value}")

    def plan_restore(self, device: int, state: State) -> list[str]:
        return [f"fake: device {device} restore {state}"]

    def restore(self, device: int, state: State) -> None:
        self._store(device, dict(state))
        self.calls.append("restore")


class HelperBackend:
    """Under sudo: the knobs are set by the privileged helper (``policy/privileged.py``), which
    reads the state itself, checks each knob against its allow-list and bounds, and restores
    what it read (also when the tool dies). The plan is the vendor backend's own."""

    def __init__(self, conn: privsep.Client, spec: str) -> None:
        self.conn = conn
        self.spec = spec
        self.name = f"{spec} (privileged helper)"
        self._vendor: NvidiaSmiBackend | RocmSmiBackend | None = None

    def _plans(self) -> NvidiaSmiBackend | RocmSmiBackend:
        if self._vendor is None:
            raise GpuControlError("the GPU state was not read yet")
        return self._vendor

    def read_state(self, device: int) -> State:
        answer = self.conn.call("gpu_read", backend=self.spec, device=device)
        self._vendor = NvidiaSmiBackend() if answer.get("tool") == "nvidia-smi" else RocmSmiBackend()
        self.name = f"{answer.get('tool')} (privileged helper)"
        return dict(answer.get("state") or {})

    def plan_apply(self, device: int, settings: GpuControlSettings, state: State) -> list[str]:
        return self._plans().plan_apply(device, settings, state)

    def apply(self, device: int, settings: GpuControlSettings, state: State) -> None:
        self.conn.call("gpu_apply", backend=self.spec, device=device, clock_level=settings.clock_level,
                       power_limit_w=settings.power_limit_w)

    def plan_restore(self, device: int, state: State) -> list[str]:
        return self._plans().plan_restore(device, state)

    def restore(self, device: int, state: State) -> None:
        self.conn.call("gpu_restore", backend=self.spec, device=device)


def backend_from_spec(spec: str) -> ControlBackend:
    """``auto``, ``nvidia``, ``rocm`` or ``fake:PATH`` (tests). Under sudo a real backend is the
    privileged helper's (the tool itself runs as the user); the fake one needs no root."""
    if spec.startswith("fake:"):
        return FakeBackend(spec[5:])
    from aorta_tui.privsep import client as privsep

    conn = privsep.current()
    if conn is not None and spec in ("auto", "nvidia", "rocm"):
        return HelperBackend(conn, spec)
    return vendor_backend(spec)


def vendor_backend(spec: str) -> NvidiaSmiBackend | RocmSmiBackend:
    """The vendor tool's backend for ``auto``, ``nvidia`` or ``rocm``, run by this process."""
    if spec == "nvidia":
        return NvidiaSmiBackend()
    if spec == "rocm":
        return RocmSmiBackend()
    if spec == "auto":
        if shutil.which("nvidia-smi"):
            return NvidiaSmiBackend()
        if shutil.which("rocm-smi"):
            return RocmSmiBackend()
        raise GpuControlError("no GPU control tool found (nvidia-smi or rocm-smi)",
                              hint="run without --allow-gpu-control, or install the vendor tool")
    raise UsageError(f"unknown GPU control backend {spec!r}",
                     hint="one of auto, nvidia, rocm, fake:PATH")


# -- the guarded session -------------------------------------------------------------------


class GpuControl:
    """Apply ``settings`` on ``device`` for the duration of a ``with`` block, then restore.

    The state is read before anything changes; a failed or partial apply is restored too.
    """

    def __init__(self, backend: ControlBackend, device: int, settings: GpuControlSettings,
                 *, on_note: Callable[[str], None] | None = None) -> None:
        self.backend = backend
        self.device = device
        self.settings = settings
        self.on_note = on_note or (lambda _msg: None)
        self.previous: State | None = None
        self._restored = True
        self._lock = threading.Lock()
        self._old_handlers: dict[int, Any] = {}

    def plan(self) -> list[str]:
        """The commands that will run (reads the current state; changes nothing)."""
        state = self.backend.read_state(self.device)
        return [*(f"apply:   {c}" for c in self.backend.plan_apply(self.device, self.settings,
                                                                  state)),
                *(f"restore: {c}" for c in self.backend.plan_restore(self.device, state))]

    def __enter__(self) -> GpuControl:
        self.previous = self.backend.read_state(self.device)
        self._restored = False
        atexit.register(self.restore)
        self._install_signal_handlers()
        try:
            self.backend.apply(self.device, self.settings, self.previous)
        except BaseException:
            self.restore()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        with self._lock:
            if self._restored or self.previous is None:
                return
            self._restored = True
        try:
            self.backend.restore(self.device, self.previous)
            self.on_note(f"GPU {self.device}: previous state restored ({self.backend.name})")
        finally:
            self._remove_signal_handlers()
            atexit.unregister(self.restore)

    def _install_signal_handlers(self) -> None:
        # Signal handlers can only be set from the main thread; elsewhere (a TUI worker
        # thread) try/finally and atexit still restore.
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError):
                continue

    def _remove_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, handler in self._old_handlers.items():
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError, TypeError):
                continue
        self._old_handlers.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Unwind: the `with` block's exit restores, and the CLI exits 130.
        raise ControlInterrupted(f"signal {signum}")
