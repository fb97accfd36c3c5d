"""The recipe fuzzer and the mitigations-sidecar fuzzer of issue 12 (counts printed in CI).

Recipe fuzzer: real recipes (tests/fixtures/upstream-recipes, ../shared/compat/upstream-recipes,
recipes/) mutated the way an attacker or an unlucky editor would (huge and deep numbers, long
strings, NUL and surrogates, option-looking docker images, shell syntax in variable names,
repeated axes, unknown probes, YAML tags), plus random documents. Each case goes through the
real validator and, when it validates, through what ``recipe validate`` does next (workload
check, plan summary) and a resolve/reload; a sample goes through the real CLI subprocess. The
promise: a located message (exit 2) or a valid recipe, never a traceback, an internal error
or exit 70.

Sidecar fuzzer: mitigations files, hostile and random, through ``load_sidecar_mitigations``
(and a sample through the CLI): a located exit 2, or mitigations whose every name is a shell
identifier and every value a NUL-free string.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.core.errors import AortaError
from aorta_tui.recipe import check_recipe_text, dump_resolved, load_recipe_text
from aorta_tui.recipe.checks import ENV_NAME_RE
from aorta_tui.registry.registry import Registry, load_sidecar_mitigations
from aorta_tui.sweep.plan import build_plan
from aorta_tui.sweep.plan_summary import summarize
from aorta_tui.sweep.workload_check import workload_issues

REPO = Path(__file__).resolve().parents[2]
SEED_DIRS = [REPO / "tests" / "fixtures" / "upstream-recipes",
             REPO.parent / "shared" / "compat" / "upstream-recipes", REPO / "recipes"]
# a `mode: sanitizer` recipe has its own loader and fuzzer (tests/compat/test_compat_sanitizer.py)
SEED_FILES = sorted({p.resolve() for d in SEED_DIRS if d.is_dir() for p in d.rglob("*.yaml")
                     if "\nmode: sanitizer\n" not in p.read_text(encoding="utf-8")})
SEEDS = [yaml.safe_load(p.read_text()) for p in SEED_FILES]
REGISTRY = Registry([REPO / "recipes" / "torchrun_hang_probe.mitigations.json"])
PROMISE = "located exit 2 or a valid recipe, never a traceback / exit 70"

assert len(SEEDS) >= 8, SEED_FILES

hostile_scalars = st.one_of(
    st.sampled_from([
        10**100, -(10**40), 1.0e30, -1.0e30, float("inf"), float("nan"), 10**19, 2**63,
        "--privileged", "--volume=/:/host", "-v/:/host", "X;touch /tmp/PWN;Y", "$(id)",
        "`id`", "a\nb", "a\x00b", "\ud800", "nope", "cuda", "none", "..", "matrix.json",
        "${AORTA_ARTIFACT_DIR}/stdout.log", "/etc/shadow", "HF_TOKEN", "x" * 5000, "",
        "(a+)+$", "[", "tier9", "custom:missing", True, None, [], {},
    ]),
    st.integers(), st.floats(), st.text(max_size=20),
)
hostile_values = st.recursive(
    hostile_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["X;Y", "HF_TOKEN", "A B", "1X", "name", "docker", "env", "probes",
                         "on_pass", "regex", "steps"]) | st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
# keys worth hitting hard: every numeric key, the docker image, env maps, axes, trace, retain
TARGETS = ["trials", "steps", "seed", "timeout_per_trial", "hang_window_sec",
           "hang_grace_period_at_start", "confound", "stop_after", "retain", "trace",
           "extra_env", "collect_paths", "tier3_vram_growth", "save_logs", "mitigation_axis",
           "diagnostic_axis", "custom_patterns", "disable_detectors", "redaction",
           "env_passthrough_mode", "workload_config", "cells", "ticket", "command"]


def _spots(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield node, k
            yield from _spots(v)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield node, i
            yield from _spots(v)


@st.composite
def attacked_recipes(draw):
    recipe = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["target", "replace", "delete", "docker", "repeat",
                                       "env", "deep"]))
        if action == "target":
            recipe[draw(st.sampled_from(TARGETS))] = draw(hostile_values)
        elif action == "docker" and recipe.get("cells"):
            cell = draw(st.sampled_from(recipe["cells"])) if isinstance(recipe["cells"], list) \
                else None
            if isinstance(cell, dict):
                cell["environment"] = {"docker": draw(hostile_scalars)}
        elif action == "repeat":
            axis = draw(st.sampled_from(["mitigation_axis", "diagnostic_axis"]))
            recipe[axis] = ["none"] * draw(st.integers(2, 300))
        elif action == "env":
            name = draw(st.sampled_from(["HF_TOKEN", "X;touch /tmp/PWN;Y", "A B", "1X", "OK"])
                        | st.text(max_size=8))
            recipe["extra_env" if recipe.get("mode") != "probe" else "redaction"] = {
                name: draw(hostile_scalars)}
        elif action == "deep":
            value: object = draw(hostile_scalars)
            for _ in range(draw(st.integers(50, 80))):
                value = [value]
            recipe[draw(st.sampled_from(TARGETS))] = value
        else:
            spots = list(_spots(recipe))
            if not spots:
                continue
            container, key = draw(st.sampled_from(spots))
            if action == "delete":
                del container[key]
            else:
                container[key] = draw(hostile_values)
    try:
        return yaml.safe_dump(recipe, sort_keys=draw(st.booleans()), allow_unicode=True)
    except (yaml.YAMLError, UnicodeEncodeError, RecursionError, ValueError):
        return yaml.safe_dump({"schema_version": 1, "mode": "probe", "bad": True})


raw_attacks = st.sampled_from([
    "schema_version: 1\ntrials: " + "9" * 5000 + "\n",
    "schema_version: 1\ntrials: !!python/object/apply:os.system [id]\n",
    "schema_version: 1\nseed: 2001-13-45\n",
    "schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [" + ", ".join(["none"] * 3000)
    + "]\ndiagnostic_axis: [none]\n",
    "a: &a [*a]\n", "[" * 10_000, "schema_version: 1\n" + "x: " + "y" * 100_000 + "\n",
]) | st.text(max_size=300)


def validate_like_the_cli(text: str) -> None:
    """What ``recipe validate`` does with a file's text, in process, with its checks."""
    for registry in (None, REGISTRY):
        issues = check_recipe_text(text, source="fuzz.yaml", registry=registry)
        for issue in issues:
            assert issue.line >= 1 and issue.column >= 1, issue
            assert "internal error" not in issue.message, issue
            assert len(issue.message) <= 400 and len(issue.hint or "") <= 400, issue
            assert "Traceback" not in issue.message
        if issues or registry is None:
            continue
        recipe = load_recipe_text(text, source="fuzz.yaml", registry=registry)
        workload_issues(recipe)
        summarize(recipe, registry)
        again = load_recipe_text(dump_resolved(recipe), registry=registry)
        assert again.cells == recipe.cells or any(
            "<masked" in v for c in recipe.cells for v in c.extra_env.values())
        try:
            build_plan(again, registry)
        except AortaError as exc:  # only the masked-secret refusal is allowed here
            assert "masked" in exc.message, exc.message


def _counted(attack_tally, name: str, fn, *args) -> None:
    try:
        fn(*args)
    except BaseException:
        attack_tally.record(name, cases=1, failures=1, promise=PROMISE)
        raise
    attack_tally.record(name, cases=1, promise=PROMISE)


FUZZ = settings(max_examples=900, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@FUZZ
@given(text=attacked_recipes())
def test_recipe_fuzzer_on_attacked_real_recipes(attack_tally, text):
    _counted(attack_tally, "recipe fuzzer", validate_like_the_cli, text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=raw_attacks)
def test_recipe_fuzzer_on_raw_text(attack_tally, text):
    _counted(attack_tally, "recipe fuzzer", validate_like_the_cli, text)


def test_every_seed_recipe_validates(attack_tally):
    """The unmutated seeds are valid (else the mutations start from errors only)."""
    for path in SEED_FILES:
        text = path.read_text()
        _counted(attack_tally, "recipe fuzzer", validate_like_the_cli, text)
        assert check_recipe_text(text, registry=REGISTRY) == [], path


# -- through the real CLI ----------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "aorta_tui", *args], capture_output=True,
                          text=True, timeout=60, env=env, cwd=REPO)


def _check_cli(path: Path, proc: subprocess.CompletedProcess[str]) -> None:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "internal error" not in out, out[-2000:]
    assert proc.returncode in (0, 2), (proc.returncode, out[-2000:])
    if proc.returncode == 2:
        assert re.search(re.escape(str(path)) + r"(:\d+:\d+)?: ", proc.stderr), proc.stderr
    assert len(proc.stderr) < 40_000


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=8, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(text=attacked_recipes())
def test_recipe_fuzzer_through_the_cli(tmp_path, attack_tally, text):
    f = tmp_path / "fuzz.yaml"
    f.write_text(text, errors="surrogatepass")

    def run() -> None:
        _check_cli(f, _cli("recipe", "validate", str(f), "--mitigations-file",
                           str(REPO / "recipes" / "torchrun_hang_probe.mitigations.json")))

    _counted(attack_tally, "recipe fuzzer", run)


# -- the sidecar fuzzer ------------------------------------------------------------------------
SIDE_PROMISE = "located exit 2 or identifier names and NUL-free values, never 70"
env_keys = st.sampled_from(["X;touch /tmp/PWN;Y", "A B", "1X", "X=Y", "", "$(id)", "OK",
                            "GPU_MAX_HW_QUEUES", "HF_TOKEN", "a\nb"]) | st.text(max_size=10)
env_vals = st.sampled_from(["1", "", "a\x00b", "'; id; '", "x" * 200_000, 3, None, [], {}]) | \
    st.text(max_size=10)
entries = st.fixed_dictionaries(
    {"env": st.dictionaries(env_keys, env_vals, max_size=3)},
    optional={"description": hostile_scalars, "switches": st.lists(
        st.sampled_from(["torch.tf32_off", "torch.nope", 1]), max_size=2) | hostile_scalars,
        "vendor": st.sampled_from(["any", "rocm", "cuda", "amd", 1]), "oops": st.just(1)})
sidecars = st.one_of(
    st.dictionaries(st.sampled_from(["ok", "none", "evil; id", "a" * 200, ".."]) |
                    st.text(max_size=8), entries, max_size=3),
    st.lists(entries.map(lambda e: {"name": "m", **e}) | hostile_values, max_size=3),
    hostile_values,
)


def _check_sidecar(path: Path) -> None:
    try:
        mitigations = load_sidecar_mitigations(path)
    except AortaError as exc:
        assert exc.exit_code == 2 and str(path) in exc.message, exc.message
        assert len(exc.message) < 1000
        return
    for m in mitigations:
        for k, v in m.env.items():
            assert ENV_NAME_RE.fullmatch(k) and isinstance(v, str) and "\x00" not in v


@settings(max_examples=300, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(data=sidecars, raw=st.sampled_from([None, "[" * 100_000, "\xff{}", "", "{", "[1, 2]",
                                           '{"a": {"env": {"X;Y": "1"}}}']))
def test_sidecar_fuzzer(tmp_path, attack_tally, data, raw):
    path = tmp_path / "m.json"
    if raw is None:
        path.write_text(json.dumps(data))
    else:
        path.write_bytes(raw.encode("latin-1"))

    def run() -> None:
        _check_sidecar(path)

    try:
        run()
    except BaseException:
        attack_tally.record("sidecar fuzzer", cases=1, failures=1, promise=SIDE_PROMISE)
        raise
    attack_tally.record("sidecar fuzzer", cases=1, promise=SIDE_PROMISE)


@settings(max_examples=5, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(data=sidecars)
def test_sidecar_fuzzer_through_the_cli(tmp_path, attack_tally, data):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    proc = _cli("sweep", "list-mitigations", "--mitigations-file", str(path))
    try:
        _check_cli(path, proc)
    except BaseException:
        attack_tally.record("sidecar fuzzer", cases=1, failures=1, promise=SIDE_PROMISE)
        raise
    attack_tally.record("sidecar fuzzer", cases=1, promise=SIDE_PROMISE)
