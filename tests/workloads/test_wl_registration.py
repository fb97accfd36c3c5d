"""The four reproducers register, declare their launch, and import without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aorta_tui.registry.registry import load_workload
from aorta_tui.registry.workload import validate_config

NAMES = {"training": "torchrun", "inference": "single", "llm_determinism": "torchrun",
         "race": "torchrun"}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_entry_point_loads_the_class(name):
    cls = load_workload(name)
    assert cls.name == name and cls.launch.mode == NAMES[name]
    assert cls.hint and cls.description
    defaults = validate_config(cls.config_schema, {})
    if cls.launch.mode == "torchrun":
        assert defaults["world_size"] == 1 == cls.launch.min_world_size
    # every fault-injection knob is off by default
    knobs = {"training": ("inject_nan_at_step", None), "inference": ("perturb_logits", 0.0),
             "llm_determinism": ("inject_nondeterminism", "none"), "race": ("drop_wait", "none")}
    key, off = knobs[name]
    assert defaults[key] == off


def test_workload_modules_import_without_torch():
    code = ("import sys; import aorta_tui.workloads.training, aorta_tui.workloads.inference, "
            "aorta_tui.workloads.llm_determinism, aorta_tui.workloads.race; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
