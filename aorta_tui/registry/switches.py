"""In-process switches that mitigations name (``Mitigation.switches``).

A workload calls :func:`apply_switches` in its worker process before its first GPU op. Each
switch records what it really changed, so the result says what was in force rather than what
was asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any


def _tf32_off(torch: ModuleType) -> str:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return "torch.tf32_off: matmul.allow_tf32=False cudnn.allow_tf32=False precision=highest"


def _deterministic(torch: ModuleType) -> str:
    import os
    import sys

    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(True, warn_only=False)
    else:
        # What use_deterministic_algorithms does, without importing torch._inductor to set one
        # flag (1.6 s on a CPU box): inductor's config reads this variable when it loads.
        os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1"
        torch._C._set_deterministic_algorithms(True, warn_only=False)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    return "torch.deterministic: use_deterministic_algorithms(True) cudnn.deterministic=True"


SWITCHES: dict[str, Callable[[Any], str]] = {
    "torch.tf32_off": _tf32_off,
    "torch.deterministic": _deterministic,
}


def apply_switches(names: Iterable[str]) -> list[str]:
    """Apply each named switch; returns one line per switch describing what it set."""
    names = list(names)
    if not names:
        return []
    import torch

    applied = []
    for name in names:
        fn = SWITCHES.get(name)
        if fn is None:
            applied.append(f"{name}: unknown switch, not applied")
            continue
        applied.append(fn(torch))
    return applied
