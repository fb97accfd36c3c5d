"""Python section: interpreter, virtual environment / conda, and versions of a fixed list of
packages that change numerics or scheduling (read from metadata, never imported)."""

from __future__ import annotations

import os
import platform
import re
import sys

from aorta_tui.envsnap import fields as F
from aorta_tui.envsnap.fields import Leaf

PACKAGES = (
    "torch", "numpy", "scipy", "triton", "pytorch-triton", "pytorch-triton-rocm", "jax", "jaxlib",
    "tensorflow", "transformers", "accelerate", "deepspeed", "flash-attn", "xformers", "apex",
    "vllm", "sglang", "megatron-core", "fbgemm-gpu", "torchrec", "aiter", "onnxruntime",
    "onnxruntime-gpu", "cupy", "cuda-python", "rocm-sdk-core", "transformer-engine",
    "nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-cuda-runtime-cu12",
    "nvidia-cublas", "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "nvidia-cuda-runtime",
    "mkl", "intel-openmp",
)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def capture_python() -> dict[str, object]:
    from importlib import metadata  # ~35 ms to import: pay it in the worker thread

    installed: dict[str, str] = {}
    try:
        for dist in metadata.distributions():
            name = dist.metadata.get("Name") if dist.metadata else None
            if name:
                installed.setdefault(_norm(name), dist.version)
    except Exception as exc:  # a corrupt dist-info must not cost the section
        packages_failure: Leaf | None = F.error(f"reading package metadata failed: {exc}",
                                                "api:importlib.metadata")
    else:
        packages_failure = None
    packages: dict[str, Leaf] = {}
    for name in PACKAGES:
        if packages_failure is not None:
            packages[name] = dict(packages_failure)
        elif _norm(name) in installed:
            packages[name] = F.ok(installed[_norm(name)], "api:importlib.metadata")
        else:
            packages[name] = F.ok(None, "api:importlib.metadata (not installed)")
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    conda = os.environ.get("CONDA_DEFAULT_ENV")
    return {
        "version": F.ok(platform.python_version(), "api:platform.python_version"),
        "implementation": F.ok(platform.python_implementation(), "api:platform.python_implementation"),
        "executable": F.ok(sys.executable, "api:sys.executable"),
        "venv": F.ok(sys.prefix if in_venv else None, "api:sys.prefix != sys.base_prefix"),
        "conda_env": F.ok(conda, "env:CONDA_DEFAULT_ENV"),
        "packages": packages,
    }
