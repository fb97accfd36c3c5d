"""Small pieces every reproducer shares: device and dtype choice, timing, percentiles.

Imported by workload methods only; it imports torch lazily so the workload modules stay cheap
to import for discovery and config validation.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aorta_tui.core.errors import EnvironmentProblem
from aorta_tui.registry.workload import ConfigField

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch

DTYPE_NAMES = ("float32", "fp32", "bfloat16", "bf16", "float16", "fp16")
DEVICE_CHOICES = ("auto", "cpu", "cuda")


def device_field() -> ConfigField:
    return ConfigField(
        "device", "str", "auto", "auto = the GPU when torch sees one (CUDA or ROCm), else CPU",
        choices=DEVICE_CHOICES,
    )


def dtype_field(default: str = "float32", help: str = "compute dtype of the model") -> ConfigField:
    return ConfigField("dtype", "str", default, help, choices=DTYPE_NAMES)


def world_size_field() -> ConfigField:
    return ConfigField(
        "world_size", "int", 1,
        "ranks the engine starts under torchrun (one process per rank)", min=1,
    )


def torch_dtype(name: str) -> torch.dtype:
    import torch

    return {
        "float32": torch.float32, "fp32": torch.float32,
        "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
        "float16": torch.float16, "fp16": torch.float16,
    }[name]


@dataclass(frozen=True)
class DeviceChoice:
    device: torch.device
    label: str  # what the result records, e.g. "cuda:0 (NVIDIA H200)"

    @property
    def is_gpu(self) -> bool:
        return self.device.type == "cuda"


def pick_device(requested: str, local_rank: int) -> DeviceChoice:
    """Resolve ``auto|cpu|cuda`` for this rank; ``cuda`` without a GPU is an environment error.

    ROCm builds of PyTorch report their GPUs through the ``cuda`` device type too.
    """
    import torch

    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        return DeviceChoice(torch.device("cpu"), "cpu")
    if not torch.cuda.is_available():
        raise EnvironmentProblem(
            "device: cuda was asked for but torch sees no GPU",
            hint="use device: auto (falls back to CPU) or run on a GPU machine",
        )
    index = local_rank % max(torch.cuda.device_count(), 1)
    torch.cuda.set_device(index)
    name = torch.cuda.get_device_name(index)
    vendor = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    return DeviceChoice(torch.device("cuda", index), f"cuda:{index} ({name}, {vendor})")


def synchronize(device: torch.device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepTimer:
    """Wall time of one step, measured host-side after a device synchronize."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._t0 = 0.0

    def __enter__(self) -> StepTimer:
        synchronize(self.device)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._t0


def finite_or_none(x: float) -> float | None:
    """JSON has no NaN: a non-finite number is recorded as ``None`` (the failure says why)."""
    return x if math.isfinite(x) else None


def seed_everything(seed: int) -> None:
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)
