"""Vendor backends: streams, device events, synchronisation and memory, chosen at run time.

``cuda`` and ``rocm`` both go through torch's ``torch.cuda`` API (HIP builds of torch map it
to HIP streams and events); ``cpu`` emulates streams by running launches one after another,
so its device interval of a launch is the host interval and the result is marked emulated.
torch is imported inside :func:`select_backend` only (and by :func:`resolve_devices` for
``--devices all``, which needs the GPU count).
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.core.numerals import ascii_digits
from aorta_tui.core.requires import import_torch

if TYPE_CHECKING:  # torch is imported where a run starts (select_backend), not to name its types
    import torch

# What the harness gets from a backend and hands back to it without looking inside. Under CPU
# emulation there are no streams (None) and an event is a one-slot list the host clock is
# written into; on a GPU they are torch's CUDA/HIP streams and timing events. ``Backend`` is a
# union of the two, so each backend takes both kinds and narrows to its own where it uses one.
StreamHandle: TypeAlias = "torch.cuda.Stream | None"
EventHandle: TypeAlias = "torch.cuda.Event | list[int]"


def _record_now(event: list[int]) -> None:
    event[0] = time.perf_counter_ns()


class CpuBackend:
    """Launches run synchronously in issue order; 'events' are host timestamps."""

    name = "cpu"
    emulated = True
    device_clock = "host perf_counter_ns (CPU emulation: launches run synchronously)"

    def __init__(self, torch: ModuleType, devices: list[str]) -> None:
        self.torch = torch
        self.devices = devices

    priority_source = None  # no streams, so nothing to read a priority from

    def make_streams(self, stream_devices: list[str],
                     high_priority: set[int] | frozenset[int] = frozenset()) -> list[StreamHandle]:
        return [None] * len(stream_devices)  # emulation: priorities cannot exist

    def highest_priority(self, device: str) -> int | None:
        return None

    def read_priority(self, stream: StreamHandle) -> int | None:
        return None

    @contextlib.contextmanager
    def stream_context(self, stream: StreamHandle) -> Iterator[None]:
        yield

    # pre-bound calls for the measure pass (None: nothing to do in emulation)
    def bound_set_stream(self, stream: StreamHandle) -> Callable[[], Any] | None:
        return None

    def bound_wait(self, stream: StreamHandle, event: EventHandle) -> Callable[[], Any] | None:
        return None

    def bound_record(self, event: EventHandle, stream: StreamHandle) -> Callable[[], Any]:
        assert isinstance(event, list), "a CPU-emulation event is what new_event made: a list"
        return partial(_record_now, event)

    def save_streams(self) -> list[StreamHandle]:
        return []

    def restore_streams(self, saved: list[StreamHandle]) -> None:
        return None

    def new_event(self, device: str) -> list[int]:
        return [0]

    def record(self, event: EventHandle, stream: StreamHandle) -> None:
        assert isinstance(event, list), "a CPU-emulation event is what new_event made: a list"
        event[0] = time.perf_counter_ns()

    def wait(self, stream: StreamHandle, event: EventHandle) -> None:
        return None  # in-order execution already satisfies every dependency

    def synchronize(self) -> None:
        return None

    def calibrate(self) -> float | None:
        return None  # events are host timestamps already

    def event_host_ns(self, event: EventHandle, device: str) -> float:
        assert isinstance(event, list), "a CPU-emulation event is what new_event made: a list"
        return float(event[0])

    def reset_memory(self) -> None:
        return None

    def memory(self) -> tuple[dict[str, Any] | None, str | None]:
        return None, "CPU emulation has no device memory to measure"

    def platform_info(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "device_name": platform.processor() or platform.machine(),
            "torch": self.torch.__version__,
            "runtime": None,
            "python": platform.python_version(),
            "host": platform.node(),
        }


class TorchGpuBackend:
    """CUDA or ROCm through torch.cuda: real streams, timing events, anchor clock alignment."""

    emulated = False
    # per device: the calibrated anchor event and its host time (declared here: in __init__ the
    # parameter ``torch`` hides the module the annotation names)
    _anchor: dict[str, tuple[torch.cuda.Event, float]]

    def __init__(self, torch: ModuleType, devices: list[str], name: str) -> None:
        self.torch = torch
        self.devices = devices
        self.name = name
        self.device_clock = "cuda_events" if name == "cuda" else "hip_events"
        self._anchor = {}

    priority_source = "torch.cuda.Stream.priority (read back from each stream; lower is higher)"

    def make_streams(self, stream_devices: list[str],
                     high_priority: set[int] | frozenset[int] = frozenset()) -> list[StreamHandle]:
        """One stream per entry; the indices in ``high_priority`` get the highest priority."""
        Stream = self.torch.cuda.Stream
        return [Stream(device=d, priority=self.highest_priority(d)) if i in high_priority
                else Stream(device=d) for i, d in enumerate(stream_devices)]

    def highest_priority(self, device: str) -> int:
        """The numerically lowest value of the device's stream priority range."""
        with self.torch.cuda.device(device):
            return int(min(self.torch.cuda.Stream.priority_range()))

    def read_priority(self, stream: StreamHandle) -> int | None:
        value = getattr(stream, "priority", None)
        return None if value is None else int(value)

    def stream_context(self, stream: StreamHandle) -> torch.cuda.StreamContext:
        return self.torch.cuda.stream(stream)

    # The measure pass issues an iteration as a flat tuple of these pre-bound calls: setting the
    # current stream once per run of launches on it (what a ``with torch.cuda.stream(s)`` block
    # in a hand-written loop does, without the context object per launch), event waits and
    # records only where a dependency or an end marker needs them.
    def bound_set_stream(self, stream: StreamHandle) -> Callable[[], Any]:
        return partial(self.torch.cuda.set_stream, stream)

    def bound_wait(self, stream: StreamHandle, event: EventHandle) -> Callable[[], Any]:
        assert stream is not None and not isinstance(event, list), "a GPU run's own stream and event"
        return partial(stream.wait_event, event)

    def bound_record(self, event: EventHandle, stream: StreamHandle) -> Callable[[], Any]:
        assert not isinstance(event, list), "a GPU event is what new_event made: torch's"
        return partial(event.record, stream)

    def save_streams(self) -> list[StreamHandle]:
        """The current stream of every device, to put back after a pass set others."""
        return [self.torch.cuda.current_stream(d) for d in self.devices]

    def restore_streams(self, saved: list[StreamHandle]) -> None:
        for stream in saved:
            self.torch.cuda.set_stream(stream)

    def new_event(self, device: str) -> torch.cuda.Event:
        with self.torch.cuda.device(device):
            return self.torch.cuda.Event(enable_timing=True)

    def record(self, event: EventHandle, stream: StreamHandle) -> None:
        assert not isinstance(event, list), "a GPU event is what new_event made: torch's"
        event.record(stream)

    def wait(self, stream: StreamHandle, event: EventHandle) -> None:
        assert stream is not None and not isinstance(event, list), "a GPU run's own stream and event"
        stream.wait_event(event)

    def synchronize(self) -> None:
        for d in self.devices:
            self.torch.cuda.synchronize(d)

    def calibrate(self, rounds: int = 25) -> float:
        """Pin an anchor event per device to the host clock; returns the worst uncertainty (ns).

        Each round: host time, record the anchor on an idle stream, poll until it completes.
        The event happened between the two host readings; the tightest round is kept and its
        midpoint used, half its width is the uncertainty.
        """
        worst = 0.0
        for d in self.devices:
            stream = self.torch.cuda.Stream(device=d)
            best: tuple[float, torch.cuda.Event, float] | None = None
            for _ in range(rounds):
                ev = self.new_event(d)
                self.torch.cuda.synchronize(d)
                t0 = time.perf_counter_ns()
                ev.record(stream)
                while not ev.query():
                    pass
                t1 = time.perf_counter_ns()
                width = float(t1 - t0)
                if best is None or width < best[0]:
                    best = (width, ev, (t0 + t1) / 2.0)
            assert best is not None
            self._anchor[d] = (best[1], best[2])
            worst = max(worst, best[0] / 2.0)
        return worst

    def event_host_ns(self, event: EventHandle, device: str) -> float:
        assert not isinstance(event, list), "a GPU event is what new_event made: torch's"
        anchor, anchor_ns = self._anchor[device]
        return anchor_ns + anchor.elapsed_time(event) * 1e6

    def reset_memory(self) -> None:
        for d in self.devices:
            self.torch.cuda.reset_peak_memory_stats(d)

    def memory(self) -> tuple[dict[str, Any] | None, str | None]:
        out = {}
        for d in self.devices:
            out[d] = {
                "peak_bytes": int(self.torch.cuda.max_memory_allocated(d)),
                "final_bytes": int(self.torch.cuda.memory_allocated(d)),
                "source": "torch.cuda.max_memory_allocated / memory_allocated (caching allocator)",
            }
        return out, None

    def platform_info(self) -> dict[str, Any]:
        torch = self.torch
        props = torch.cuda.get_device_properties(self.devices[0])
        runtime = (f"HIP {torch.version.hip}" if self.name == "rocm"
                   else f"CUDA {torch.version.cuda}")
        driver = None
        with contextlib.suppress(Exception):
            driver = int(torch._C._cuda_getDriverVersion())
        return {
            "backend": self.name,
            "device_name": props.name,
            "device_count": torch.cuda.device_count(),
            "torch": torch.__version__,
            "runtime": runtime,
            "driver_api_version": driver,
            "python": platform.python_version(),
            "host": platform.node(),
        }


ALL_DEVICES = "all"


def resolve_devices(device: str, devices: list[str] | None, *,
                    env: Mapping[str, str] | None = None,
                    gpu_count: Callable[[], int] | None = None) -> tuple[str, list[str]]:
    """Normalise ``--device``/``--devices`` into (kind, device list).

    - ``--device cuda`` without an index is ``cuda:$LOCAL_RANK`` when ``LOCAL_RANK`` is set
      (torchrun, ``torch.distributed.launch``, accelerate and DeepSpeed set it per rank: one
      GPU per rank of a node), else ``cuda:0``. An explicit ``cuda:N`` is kept as given.
    - ``--devices all`` is every GPU this process sees (``gpu_count``, by default torch's
      ``cuda.device_count()``, which honours ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``),
      of the ``--device`` kind; with ``--device cpu`` it is the one emulated device. Under
      torchrun each rank spreads its own streams over all of them.

    torch is imported only for ``--devices all`` on a GPU kind.
    """
    env = os.environ if env is None else env
    if devices and [d.strip().lower() for d in devices] == [ALL_DEVICES]:
        kind = _kind(device)
        if kind == "cpu":
            return kind, ["cpu"]
        count = (gpu_count or _torch_gpu_count)()
        if count < 1:
            raise EnvironmentProblem(
                "--devices all found no GPU (torch sees none: no CUDA/ROCm device, a CPU-only "
                "torch build, or CUDA_VISIBLE_DEVICES hides them all)",
                hint=CPU_HINT)
        return kind, [f"cuda:{i}" for i in range(count)]
    if devices:
        if ALL_DEVICES in (d.strip().lower() for d in devices):
            raise UsageError(f"--devices {','.join(devices)}: 'all' cannot be combined with other devices",
                             hint="use --devices all, or list them: --devices cuda:0,cuda:1")
        kinds = {_kind(d) for d in devices}
        if len(kinds) != 1:
            raise UsageError(f"--devices mixes device kinds: {', '.join(devices)}",
                             hint="list devices of one kind, e.g. --devices cuda:0,cuda:1")
        kind = kinds.pop()
        return kind, [_normalise(d, kind, None) for d in devices]
    kind = _kind(device)
    return kind, [_normalise(device, kind, _local_rank(env))]


# --size in the hint: a CPU run of the default sizes took 21 minutes (issue 38 item 4)
CPU_HINT = ("run on a GPU machine, or use --device cpu for an emulated run (small sizes by "
            "default there, seconds; --size default for the full ones, many minutes on a CPU)")


def _kind(d: str) -> str:
    kind = d.split(":")[0].strip().lower()
    if kind in ("rocm", "hip"):
        kind = "cuda"  # torch exposes HIP devices as 'cuda'
    if kind not in ("cpu", "cuda"):
        raise UsageError(f"unknown device {d!r}", hint="use --device cpu, cuda or cuda:N, or --devices all")
    return kind


def _local_rank(env: Mapping[str, str]) -> int | None:
    raw = env.get("LOCAL_RANK")
    if raw is None or raw.strip() == "":
        return None
    if not ascii_digits(raw.strip()):
        raise UsageError(f"LOCAL_RANK={raw!r} is not a rank number, so --device cuda cannot pick a GPU from it",
                         hint="give the GPU explicitly (--device cuda:N), or fix the launcher's LOCAL_RANK")
    return int(raw)


def _normalise(d: str, kind: str, local_rank: int | None) -> str:
    if kind == "cpu":
        return "cpu"
    if ":" not in d:
        return f"cuda:{local_rank or 0}"
    idx = d.split(":", 1)[1]
    if not ascii_digits(idx):
        raise UsageError(f"bad device {d!r}", hint="use cuda:N with N a number")
    return f"cuda:{int(idx)}"


def _torch_gpu_count() -> int:
    torch = import_torch("a queue run")

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


# The backend a queue run measures with: torch's CPU emulation, or torch's CUDA/HIP streams.
Backend = CpuBackend | TorchGpuBackend


def select_backend(device: str, devices: list[str] | None = None) -> Backend:
    kind, devs = resolve_devices(device, devices)
    torch = import_torch(f"a queue run on {device}")  # exit 3 with the fix, never exit 70

    if kind == "cpu":
        return CpuBackend(torch, devs)
    if not torch.cuda.is_available():
        raise EnvironmentProblem(
            f"--device {device} needs a GPU, but torch {torch.__version__} sees none "
            "(no CUDA/ROCm device or a CPU-only torch build)",
            hint=CPU_HINT,
        )
    count = torch.cuda.device_count()
    local_rank = os.environ.get("LOCAL_RANK")
    for d in devs:
        if int(d.split(":")[1]) >= count:
            picked = (f" (--device {device} follows LOCAL_RANK={local_rank})"
                      if local_rank is not None and ":" not in device and not devices else "")
            raise EnvironmentProblem(f"device {d} does not exist{picked}: this process sees {count} GPU(s)",
                                     hint=f"use cuda:0..cuda:{count - 1}, or start at most {count} "
                                     "rank(s) per node")
    name = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    return TorchGpuBackend(torch, devs, name)
