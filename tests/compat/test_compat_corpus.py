"""Issue 14, item 1: upstream AORTA's own material, read from its sdist (never copied here).

Fetches ``amd-aorta==0.3.0`` from the package registry once (cached in
``~/.cache/aorta-tui-compat``; skipped with the reason when the registry cannot be reached),
installs it into a separate ``--target`` directory, and for every recipe file in the sdist:

- asks upstream's own loader (a subprocess on that directory) for the plan or its refusal;
- loads and plans the recipe here (with the sidecars it names);
- checks that every recipe upstream accepts is accepted here with the same cells,
  mitigations, environments, env vars, trials and steps, and that every recipe refused here
  is one docs/compat.md lists with its reason.

It also runs upstream's classifier test inputs (its tier-4 fixture logs and the dmesg lines of
its tier-3 tests) through both classifiers and checks verdicts and detectors agree, except the
differences docs/compat.md documents. Counts go to the attack tally (printed by CI).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from aorta_tui.core.errors import AortaError

VERSION = "0.3.0"
CACHE = Path(os.environ.get("AORTA_COMPAT_CACHE", Path.home() / ".cache" / "aorta-tui-compat"))
HERE = Path(__file__).resolve().parent
COMPAT_DOC = HERE.parents[1] / "docs" / "compat.md"


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def upstream() -> tuple[Path, Path]:
    """(unpacked sdist root, --target install dir), fetched once."""
    root = CACHE / f"amd_aorta-{VERSION}"
    target = CACHE / "target"
    if not (root / "PKG-INFO").is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        got = _pip("download", "--no-deps", "--no-binary", ":all:", f"amd-aorta=={VERSION}",
                   "-d", str(CACHE))
        archives = sorted(CACHE.glob(f"amd*aorta-{VERSION}.tar.gz"))
        if got.returncode != 0 or not archives:
            pytest.skip(f"the package registry cannot be reached: {got.stderr.strip()[-300:]}")
        with tarfile.open(archives[0]) as tar:
            tar.extractall(CACHE, filter="data")
    if not (target / "aorta" / "triage" / "recipe.py").is_file():
        got = _pip("install", "--no-deps", "--target", str(target), f"amd-aorta=={VERSION}")
        if got.returncode != 0:
            pytest.skip(f"amd-aorta=={VERSION} cannot be installed: {got.stderr.strip()[-300:]}")
    return root, target


# -- recipes ----------------------------------------------------------------------------------

def _recipe_files(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*")):
        if p.suffix in (".yaml", ".yml") and ".github" not in p.parts and p.is_file() \
                and re.search(r"(?m)^schema_version\s*:", p.read_text(errors="replace")):
            out.append(p)
    return out


def _sidecars(root: Path) -> dict[Path, set[str]]:
    """Every upstream-format sidecar in the sdist and the names it defines."""
    out = {}
    for p in sorted(root.rglob("*.json")):
        try:
            data = json.loads(p.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and data.get("version") == 1 and (
                "mitigations" in data or "environments" in data):
            out[p] = set(data.get("mitigations") or {}) | set(data.get("environments") or {})
    return out


def _needed(recipe: Path, sidecars: dict[Path, set[str]]) -> list[Path]:
    words = set(re.findall(r"[A-Za-z0-9_.-]+", recipe.read_text(errors="replace")))
    return [p for p, names in sidecars.items() if names & words]


def _upstream_plans(target: Path, items: list[dict]) -> dict[str, dict]:
    env = {**os.environ, "PYTHONPATH": str(target)}
    got = subprocess.run([sys.executable, str(HERE / "upstream_plan.py")], input=json.dumps(items),
                         capture_output=True, text=True, timeout=300, env=env)
    assert got.returncode == 0, got.stderr[-2000:]
    return json.loads(got.stdout)


def _our_plan(recipe: Path, sidecars: list[Path]) -> dict:
    from aorta_tui.recipe import RecipeValidationError, load_recipe
    from aorta_tui.registry.registry import Registry
    from aorta_tui.sweep.plan import build_plan
    from aorta_tui.sweep.workload_check import workload_issues

    registry = Registry(sidecars)
    r = load_recipe(recipe, registry=registry)
    problems, _ = workload_issues(r)  # workload_config checked as `recipe validate` does
    if problems:
        raise RecipeValidationError(problems, r.source)
    plan = build_plan(r, registry)
    return {"cells": [{"name": c.name, "mitigations": list(c.mitigations),
                       "environment": c.environment, "env": dict(c.env), "trials": c.trials,
                       "steps": c.steps if r.mode == "triage" else None} for c in plan.cells]}


def _comparable(plan: dict) -> dict:
    """A probe cell's `none` axis entries are kept by upstream and dropped here (they set
    nothing), and a probe cell has no steps (upstream records 1): neither changes a trial."""
    cells = []
    for c in plan["cells"]:
        c = dict(c, mitigations=[m for m in c["mitigations"] if m != "none"] or ["none"])
        if c.get("steps") in (None, 1):
            c["steps"] = None
        cells.append(c)
    return {"cells": cells}


def _documented_refusals() -> dict[str, str]:
    """docs/compat.md's table of recipes refused here: relative path -> reason."""
    rows = {}
    for line in COMPAT_DOC.read_text().splitlines():
        m = re.match(r"\|\s*`([^`]+\.ya?ml)`\s*\|\s*(refused[^|]*)\|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_every_upstream_recipe_plans_as_upstream(upstream, attack_tally, capsys) -> None:
    root, target = upstream
    recipes = _recipe_files(root)
    assert len(recipes) >= 50, f"only {len(recipes)} recipe files in the sdist"
    sidecars = _sidecars(root)
    items = [{"path": str(p), "sidecars": [str(s) for s in _needed(p, sidecars)]} for p in recipes]
    theirs = _upstream_plans(target, items)
    documented = _documented_refusals()
    accepted = identical = refused_as_upstream = gaps = sanitizer_identical = 0
    problems: list[str] = []
    for item in items:
        path = Path(item["path"])
        rel = str(path.relative_to(root))
        upstream_plan = theirs[item["path"]]
        if (upstream_plan.get("sanitizer") or {}).get("error") is None \
                and upstream_plan.get("sanitizer") is not None:
            # upstream's own `mode: sanitizer` loader accepts it: so must ours, with its fields
            theirs_san = upstream_plan["sanitizer"]
            try:
                mine = _our_sanitizer(path)
            except AortaError as exc:
                problems.append(f"{rel}: sanitizer recipe refused here: {exc.message[:200]}")
                continue
            if mine == theirs_san:
                sanitizer_identical += 1
            else:
                problems.append(f"{rel}: sanitizer recipe differs:\n  ours     {mine}\n"
                                f"  upstream {theirs_san}")
            continue
        try:
            ours = _our_plan(path, [Path(s) for s in item["sidecars"]])
        except AortaError as exc:
            if "error" not in upstream_plan and rel not in documented:
                problems.append(f"{rel}: refused here, accepted upstream: {exc.message[:200]}")
            elif rel not in documented:
                problems.append(f"{rel}: refused (also upstream) but not listed in docs/compat.md")
            elif "error" in upstream_plan:
                refused_as_upstream += 1
            elif documented[rel].startswith("refused (gap"):
                gaps += 1  # upstream accepts it: a known, documented gap (counted, printed)
            else:
                problems.append(f"{rel}: refused here, accepted upstream, and docs/compat.md "
                                "does not call it a gap")
            continue
        accepted += 1
        if "error" in upstream_plan:
            continue  # we accept what upstream refuses: an extension (listed in the doc)
        if _comparable(ours) == _comparable(upstream_plan):
            identical += 1
        else:
            problems.append(f"{rel}: plan differs:\n  ours     {ours}\n  upstream {upstream_plan}")
    refused = len(items) - accepted - sanitizer_identical
    line = (f"{accepted} accepted, {identical} identical plans, {sanitizer_identical} "
            f"mode: sanitizer recipes loaded as upstream's sanitizer loader does, {refused} "
            f"refused ({refused_as_upstream} refused upstream too, {gaps} documented gaps)")
    attack_tally.record("upstream recipes", cases=len(items), failures=len(problems),
                        promise=line)
    with capsys.disabled():
        print(f"\nupstream corpus: {len(items)} recipes: {line}")
    assert problems == [], "\n".join(problems)
    # issue 14: every race recipe plans as upstream's; every mode: sanitizer one loads
    assert (len(items), accepted, identical, sanitizer_identical, refused, gaps) == (
        58, 43, 43, 14, 1, 0), line


def _our_sanitizer(path: Path) -> dict:
    from aorta_tui.collect.sanitizer import load_sanitizer_recipe

    r = load_sanitizer_recipe(path)
    from aorta_tui.collect.sanitizer import plan_summary  # what `recipe validate` prints

    assert [c["sanitizer"] for c in plan_summary(r)["checks"]] == list(r.sanitizers)
    return {"ticket": r.ticket, "target": r.target, "source_kind": r.source_kind,
            "sanitizers": list(r.sanitizers), "report": r.report_name,
            "timeout_s": None if r.timeout_s == 900.0 else r.timeout_s}


# -- classifier -------------------------------------------------------------------------------

_UPSTREAM_CLASSIFY = """
import json, sys
from aorta.probe.classifier import tier3_kernel, tier4_patterns
out = []
for kind, text in json.load(sys.stdin):
    fired = tier3_kernel.scan_dmesg_text(text) if kind == "dmesg" else tier4_patterns.scan(text)
    out.append(fired)
json.dump(out, sys.stdout)
"""


def _classifier_samples(root: Path) -> list[tuple[str, str]]:
    """(kind, text): the tier-4 fixture logs, and every string of the tier-3/4 tests'
    parametrize lists (dmesg lines for tier 3, log text for tier 4)."""
    samples = [("log", p.read_text()) for p in sorted((root / "tests/probe/fixtures/tier4_logs").glob("*.txt"))]
    for name, kind in (("test_tier3.py", "dmesg"), ("test_tier4.py", "log")):
        tree = ast.parse((root / "tests/probe/classifier" / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "parametrize":
                for el in getattr(node.args[1], "elts", []) if len(node.args) > 1 else []:
                    first = el.elts[0] if isinstance(el, ast.Tuple) else el
                    if isinstance(first, ast.Constant) and isinstance(first.value, str) \
                            and not first.value.endswith(".txt"):
                        samples.append((kind, first.value))
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("scan", "scan_dmesg_text"):
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value:
                    samples.append(("dmesg" if node.func.id == "scan_dmesg_text" else "log", arg.value))
    return samples


def _ours(kind: str, text: str, tmp: Path) -> list[str]:
    from aorta_tui.classify import classify
    from aorta_tui.classify.dmesg import _event

    if kind == "dmesg":
        events = [e for e in (_event(line, None, None) for line in text.splitlines()) if e]
        return sorted({e.tier3_id for e in events})
    log = tmp / "stdout.log"
    log.write_text(text)
    return sorted(set(classify(None, stdout_path=log, stderr_path=log).fired))


def test_upstream_classifier_samples_agree(upstream, tmp_path: Path, attack_tally, capsys) -> None:
    from aorta_tui.classify.upstream_ids import UPSTREAM_ALIASES

    root, target = upstream
    samples = _classifier_samples(root)
    assert len(samples) >= 15, samples
    got = subprocess.run([sys.executable, "-c", _UPSTREAM_CLASSIFY], input=json.dumps(samples),
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(target)})
    assert got.returncode == 0, got.stderr[-2000:]
    theirs = json.loads(got.stdout)
    agree, problems = 0, []
    for (kind, text), fired in zip(samples, theirs, strict=True):
        ours = _ours(kind, text, tmp_path)
        want = {o for d in fired for o in UPSTREAM_ALIASES[d].ours}
        same_verdict = bool(ours) == bool(fired)
        if same_verdict and want <= set(ours):
            agree += 1
        else:
            problems.append(f"{kind} {text[:80]!r}: upstream {fired}, ours {ours}")
    attack_tally.record("upstream classifier samples (agree)", cases=len(samples),
                        failures=len(problems),
                        promise=f"{agree} agree on verdict and detector, 0 documented differences")
    with capsys.disabled():
        print(f"\nupstream classifier samples: {len(samples)}, {agree} agree, "
              f"{len(problems)} differ")
    assert problems == [], "\n".join(problems)


# -- collectors -------------------------------------------------------------------------------

_UPSTREAM_WRAP = """
import json, sys
from aorta.run.collectors import wrap_argv_for_collectors
out = []
for item in json.load(sys.stdin):
    config = {"_aorta_collect": item["names"], "_aorta_collect_options": item["options"],
              "_aorta_collect_dir": item["root"], "_aorta_results_root": item["anchor"]}
    out.append(wrap_argv_for_collectors(config, item["argv"], env={}))
json.dump(out, sys.stdout)
"""


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_upstream_collect_recipes_wrap_their_commands_as_upstream(upstream, tmp_path: Path,
                                                                   attack_tally, capsys) -> None:
    """Every recipe of the sdist with `collect:` (its rocprof and proton examples): the argv a
    trial runs here is the argv upstream's `wrap_argv_for_collectors` builds for the command
    its README gives (a fake rocprofv3 on PATH for both, no device variables)."""
    from aorta_tui.collect.collectors import PROTON_DIR, _proton_argv, cell_collect, rocprof_prefix
    from aorta_tui.recipe import load_recipe
    from aorta_tui.registry.registry import Registry

    root, target = upstream
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "rocprofv3"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    items, ours = [], []
    for path in _recipe_files(root):
        try:
            recipe = load_recipe(path, registry=Registry())
        except AortaError:
            continue  # refused (listed above) or a mode: sanitizer recipe
        if not recipe.all_collectors():
            continue
        script = next(path.parent.glob("*.py"), None)  # hip-gemm's command is a HIP binary
        argv = ["python", str(script), "--iters", "2"] if script else [str(path.parent / "gemm")]
        trial = tmp_path / path.parent.name / "trial"
        trial.mkdir(parents=True)
        collect = cell_collect(recipe, recipe.cells[0].name if recipe.cells else "")
        wrapped = list(argv)
        if "proton" in collect:
            wrapped = _proton_argv(wrapped, trial, collect["proton"]) or wrapped
            # upstream names the profile <collect_dir>/proton/proton, as here
            assert str(trial / PROTON_DIR / "proton") in wrapped
        if "rocprof" in collect:
            wrapped = [*rocprof_prefix(str(fake), trial / "rocprof", collect["rocprof"]), *wrapped]
        ours.append((str(path.relative_to(root)), wrapped))
        items.append({"names": list(collect), "options": recipe.collect_options, "argv": argv,
                      "root": str(trial), "anchor": str(tmp_path)})
    got = subprocess.run([sys.executable, "-c", _UPSTREAM_WRAP], input=json.dumps(items),
                         capture_output=True, text=True, timeout=120,
                         env={**_no_device_env(), "PYTHONPATH": str(target),
                              "PATH": f"{bindir}:{os.environ['PATH']}", "ROCPROF_BIN": ""})
    assert got.returncode == 0, got.stderr[-2000:]
    theirs = json.loads(got.stdout)
    problems = [f"{rel}:\n  ours     {mine}\n  upstream {up}"
                for (rel, mine), up in zip(ours, theirs, strict=True) if mine != up]
    attack_tally.record("upstream collect: recipes (same argv)", cases=len(ours),
                        failures=len(problems), promise="each trial's argv is upstream's")
    with capsys.disabled():
        print(f"\nupstream collect: recipes: {len(ours)}, {len(ours) - len(problems)} wrap "
              "their command exactly as upstream")
    assert problems == [], "\n".join(problems)
    assert (len(ours), len(problems)) == (4, 0)


def _no_device_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}
