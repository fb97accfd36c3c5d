"""Issue 33 item 2: a policy preset's GPU knobs go through the privileged helper under sudo.

The GPU is the one thing mocked: a stand-in ``nvidia-smi`` on the helper's PATH keeps its state
in a JSON file. The helper is a real process (root) and :class:`GpuControl` drives it through
:class:`HelperBackend`, as the policy evaluator does under sudo: the knobs are applied, and the
state the helper read itself comes back, at the end of the block and when the tool goes away
without restoring (its connection closes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sudo_support import start_helper

from aorta_tui.policy.gpu_control import GpuControl, HelperBackend
from aorta_tui.policy.presets import GpuControlSettings
from aorta_tui.privsep.client import Client, HelperArgumentError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the helper is root's")

FAKE_SMI = """#!PYTHON
import json, os, sys
path = os.environ["FAKE_SMI_STATE"]
state = json.load(open(path)) if os.path.exists(path) else {"power": 300, "lock": None}
args = sys.argv[1:]
if any(a.startswith("--query-gpu") for a in args):
    print(f"{state['power']:.2f}, 350.00")
elif any(a.startswith("--query-supported-clocks") for a in args):
    print("1980\\n1500\\n1000\\n500")
elif "-lgc" in args:
    state["lock"] = args[args.index("-lgc") + 1]
elif "-rgc" in args:
    state["lock"] = None
elif "-pl" in args:
    state["power"] = int(args[args.index("-pl") + 1])
else:
    sys.exit(2)
json.dump(state, open(path, "w"))
"""


@pytest.fixture()
def fake_gpu(tmp_path: Path) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text(FAKE_SMI.replace("PYTHON", sys.executable, 1))
    smi.chmod(0o755)
    return tmp_path


def _start_helper(fake_gpu: Path) -> tuple[Client, subprocess.Popen[bytes]]:
    env = {**os.environ, "PATH": f"{fake_gpu / 'bin'}:{os.environ['PATH']}",
           "FAKE_SMI_STATE": str(fake_gpu / "state.json")}
    sock, proc = start_helper(env)
    return Client(sock, helper_pid=proc.pid), proc


@pytest.fixture()
def helper(fake_gpu: Path) -> Iterator[Client]:
    conn, proc = _start_helper(fake_gpu)
    try:
        yield conn
    finally:
        conn.close()
        proc.wait(timeout=30)


def _state(fake_gpu: Path) -> dict:
    return json.loads((fake_gpu / "state.json").read_text())


def test_knobs_are_applied_by_the_helper_and_its_own_reading_restored(helper: Client, fake_gpu: Path) -> None:
    backend = HelperBackend(helper, "nvidia")
    control = GpuControl(backend, 0, GpuControlSettings(clock_level=7, power_limit_w=250))
    assert any("-lgc 1980,1980" in step for step in control.plan())
    with control:
        assert _state(fake_gpu) == {"power": 250, "lock": "1980,1980"}
    assert _state(fake_gpu) == {"power": 300, "lock": None}
    assert backend.name == "nvidia-smi (privileged helper)"


def test_a_restore_cannot_carry_a_state_of_the_callers_choosing(helper: Client, fake_gpu: Path) -> None:
    backend = HelperBackend(helper, "nvidia")
    backend.read_state(0)
    backend.apply(0, GpuControlSettings(power_limit_w=200), {})
    backend.restore(0, {"power_limit_w": 4999})  # ignored: the helper restores what it read
    assert _state(fake_gpu)["power"] == 300


def test_out_of_bounds_knobs_are_refused_before_any_change(helper: Client, fake_gpu: Path) -> None:
    with pytest.raises(HelperArgumentError) as info:
        helper.call("gpu_apply", backend="nvidia", device=0, clock_level=8, power_limit_w=None)
    assert "clock_level" in str(info.value) and info.value.exit_code == 2
    assert not (fake_gpu / "state.json").exists()  # nvidia-smi never ran


def test_a_tool_that_goes_away_gets_its_knobs_restored_by_the_helper(fake_gpu: Path) -> None:
    conn, proc = _start_helper(fake_gpu)
    HelperBackend(conn, "nvidia").read_state(0)
    conn.call("gpu_apply", backend="nvidia", device=0, clock_level=0, power_limit_w=150)
    assert _state(fake_gpu) == {"power": 150, "lock": "500,500"}
    conn.close()  # the tool died without restoring: the helper's connection ends
    proc.wait(timeout=60)
    assert _state(fake_gpu) == {"power": 300, "lock": None}
