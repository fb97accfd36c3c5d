"""The three upstream AORTA recipes load into exactly the cells upstream's loader produces."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aorta_tui.recipe import dump_resolved, load_recipe, load_recipe_text, recipe_hash

# What upstream's loader produces (its README, checked against upstream 0.3.0's code):
# cell name -> mitigations. Probe cells keep the axis entries other than `none`.
EXPECTED = {
    "probe-template-bash.yaml": (
        "probe",
        {"none-none": (), "none-xnack": ("xnack",), "tf32_off-none": ("tf32_off",),
         "tf32_off-xnack": ("tf32_off", "xnack")},
        "none-none",
    ),
    "example-fsdp-smoke.yaml": (
        "triage",
        {"baseline-local": ("none",), "tf32_off-local": ("tf32_off",),
         "xnack-local": ("xnack",)},
        "baseline-local",
    ),
    "example-inference-continuous-smoke.yaml": (
        "triage", {"baseline-local": ("none",)}, "baseline-local"),
}


def _readme_cells(readme: Path) -> dict[str, tuple[str, list[str], str | None]]:
    """file -> (mode, cell names, baseline) from the README's table."""
    rows: dict[str, tuple[str, list[str], str | None]] = {}
    for line in readme.read_text().splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) != 3 or not cols[0].endswith(".yaml"):
            continue
        baseline = re.search(r"\(baseline ([\w.-]+)\)", cols[2])
        names = re.sub(r"\(.*?\)", "", cols[2])
        rows[cols[0]] = (cols[1].split(",")[0].strip(), [n.strip() for n in names.split(",")],
                         baseline.group(1) if baseline else None)
    return rows


def test_fixture_copy_is_byte_identical_to_shared(upstream_dir):
    shared = Path(__file__).resolve().parents[2].parent / "shared" / "compat" / "upstream-recipes"
    if not shared.is_dir():
        pytest.skip(f"{shared} is absent (only the tests/fixtures copy is here)")
    local = Path(__file__).resolve().parents[1] / "fixtures" / "upstream-recipes"
    for f in sorted(shared.iterdir()):
        assert (local / f.name).read_bytes() == f.read_bytes(), f.name


def test_readme_lists_the_cells_we_expect(upstream_dir):
    rows = _readme_cells(upstream_dir / "README.md")
    assert set(rows) == set(EXPECTED)
    for name, (mode, cells, baseline) in rows.items():
        exp_mode, exp_cells, exp_baseline = EXPECTED[name]
        assert mode == exp_mode
        assert cells == list(exp_cells)
        if baseline is not None:
            assert baseline == exp_baseline


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_upstream_recipe_loads_into_upstream_cells(upstream_dir, registry, name):
    recipe = load_recipe(upstream_dir / name, registry=registry)
    mode, cells, baseline = EXPECTED[name]
    readme_mode, readme_cells, _ = _readme_cells(upstream_dir / "README.md")[name]
    assert recipe.mode == mode == readme_mode
    assert [c.name for c in recipe.cells] == readme_cells
    assert {c.name: c.mitigations for c in recipe.cells} == cells
    assert recipe.confound.baseline_cell == baseline
    assert recipe.confound.threshold == 1.15
    assert recipe.schema_version == 1


def test_probe_template_values(upstream_dir, registry):
    r = load_recipe(upstream_dir / "probe-template-bash.yaml", registry=registry)
    assert r.ticket == "TICKET-1234" and r.trials == 3
    assert r.timeout_per_trial == 1800.0
    assert r.mitigation_axis == ("none", "tf32_off") and r.diagnostic_axis == ("none", "xnack")
    assert r.collect_paths == ("${AORTA_ARTIFACT_DIR}/stdout.log",
                               "${AORTA_ARTIFACT_DIR}/stderr.log")
    assert r.redaction is not None
    assert r.redaction.scrub_env_keys == ("AWS_*", "GCP_*", "*_TOKEN", "*_KEY", "USER", "HOME")
    assert r.redaction.scrub_paths and r.redaction.scrub_ip_addresses
    # upstream's defaults
    assert (r.hang_window_sec, r.hang_grace_period_at_start) == (30.0, 60.0)
    assert r.env_passthrough_mode == "inherit"
    assert r.workload is None and r.steps is None and r.command is None
    assert all(c.environment == "local" for c in r.cells)
    assert r.where("redaction.scrub_paths").endswith("probe-template-bash.yaml:25:16")


def test_fsdp_values_and_locations(upstream_dir, registry):
    path = upstream_dir / "example-fsdp-smoke.yaml"
    r = load_recipe(path, registry=registry)
    assert (r.workload, r.trials, r.steps, r.ticket) == ("race", 2, 100, "EXAMPLE-151")
    assert r.workload_config == {"mode": "fsdp", "warmup_iterations": 2, "verify_iterations": 5,
                                 "simulate_compute": False, "fsdp_shard_size": 100000}
    assert r.confound.baseline_rule == "baseline-prefix"
    # save_logs is absent upstream; aorta-tui always keeps the logs (retain prunes them)
    assert r.trial_isolation == "process" and r.save_logs is True and r.stop_after is None
    lines = path.read_text().splitlines()
    line, col = r.locations["cells[1].mitigations[0]"]
    assert lines[line - 1][col - 1:].startswith("tf32_off")
    name_line = next(i for i, text in enumerate(lines, 1) if "name: xnack-local" in text)
    col = lines[name_line - 1].index("xnack-local") + 1
    assert r.where("cells[2].name") == f"{path}:{name_line}:{col}"


def test_inference_nested_workload_config(upstream_dir, registry):
    r = load_recipe(upstream_dir / "example-inference-continuous-smoke.yaml", registry=registry)
    cfg = r.workload_config
    assert cfg["serving"]["continuous_batch"] == {"enabled": True, "max_active_requests": 4,
                                                  "arrival_pattern": "fixed"}
    assert cfg["model"]["vocab_size"] == 32000 and cfg["dtype"] == "bfloat16"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_upstream_resolved_round_trip(upstream_dir, registry, name):
    r = load_recipe(upstream_dir / name, registry=registry)
    again = load_recipe_text(dump_resolved(r), registry=registry)
    assert again == r
    assert recipe_hash(again) == recipe_hash(r)
