"""Valid recipes, and where each block of the key table (keys.KEY_SPECS) goes in them: the
schema and key-table tests put a block's keys there."""

from __future__ import annotations

import copy
from typing import Any

from aorta_tui.recipe import keys as K
from aorta_tui.recipe.keyspec import TOP

# valid recipes (the loader accepts them), and where each block of the key table goes in them
TRIAGE_OK = {"schema_version": 1, "workload": "gpu_smoke", "trials": 1, "steps": 1,
             "cells": [{"name": "a", "mitigations": ["none"]}]}
PROBE_OK = {"schema_version": 1, "mode": "probe", "trials": 1, "mitigation_axis": ["none"],
            "diagnostic_axis": ["none"]}
_MINIMAL: dict[str, dict[str, Any]] = {
    "stop_after": {"events": 1, "max_trials": 1}, "pattern": {"id": "p", "match": {"regex": "x"}},
    "match": {"regex": "x"}, "inline_env": {"docker": "img:1"}}
MODES_OF = {"cell": ("triage",), "inline_env": ("triage",), "redaction": ("probe",)}


def with_block(block: str, values: dict[str, Any], *, mode: str | None = None
               ) -> tuple[dict[str, Any], str]:
    """A valid recipe (of ``mode``, or the block's) with ``values`` added to ``block`` (over
    its required keys), and the block's path in the loader's words."""
    mode = mode or MODES_OF.get(block, K.MODES)[0]
    recipe = copy.deepcopy(PROBE_OK if mode == "probe" else TRIAGE_OK)
    target = {**copy.deepcopy(_MINIMAL.get(block, {})), **values}
    if block == TOP:
        recipe.update(values)
        return recipe, ""
    if block == "cell":
        recipe["cells"][0].update(values)
        return recipe, "cells[0]"
    if block == "inline_env":
        recipe["cells"][0]["environment"] = target
        return recipe, "cells[0].environment"
    if block in ("pattern", "match"):
        recipe["custom_patterns"] = [target if block == "pattern" else {"id": "p", "match": target}]
        return recipe, "custom_patterns[0]" + (".match" if block == "match" else "")
    recipe[block] = target
    return recipe, block
