"""Shared fixtures for the trace tests: a working bpftrace (or a skip saying why) and the fake
GPU runtime libraries compiled from tests/trace/fakelib with gcc."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

FAKELIB = Path(__file__).parent / "fakelib"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "trace"


def _bpftrace_problem() -> str | None:
    exe = os.environ.get("AORTA_TUI_BPFTRACE") or shutil.which("bpftrace")
    if exe is None:
        return "bpftrace is not installed (apt-get install bpftrace)"
    if os.geteuid() != 0:
        return "bpftrace needs root; these tests run real probes"
    if not Path("/sys/kernel/tracing/events").is_dir():
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
        if not Path("/sys/kernel/tracing/events").is_dir():
            return "tracefs is not mounted and could not be mounted"
    r = subprocess.run([exe, "-e", "BEGIN { exit(); }"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return f"bpftrace cannot load a program here: {r.stderr.strip()[-200:]}"
    return None


@pytest.fixture(scope="session")
def bpftrace() -> str:
    problem = _bpftrace_problem()
    if problem:
        pytest.skip(problem)
    return os.environ.get("AORTA_TUI_BPFTRACE") or shutil.which("bpftrace")  # type: ignore[return-value]


@dataclass
class FakeLibs:
    cuda: Path
    hip: Path
    driver: Path
    dir: Path


@pytest.fixture(scope="session")
def fakelibs(tmp_path_factory: pytest.TempPathFactory) -> FakeLibs:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (apt-get install gcc libc6-dev)")
    d = tmp_path_factory.mktemp("fakelib")
    # names a loader would use, so detection by soname pattern is exercised too
    cuda, hip, drv = d / "libcuda.so.1", d / "libamdhip64.so.5", d / "driver"
    for args in (
        [gcc, "-O1", "-shared", "-fPIC", "-o", str(cuda), str(FAKELIB / "fakecuda.c")],
        [gcc, "-O1", "-shared", "-fPIC", "-o", str(hip), str(FAKELIB / "fakehip.c")],
        [gcc, "-O1", "-o", str(drv), str(FAKELIB / "driver.c"), "-ldl"],
    ):
        subprocess.run(args, check=True, capture_output=True)
    return FakeLibs(cuda=cuda, hip=hip, driver=drv, dir=d)
