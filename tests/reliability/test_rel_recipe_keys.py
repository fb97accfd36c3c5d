"""Issue 12, item 12 (recipe keys that did nothing) and item 13 (trace probe names).

``retain`` and ``collect_paths`` now act, as upstream AORTA defines them; ``tier3_vram_growth:
true`` and ``save_logs: false`` (which aorta-tui cannot honour) are refused with the reason;
``redaction`` is recorded and ``recipe validate`` says it is not applied yet; ``trace.probes``
names must be probe sets of the catalogue.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aorta_tui.collect.retention import apply_retention, classify_file
from aorta_tui.recipe import check_recipe_text
from tests.engine_support import aorta, only_run_dir

PROBE = ("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n"
         "diagnostic_axis: [none]\nenv_passthrough_mode: file\n")
TRIAGE = ("schema_version: 1\nworkload: gpu_smoke\ntrials: 1\nsteps: 1\n"
          "cells: [{name: a, mitigations: [none]}]\n")
# pass when the first argument is 0; writes a heavy dump, a summary and a nested file
SCRIPT = ('mkdir -p "$AORTA_ARTIFACT_DIR/dumps"; echo big > "$AORTA_ARTIFACT_DIR/dumps/layer.bin"; '
          'echo s > "$AORTA_ARTIFACT_DIR/run.summary.json"; echo to-stdout; exit "$0"')


def _run(tmp_path: Path, recipe_extra: str, code: int) -> tuple[Path, dict]:
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(PROBE + recipe_extra)
    out = tmp_path / f"out{code}"
    proc = aorta("--batch", str(recipe), "--output", str(out), "--no-snapshot", "--", "bash",
                 "-c", SCRIPT, str(code))
    assert proc.returncode == 0, proc.stderr[-2000:]
    trial = only_run_dir(out) / "trials" / "none-none" / "trial-000"
    return trial, json.loads((trial / "result.json").read_text())


def _files(trial: Path) -> set[str]:
    return {p.relative_to(trial).as_posix() for p in trial.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("level", "kept"), [
    ("none", {"result.json"}),
    ("log", {"result.json", "stdout.log", "stderr.log", "probe.env"}),
    ("summary", {"result.json", "stdout.log", "stderr.log", "probe.env", "run.summary.json"}),
    ("full", {"result.json", "stdout.log", "stderr.log", "probe.env", "run.summary.json",
              "dumps/layer.bin"}),
])
def test_retain_on_pass_keeps_its_level(tmp_path, level, kept):
    trial, result = _run(tmp_path, f"retain: {{on_pass: {level}}}\n", 0)
    assert result["verdict"] == "pass"
    assert _files(trial) == kept
    assert result["retention"]["level"] == level
    assert set(result["retention"]["deleted"]) == {
        "result.json", "stdout.log", "stderr.log", "probe.env", "run.summary.json",
        "dumps/layer.bin"} - kept
    if level != "full":
        assert not (trial / "dumps").exists()  # a directory emptied by pruning goes too


def test_retain_is_chosen_by_verdict(tmp_path):
    trial, result = _run(tmp_path, "retain: {on_pass: none, on_fail: full}\n", 3)
    assert result["verdict"] == "fail" and result["retention"]["deleted"] == []
    assert "dumps/layer.bin" in _files(trial)


def test_without_retain_everything_stays_and_nothing_is_recorded(tmp_path):
    trial, result = _run(tmp_path, "", 0)
    assert "retention" not in result and "dumps/layer.bin" in _files(trial)


def test_retention_never_follows_a_symlink_and_honours_a_manifest(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "link").symlink_to(outside)
    (trial / "file-link").symlink_to(outside / "precious.txt")
    (trial / "result.json").write_text("{}")
    (trial / "stdout.log").write_text("x")
    (trial / "notes.txt").write_text("n")
    (trial / "artifacts.json").write_text(json.dumps({"artifacts": [
        {"path": "notes.txt", "class": "log"}, {"path": "result.json", "class": "heavy"}]}))
    outcome = apply_retention(trial, "log")
    assert (outside / "precious.txt").read_text() == "keep me"
    assert (trial / "link").is_symlink() and (trial / "file-link").is_symlink()
    assert {"result.json", "stdout.log", "notes.txt"} <= {p.name for p in trial.iterdir()}
    assert outcome["deleted"] == ["artifacts.json"]
    assert any("symlink" in n for n in outcome["notes"])


def test_a_bad_manifest_is_a_note_not_a_crash(tmp_path):
    trial = tmp_path / "t"
    trial.mkdir()
    (trial / "artifacts.json").write_text("[" * 100_000)
    (trial / "dump.bin").write_text("d")
    outcome = apply_retention(trial, "summary")
    assert outcome["deleted"] == ["dump.bin"] and outcome["notes"]
    os.mkfifo(trial / "x.fifo")
    (trial / "artifacts.json").unlink()
    os.mkfifo(trial / "artifacts.json")
    assert "artifacts.json" in apply_retention(trial, "none")["notes"][0]  # never blocks


def test_the_record_cannot_be_declared_deletable():
    assert classify_file("result.json", {"result.json": "heavy"}) == "record"
    assert classify_file("workload_result.rank1.json", {}) == "record"
    assert classify_file("sub/result.json", {}) == "heavy"


# -- collect_paths ------------------------------------------------------------------------
def test_collect_paths_copies_outside_files_and_records_them(tmp_path):
    src = tmp_path / "logs"
    src.mkdir()
    (src / "rccl-1.log").write_text("rank 1")
    (src / "rccl-2.log").write_text("rank 2")
    os.mkfifo(src / "rccl-3.log")  # matched, never read (it would block)
    extra = (f'collect_paths: ["${{AORTA_ARTIFACT_DIR}}/stdout.log", "{src}/rccl-*.log", '
             f'"{src}/none-*", "$NOT_SET_ANYWHERE/x"]\n')
    trial, result = _run(tmp_path, extra, 0)
    collected = result["collected"]
    by_source = {f["source"]: f for f in collected["files"]}
    assert by_source[str(trial / "stdout.log")]["copied"] is False
    for n in (1, 2):
        entry = by_source[str(src / f"rccl-{n}.log")]
        assert entry["copied"] and (trial / entry["path"]).read_text() == f"rank {n}"
    notes = " | ".join(collected["notes"])
    assert "rccl-3.log is not a regular file" in notes
    assert "nothing matched" in notes and "NOT_SET_ANYWHERE is not set" in notes


def test_collected_files_then_follow_retain(tmp_path):
    (tmp_path / "a.log").write_text("a")
    trial, result = _run(tmp_path, f'collect_paths: ["{tmp_path}/a.log"]\n'
                         "retain: {on_pass: log}\n", 0)
    assert result["collected"]["files"][0]["copied"]
    assert any(d.startswith("collected/") for d in result["retention"]["deleted"])
    assert not (trial / "collected").exists()


def test_a_planted_symlink_does_not_redirect_a_copy(tmp_path):
    from aorta_tui.collect.probe_paths import collect_trial_paths

    victim = tmp_path / "victim"
    victim.mkdir()
    trial = tmp_path / "trial"
    (trial / "collected").mkdir(parents=True)
    (trial / "collected" / "tmp").symlink_to(victim)  # what a hostile trial could leave
    src = Path("/tmp") / f"aorta-collect-{os.getpid()}.txt"
    src.write_text("data")
    try:
        record = collect_trial_paths([str(src)], trial, {})
    finally:
        src.unlink()
    assert not any(victim.iterdir())
    assert record["files"] == [] and "not collected" in record["notes"][0]


# -- keys aorta-tui cannot honour: refused, not ignored --------------------------------------
@pytest.mark.parametrize(("text", "path", "words"), [
    (TRIAGE + "tier3_vram_growth: true\n", "tier3_vram_growth", "does not have"),
    (TRIAGE + "save_logs: false\n", "save_logs", "always saves"),
    (PROBE + "tier3_vram_growth: true\n", "tier3_vram_growth", "VRAM-growth"),
])
def test_keys_that_cannot_be_honoured_are_refused(text, path, words):
    issues = check_recipe_text(text)
    assert [i.path for i in issues] == [path]
    assert words in issues[0].message and issues[0].hint and issues[0].line >= 1


@pytest.mark.parametrize("text", [TRIAGE + "tier3_vram_growth: false\n",
                                  TRIAGE + "save_logs: true\n", PROBE + "tier3_vram_growth: false\n"])
def test_the_honoured_values_are_accepted(text):
    assert check_recipe_text(text) == []


def test_validate_says_redaction_is_not_applied_yet(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text(PROBE + "redaction: {scrub_env_keys: ['*_TOKEN']}\n")
    proc = aorta("recipe", "validate", str(f))
    assert proc.returncode == 0 and "redaction is recorded" in proc.stdout, proc.stdout


# -- item 13: trace probe names ----------------------------------------------------------------
def test_unknown_trace_probes_are_refused_like_the_cli_refuses_them(tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text(PROBE + "trace: {probes: [nope]}\n")
    proc = aorta("recipe", "validate", str(f))
    assert proc.returncode == 2 and f"{f}:7:" in proc.stderr and "nope" in proc.stderr
    assert check_recipe_text(PROBE + "trace: {probes: [hipp]}\n")[0].hint.startswith(
        "did you mean 'hip'?")
    assert check_recipe_text(PROBE + "trace: {probes: [cuda, memory]}\n") == []
