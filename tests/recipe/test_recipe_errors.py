"""Bad recipes: every problem is a RecipeError naming file:line:col, the key path and a fix."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from aorta_tui.core.errors import ExitCode, RecipeError
from aorta_tui.recipe import (
    RecipeValidationError,
    check_recipe_text,
    load_recipe,
    load_recipe_text,
    require_command,
    with_command,
)

TRIAGE = """\
schema_version: 1
workload: gpu_smoke
trials: 2
steps: 5
cells:
  - name: baseline-local
    mitigations: [none]
"""
PROBE = """\
schema_version: 1
mode: probe
trials: 2
mitigation_axis: [none, tf32_off]
diagnostic_axis: [none, xnack]
"""


def problems(text: str, registry=None, source: str = "r.yaml") -> RecipeValidationError:
    with pytest.raises(RecipeValidationError) as info:
        load_recipe_text(textwrap.dedent(text), source=source, registry=registry)
    err = info.value
    assert isinstance(err, RecipeError) and err.exit_code == ExitCode.USAGE == 2
    return err


def one(text: str, registry=None):
    err = problems(text, registry)
    assert len(err.issues) == 1, err.render()
    return err.issues[0], err.render()


def test_valid_minimal_recipes_load(registry):
    t = load_recipe_text(TRIAGE, registry=registry)
    assert [c.name for c in t.cells] == ["baseline-local"] and t.cells[0].environment == "local"
    p = load_recipe_text(PROBE, registry=registry)
    assert [c.name for c in p.cells] == ["none-none", "none-xnack", "tf32_off-none",
                                         "tf32_off-xnack"]
    assert check_recipe_text(TRIAGE, registry=registry) == []


def test_unknown_top_level_key_with_did_you_mean():
    issue, text = one(TRIAGE + "trails: 3\n")
    assert (issue.line, issue.column, issue.path) == (8, 1, "trails")
    assert "unknown key 'trails'" in issue.message and "did you mean 'trials'" in issue.hint
    assert text.startswith("r.yaml:8:1: trails: unknown key 'trails'")
    assert "fix: did you mean 'trials'?" in text


def test_unknown_key_in_a_cell_points_at_the_key():
    issue, _ = one(TRIAGE + "    mitigation: [xnack]\n")
    assert (issue.line, issue.column, issue.path) == (8, 5, "cells[0].mitigation")
    assert "did you mean 'mitigations'" in issue.hint


@pytest.mark.parametrize("value, expect", [
    ("true", "expected an integer, got a boolean"),
    ("2.0", "expected an integer, got a number"),
    ("'2'", "expected an integer, got a string"),
    ("0", "must be at least 1"),
    ("null", "required key 'trials' is null"),
])
def test_trials_types(value, expect):
    issue, text = one(TRIAGE.replace("trials: 2", f"trials: {value}"))
    assert expect in issue.message
    assert issue.line == 3 and "r.yaml:3:" in text
    assert issue.hint


def test_schema_version_other_than_1_names_the_supported_version():
    issue, text = one(TRIAGE.replace("schema_version: 1", "schema_version: 2"))
    assert (issue.line, issue.column, issue.path) == (1, 17, "schema_version")
    assert "unsupported schema_version 2" in issue.message
    assert "reads schema_version 1" in issue.message
    assert "schema_version: 1" in issue.hint


def test_missing_schema_version():
    issue, _ = one(TRIAGE.replace("schema_version: 1\n", ""))
    assert "'schema_version' is missing" in issue.message and issue.line == 1


@pytest.mark.parametrize("text, expect", [
    ("", "the recipe is empty"),
    ("# only a comment\n\n", "the recipe is empty"),
    ("- a\n- b\n", "must be a mapping of keys, got a list"),
    ("42\n", "must be a mapping of keys, got an integer"),
    ("just words\n", "must be a mapping of keys, got a string"),
])
def test_empty_and_non_mapping_documents(text, expect):
    err = problems(text)
    assert expect in err.render()
    assert "r.yaml:1:1" in err.render()


@pytest.mark.parametrize("text, line, col, expect", [
    ("schema_version: 1\ncells: [a, b\n", 3, 1, "invalid YAML"),
    ("schema_version: 1\n\tworkload: x\n", 2, 1, "invalid YAML"),
    ("a: b: c\n", 1, 5, "mapping values are not allowed"),
    ("a: 1\n---\nb: 2\n", 2, 1, "expected a single document"),
    ("a: 'unclosed\n", 2, 1, "invalid YAML"),
])
def test_malformed_yaml_gives_the_yaml_position(text, line, col, expect):
    err = problems(text)
    assert len(err.issues) == 1
    issue = err.issues[0]
    assert (issue.line, issue.column) == (line, col), err.render()
    assert expect in issue.message
    assert f"r.yaml:{line}:{col}" in err.render()
    assert issue.hint


def test_duplicate_keys_are_errors_not_silently_merged():
    issue, _ = one(TRIAGE + "trials: 3\n")
    assert issue.line == 8 and "duplicate key 'trials'" in issue.message


def test_yaml_merge_keys_still_work():
    text = TRIAGE + ("  - <<: {mitigations: [xnack], environment: default}\n"
                     "    name: other\n    environment: local\n")
    r = load_recipe_text(text)
    assert r.cells[1].mitigations == ("xnack",) and r.cells[1].name == "other"
    assert r.cells[1].environment == "local"  # the mapping's own key wins over the merge


@pytest.mark.parametrize("text, expect", [
    ("a: &x [*x]\n", "refers to itself"),
    ("a: !!python/object:os.system {}\n", "unsupported YAML tag"),
    ("a: !!python/name:os.system ''\n", "unsupported YAML tag"),
    ("a: !!binary aGVsbG8=\n", "unsupported YAML tag"),
    ("a: !custom 1\n", "unsupported YAML tag"),
    ("? [a, b]\n: c\n", "mapping key must be a plain word"),
])
def test_unsafe_or_odd_yaml_is_refused(text, expect):
    err = problems(text)
    assert expect in err.render()


def test_alias_bomb_is_bounded():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev = f"*a{i-1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    err = problems("\n".join(lines) + "\n")
    assert "more than" in err.render() and "alias" in err.render()


def test_unknown_mitigation_and_environment_with_did_you_mean(registry):
    err = problems(TRIAGE.replace("[none]", "[tf32of]") + "    environment: locl\n", registry)
    rendered = err.render()
    by_path = {i.path: i for i in err.issues}
    m = by_path["cells[0].mitigations[0]"]
    assert (m.line, m.column) == (7, 19)
    assert "unknown mitigation 'tf32of'" in m.message and "did you mean 'tf32_off'" in m.hint
    e = by_path["cells[0].environment"]
    assert e.line == 8 and "did you mean 'local'" in e.hint
    assert "r.yaml:7:19" in rendered and "r.yaml:8:18" in rendered


def test_names_are_not_checked_without_a_registry():
    r = load_recipe_text(TRIAGE.replace("[none]", "[my_own_mitigation]"))
    assert r.cells[0].mitigations == ("my_own_mitigation",)


def test_conflicting_mitigations_in_a_cell(registry):
    issue, text = one(TRIAGE.replace("[none]", "[hsa_disable_cache, hsa_enable_cache]"),
                      registry)
    assert issue.path == "cells[0].mitigations" and issue.line == 7
    assert "HSA_DISABLE_CACHE" in issue.message and "hsa_enable_cache" in issue.message
    assert "extra_env" in issue.hint


def test_probe_axes_are_checked_against_the_registry(registry):
    err = problems(PROBE.replace("[none, xnack]", "[none, xnak]"), registry)
    (issue,) = err.issues
    assert issue.path == "diagnostic_axis[1]" and (issue.line, issue.column) == (5, 25)
    assert "did you mean 'xnack'" in issue.hint


def test_probe_pair_that_conflicts(registry):
    text = PROBE.replace("[none, tf32_off]", "[hsa_disable_cache]").replace(
        "[none, xnack]", "[none, hsa_enable_cache]")
    issue, _ = one(text, registry)
    assert issue.path == "diagnostic_axis[1]"
    assert "hsa_disable_cache-hsa_enable_cache" in issue.message


@pytest.mark.parametrize("name", ["..", ".", "a/b", ".hidden", "-x", "with space",
                                  "x" * 101, "matrix.md", "", "ä"])
def test_unsafe_cell_names(name):
    issue, _ = one(TRIAGE.replace("name: baseline-local", f"name: {name!r}"))
    assert issue.path == "cells[0].name" and issue.line == 6
    assert "directory name" in issue.message or "must not be empty" in issue.message


def test_longest_allowed_cell_name_and_safe_characters():
    r = load_recipe_text(TRIAGE.replace("baseline-local", "A" * 100))
    assert r.cells[0].name == "A" * 100
    r = load_recipe_text(TRIAGE.replace("baseline-local", "_a.b-c_9"))
    assert r.cells[0].name == "_a.b-c_9"


def test_duplicate_cell_names_point_at_the_second():
    issue, _ = one(TRIAGE + "  - name: baseline-local\n    mitigations: [xnack]\n")
    assert issue.path == "cells[1].name" and issue.line == 8
    assert "already used by cells[0]" in issue.message


def test_probe_keys_in_a_triage_recipe_and_the_reverse():
    issue, _ = one(TRIAGE + "mitigation_axis: [none]\n")
    assert "probe-mode key" in issue.hint and "mode: probe" in issue.hint
    issue, _ = one(PROBE + "cells: []\n")
    assert "triage-mode key" in issue.hint
    # upstream's collect: loads and plans (issue 14); a run refuses it with exit 3
    assert load_recipe_text(TRIAGE + "collect: [layer_numerics]\n").collect == ("layer_numerics",)


def test_every_problem_is_reported_at_once(registry):
    text = """\
    schema_version: 1
    workload: gpu_smoke
    trials: 0
    steps: 2.5
    colour: blue
    cells:
      - name: ../escape
        mitigations: [tf32of]
      - name: ok
        mitigations: []
        extra_env: {GOOD: "1", 9BAD: x, ALSO: 3}
    """
    err = problems(text, registry)
    paths = [i.path for i in err.issues]
    assert paths == ["trials", "steps", "colour", "cells[0].name", "cells[0].mitigations[0]",
                     "cells[1].mitigations", "cells[1].extra_env.9BAD", "cells[1].extra_env.ALSO"]
    lines = [i.line for i in err.issues]
    assert lines == sorted(lines)
    rendered = err.render()
    assert rendered.startswith("8 problems in the recipe:")
    assert rendered.count("\n  - r.yaml:") == 8
    assert 'YAML reads 3 as an integer; quote it: "3"' in rendered


def test_bad_regex_and_condition_are_located():
    text = PROBE + textwrap.dedent("""\
    custom_patterns:
      - id: a
        match: {regex: '(unclosed'}
      - id: b
        match:
          regex: 'loss=(?P<loss>\\S+)'
          condition: "__import__('os').system('true')"
      - id: c
        match:
          regex: 'x'
          condition: "los > 1"
    """)
    err = problems(text)
    by_path = {i.path: i for i in err.issues}
    assert "not a valid regular expression" in by_path["custom_patterns[0].match.regex"].message
    cond = by_path["custom_patterns[1].match.condition"]
    assert cond.line == 12 and "a call of __import__" in cond.message
    typo = by_path["custom_patterns[2].match.condition"]
    assert "'los'" in typo.message and "did you mean 'loss'" not in (typo.hint or "")
    assert "exit_code" in typo.hint


def test_condition_may_read_named_groups_and_upstream_spellings():
    text = PROBE + textwrap.dedent("""\
    custom_patterns:
      - id: spike
        match:
          regex: 'loss=(?P<loss>\\S+)'
          condition: "float(loss) > 10 or math.isnan(float(capture['loss']))"
        required_for_pass: false
    """)
    r = load_recipe_text(text)
    (p,) = r.custom_patterns
    assert p.on_match == "fail" and p.detector_id == "custom:spike"
    cond = p.compiled_condition
    assert cond.evaluate({"loss": "11", "capture": {"loss": "11"}}) is True
    assert cond.evaluate({"loss": "1", "capture": {"loss": "1"}}) is False
    assert cond.evaluate({"loss": "nan", "capture": {"loss": "nan"}}) is True
    assert cond.evaluate({}) is False


def test_pattern_rules():
    base = PROBE + "custom_patterns:\n"
    issue, _ = one(base + "  - {id: a, match: {regex: x}, on_match: warn, required_for_pass: true}\n")
    assert "on_match: fail" in issue.message
    issue, _ = one(base + "  - {id: a, match: {regex: x}}\n  - {id: a, match: {regex: y}}\n")
    assert "used by another pattern" in issue.message and issue.line == 8
    issue, _ = one(base + "  - {id: a, match: {regex: x}, on_match: fial}\n")
    assert "did you mean 'fail'" in issue.hint


def test_stop_after_rules():
    issue, _ = one(TRIAGE + "stop_after: {events: 5, max_trials: 2}\n")
    assert issue.path == "stop_after.max_trials" and "below events" in issue.message
    issue, _ = one(TRIAGE + "stop_after: {events: 1}\n")
    assert "'max_trials' is missing" in issue.message
    # per-cell trials with stop_after: accepted, max_trials caps every cell (upstream's meaning)
    assert load_recipe_text(TRIAGE + "    trials: 3\nstop_after: {events: 1, max_trials: 5}\n")


def test_baseline_cell_must_exist():
    issue, _ = one(TRIAGE + "confound: {baseline_cell: baseline-locl}\n")
    assert issue.path == "confound.baseline_cell" and "did you mean 'baseline-local'" in issue.hint
    issue, _ = one(TRIAGE + "confound: {threshold: 0}\n")
    assert "greater than 0" in issue.message
    issue, _ = one(TRIAGE + "confound: {threshold: .inf}\n")
    assert "finite" in issue.message


def test_baseline_rules():
    two = TRIAGE + "  - name: fix\n    mitigations: [xnack]\n"
    assert load_recipe_text(two).confound.baseline_cell == "baseline-local"
    renamed = two.replace("baseline-local", "plain")
    r = load_recipe_text(renamed)
    assert (r.confound.baseline_cell, r.confound.baseline_rule) == ("plain", "none-mitigations")
    r = load_recipe_text(renamed.replace("[none]", "[tf32_off]"))
    assert (r.confound.baseline_cell, r.confound.baseline_rule) == ("plain", "first-cell")
    r = load_recipe_text(two + "confound: {baseline_cell: fix}\n")
    assert (r.confound.baseline_cell, r.confound.baseline_rule) == ("fix", "explicit")
    # probe: the cell that changes nothing
    r = load_recipe_text(PROBE.replace("[none, tf32_off]", "[tf32_off, none]"))
    assert r.confound.baseline_cell == "none-none"


def test_environment_forms(registry):
    r = load_recipe_text(TRIAGE + "    environment: {docker: 'img:1', env: {A: b}}\n",
                         registry=registry)
    assert r.cells[0].environment == {"docker": "img:1", "env": {"A": "b"}}
    issue, _ = one(TRIAGE + "    environment: {env: {A: b}}\n")
    assert "'docker' is missing" in issue.message and "extra_env" in issue.hint
    issue, _ = one(TRIAGE + "    environment: {docker: x, name: y}\n")
    assert "unknown key 'name'" in issue.message


def test_workload_config_rules():
    issue, _ = one(TRIAGE + "workload_config: {steps: 3}\n")
    assert "not a workload setting" in issue.message
    issue, _ = one(TRIAGE + "workload_config: {_aorta_env: 3}\n")
    assert "reserved" in issue.message
    issue, _ = one(TRIAGE + "workload_config: {x: .nan}\n")
    assert "finite" in issue.message
    issue, _ = one(TRIAGE + "workload_config: {x: 2024-01-01}\n")
    assert "unsupported YAML tag" in issue.message and "quote" in issue.hint


def test_yaml_words_that_are_not_strings_get_a_quoting_hint():
    err = problems(TRIAGE.replace("[none]", "[no]") + "extra_env: {A: yes, B: 0x10}\n")
    hints = {i.path: i.hint for i in err.issues}
    assert hints["cells[0].mitigations[0]"] == 'YAML reads no as a boolean; quote it: "no"'
    assert hints["extra_env.A"] == 'YAML reads yes as a boolean; quote it: "yes"'
    assert hints["extra_env.B"] == 'YAML reads 0x10 as an integer; quote it: "0x10"'


def test_misc_fields():
    r = load_recipe_text(TRIAGE + "trial_isolation: auto\n")
    assert r.trial_isolation == "process"  # upstream's `auto` runs a fresh process here
    issue, _ = one(TRIAGE + "trial_isolation: thread\n")
    assert "process, exec, in_process" in issue.message
    issue, _ = one(TRIAGE.replace("schema_version: 1\n", "schema_version: 1\nmode: probes\n"))
    assert "did you mean 'probe'" in issue.hint
    r = load_recipe_text(PROBE + "disable_detectors: ['tier2:hang', TIER3, 'custom:x', hang]\n"
                         "disable_detector_tiers: [tier4]\n"
                         "custom_patterns: [{id: x, match: {regex: y}}]\n")
    assert r.disable_detectors == ("tier2:hang", "tier3", "custom:x", "hang", "tier4")
    issue, _ = one(PROBE + "disable_detectors: ['tier9:x']\n")
    assert issue.path == "disable_detectors[0]"
    issue, _ = one(TRIAGE + "ticket: '../x'\n")
    assert issue.path == "ticket"
    issue, _ = one(TRIAGE + "order: shuffled\n")
    assert "interleaved, sequential, random" in issue.message
    issue, _ = one(TRIAGE + "seed: -1\n")
    assert issue.path == "seed"
    issue, _ = one(TRIAGE + "trace: {probes: [cuda], mode: live}\n")
    assert issue.path == "trace.mode"
    issue, _ = one(TRIAGE + "policy_axis: [a, a]\n")
    assert "listed twice" in issue.message
    issue, _ = one(PROBE + "command: 'bash run.sh'\n")
    assert "[bash run.sh]" in issue.hint
    issue, _ = one(PROBE + "redaction: null\n")
    assert issue.path == "redaction"


@pytest.mark.parametrize("token, message, hint", [
    ("tier4:cuda_eror", "unknown detector 'cuda_eror'", "did you mean 'cuda_error'"),
    ("cuda_eror", "unknown detector 'cuda_eror'", "did you mean 'cuda_error'"),
    ("tier2:cuda_error", "is a tier-4 detector", "tier4:cuda_error"),
    ("custom:nope", "no custom pattern of this recipe has the id 'nope'", "custom:<id>"),
])
def test_disabled_detectors_are_checked_against_the_classifier(token, message, hint):
    issue, text = one(PROBE + f"disable_detectors: ['{token}']\n")
    assert issue.path == "disable_detectors[0]" and (issue.line, issue.column) == (6, 21)
    assert message in issue.message and hint in issue.hint


def test_file_level_problems(tmp_path):
    with pytest.raises(RecipeError, match="no such recipe file"):
        load_recipe(tmp_path / "missing.yaml")
    with pytest.raises(RecipeError, match="directory"):
        load_recipe(tmp_path)
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\x7fELF\x00\x01\x02")
    with pytest.raises(RecipeError, match="binary"):
        load_recipe(binary)
    latin = tmp_path / "l.yaml"
    latin.write_bytes(b"schema_version: 1\nticket: caf\xe9\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(latin)
    assert f"{latin}:2:12" in info.value.render() and "UTF-8" in info.value.render()
    with pytest.raises(RecipeError, match="not a regular file"):
        load_recipe("/dev/zero")  # refused before any read: it would never end
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as fh:  # sparse: over the limit without writing it
        fh.truncate(5 * 1024 * 1024)
    with pytest.raises(RecipeError, match="larger than"):
        load_recipe(huge)
    empty = tmp_path / "e.yaml"
    empty.write_text("")
    with pytest.raises(RecipeError) as info:
        load_recipe(empty)
    assert f"{empty}:1:1: the recipe is empty" in info.value.render()


def test_where_gives_file_line_col(tmp_path, registry):
    f = tmp_path / "r.yaml"
    f.write_text(TRIAGE)
    r = load_recipe(f, registry=registry)
    assert r.where("cells[0].mitigations[0]") == f"{f}:7:19"
    assert r.where("cells[0].extra_env.NOPE") == f"{f}:6:5"  # nearest known ancestor
    assert r.source_path == f


def test_with_command_and_require_command():
    p = load_recipe_text(PROBE, source="p.yaml")
    with pytest.raises(RecipeError) as info:
        require_command(p)
    assert "p.yaml:2:7" in info.value.render() and "--" in info.value.hint
    q = with_command(p, ["bash", "-c", "exit 3"])
    assert q.command == ("bash", "-c", "exit 3") and require_command(q) == q.command
    assert p.command is None  # recipes are values
    with pytest.raises(RecipeError, match="empty"):
        with_command(p, [])
    t = load_recipe_text(TRIAGE)
    with pytest.raises(RecipeError, match="mode: triage"):
        with_command(t, ["true"])
    assert require_command(t) == ()


def test_check_recipe_text_never_raises():
    assert check_recipe_text("a: [") and check_recipe_text("") and check_recipe_text("- 1")
    issues = check_recipe_text(TRIAGE + "x: 1\ny: 2\n")
    assert [(i.line, i.path) for i in issues] == [(8, "x"), (9, "y")]
    assert check_recipe_text(None) != []  # type: ignore[arg-type]


def test_json_recipes_load_even_with_tab_indentation(tmp_path, upstream_dir):
    import json

    data = yaml.safe_load((upstream_dir / "probe-template-bash.yaml").read_text())
    f = tmp_path / "r.json"
    f.write_text(json.dumps(data, indent="\t"))
    r = load_recipe(f)
    assert [c.name for c in r.cells][-1] == "tf32_off-xnack"
    f.write_text(json.dumps({**data, "trials": "3"}, indent="\t"))
    with pytest.raises(RecipeError) as info:
        load_recipe(f)
    assert f"{f}:5:12: trials" in info.value.render()


def test_generated_probe_cells_point_at_their_axis_entries():
    r = load_recipe_text(PROBE, source="p.yaml")
    assert r.cells[3].name == "tf32_off-xnack"
    assert r.where("cells[3]") == "p.yaml:4:25"  # mitigation_axis[1]
    assert r.where("cells[3].mitigations") == "p.yaml:5:25"  # diagnostic_axis[1]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("text, line, col", [
    ("schema_version: 1\ncells: [a, b\n", 3, 1),
    ("a: b\nc: \x07d\n", 2, 4),
    ("a: b\nc: \ud800\n", 2, 4),
    ("a: b\n\tc: d\n", 2, 1),
    ("a: " + "[" * 3000 + "]" * 3000, 1, 0),
])
def test_both_yaml_parsers_locate_problems(monkeypatch, text, line, col):
    """libyaml is used when present; the pure-Python parser is the fallback."""
    from aorta_tui.recipe import loader

    for parser in {yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)}:
        monkeypatch.setattr(loader, "_Loader", parser)
        issues = check_recipe_text(text, source="t.yaml")
        assert len(issues) == 1, (parser, issues)
        assert issues[0].line == line and (col == 0 or issues[0].column == col), (parser, issues)
        assert "internal error" not in issues[0].message


def test_pure_python_parser_loads_the_upstream_recipes(monkeypatch, upstream_dir):
    from aorta_tui.recipe import loader

    monkeypatch.setattr(loader, "_Loader", yaml.SafeLoader)
    for f in sorted(upstream_dir.glob("*.yaml")):
        slow = load_recipe(f)
        monkeypatch.setattr(loader, "_Loader", getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        fast = load_recipe(f)
        monkeypatch.setattr(loader, "_Loader", yaml.SafeLoader)
        assert slow == fast and slow.locations == fast.locations


def test_too_many_problems_are_counted_not_listed():
    err = problems("\n".join(f"k{i}: {i}" for i in range(300)) + "\n")
    assert len(err.issues) == 50 and err.more > 250
    assert "... and" in err.render() and "more" in err.render()


def test_where_key_points_at_the_key(tmp_path):
    r = load_recipe_text(TRIAGE, source="k.yaml")
    assert r.where("cells[0].mitigations", key=True) == "k.yaml:7:5"
    assert r.where("cells[0].mitigations") == "k.yaml:7:18"
    assert r.where("nope", key=True) == r.where("nope")
