"""What a request needs from the machine's Python: torch, said once, with the fix.

The README says torch is optional: ``env``, ``trace``, ``--help``, the TUI and probe recipes
run without it. A request that does need it (a registered workload, a queue run) is refused
with exit 3 and the fix before anything runs, never a ``ModuleNotFoundError`` (exit 70) or a
matrix of failed trials blaming the device. Nothing here imports torch unless asked to.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from aorta_tui.core.errors import EnvironmentProblem

TORCH_FIX = ("pip install torch (a CPU build is enough to try it), or install your ROCm or "
             "CUDA build of PyTorch")


def torch_missing() -> str | None:
    """Why ``import torch`` cannot work in this interpreter (without importing it), or None."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError) as exc:  # a finder that refuses it, a broken torch
        return f"cannot be imported ({type(exc).__name__}: {exc})"
    return None if spec is not None else "is not installed"


def require_torch(what: str) -> None:
    """Raise exit 3 when ``what`` ("workload 'gpu_smoke'") cannot have torch here."""
    why = torch_missing()
    if why is not None:
        raise EnvironmentProblem(f"{what} needs torch, which {why} for {sys.executable}",
                                 hint=TORCH_FIX)


def import_torch(what: str) -> ModuleType:
    """``import torch`` for ``what``; exit 3 with the fix when it fails."""
    try:
        import torch
    except ImportError as exc:
        raise EnvironmentProblem(
            f"{what} needs torch, which cannot be imported by {sys.executable} "
            f"({type(exc).__name__}: {exc})",
            hint=TORCH_FIX) from None
    return torch
