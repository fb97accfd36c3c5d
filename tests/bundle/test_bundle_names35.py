"""Names the recipe chose are evidence: cell names like APEXbaseline survive, and two names
that had to be scrubbed stay two (issue 35: a real Prometheus stored 1 series for 4 cells;
two cells collided in matrix.json)."""

from __future__ import annotations

from aorta_tui.bundle.redact import FileState, RedactionConfig, Scrubber
from aorta_tui.metrics.labels import LabelSanitiser

CELLS = ["APEXbaseline", "AKCmitigations", "model.layers.0.self_attn.q_proj.weight",
         "none-none", "hsa_no_sdma-none"]
SECRET_CELLS = ["env.HF_TOKEN.hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7",
                "env.HF_TOKEN.hf_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3"]


def test_metric_labels_keep_cell_names_and_never_merge_two() -> None:
    label = LabelSanitiser(distinct=True)  # as sweep_metrics labels cells
    assert [label(c) for c in CELLS] == CELLS
    scrubbed = [label(c) for c in SECRET_CELLS]
    assert len(set(scrubbed)) == 2
    assert all("hf_" not in s and "<redacted:secret>" in s for s in scrubbed)
    assert [label(c) for c in SECRET_CELLS] == scrubbed  # stable


def test_matrix_keys_and_cell_values_stay_distinct() -> None:
    scrub = Scrubber(RedactionConfig())
    doc = {"cells": {c: {"cell": c, "trials": 2} for c in [*CELLS, *SECRET_CELLS]}}
    for c in SECRET_CELLS:
        scrub.learn_text(c)
    new, _hits = scrub.scrub_json(doc, FileState())
    keys = list(new["cells"])
    assert len(keys) == len(CELLS) + 2 and keys[: len(CELLS)] == CELLS
    assert [new["cells"][k]["cell"] for k in keys] == keys  # each key and its cell agree
    assert not any("hf_" in k for k in keys)
