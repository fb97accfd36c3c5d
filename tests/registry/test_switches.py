"""In-process mitigation switches change what PyTorch really does (checked in a fresh process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

CODE = """
import json, torch
from aorta_tui.registry.switches import apply_switches
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")
lines = apply_switches(["torch.tf32_off", "torch.deterministic", "torch.no_such_switch"])
print(json.dumps({
    "lines": lines,
    "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
    "cudnn_tf32": torch.backends.cudnn.allow_tf32,
    "precision": torch.get_float32_matmul_precision(),
    "deterministic": torch.are_deterministic_algorithms_enabled(),
}))
"""


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_switches_take_effect_and_report_unknown_ones():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["matmul_tf32"] is False and got["cudnn_tf32"] is False
    assert got["precision"] == "highest"
    assert got["deterministic"] is True
    assert got["lines"][2] == "torch.no_such_switch: unknown switch, not applied"
