"""Shared helpers of the multi-rank tests: the repository root, the environment every child
gets (no NVLink multicast), and scripts/multigpu_check.py loaded as a module."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def child_env() -> dict[str, str]:
    """The environment every child of these tests gets."""
    env = dict(os.environ)
    env.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
                "PYTHONUNBUFFERED": "1"})
    # `python3` in the recipe's command and torchrun's children must be this interpreter
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@pytest.fixture(scope="session")
def torch_available() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed in this environment")


@pytest.fixture(scope="session")
def multigpu() -> ModuleType:
    spec = importlib.util.spec_from_file_location("multigpu_check", REPO / "scripts" / "multigpu_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
