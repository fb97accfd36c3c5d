"""SIGKILL of the orchestrator mid-sweep, then --resume: nothing lost, nothing repeated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.engine_support import aorta, journal

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

RECIPE = """\
schema_version: 1
mode: probe
ticket: KILL
trials: 3
mitigation_axis: [none, xnack, tf32_off]
diagnostic_axis: [none]
"""


def start(recipe: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aorta_tui", "--batch", str(recipe), "--output", str(out), "--json",
         "--no-snapshot", *extra, "--", "bash", "-c", "sleep 0.2; echo done"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def read_until(proc: subprocess.Popen[str], kind: str, count: int) -> list[dict]:
    seen: list[dict] = []
    for line in proc.stdout:  # type: ignore[union-attr]
        ev = json.loads(line)
        seen.append(ev)
        if sum(e["event"] == kind for e in seen) >= count:
            return seen
    raise AssertionError(f"stream ended before {count} {kind}: {seen}")


def test_sigkill_then_resume_loses_and_repeats_nothing(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "out"
    proc = start(recipe, out)
    events = read_until(proc, "trial_started", 4)  # 3 finished, the 4th running
    run_dir = Path(events[0]["run_dir"])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = Counter(e["event"] for e in journal(run_dir))
    assert before["trial_finished"] == 3 and before["run_finished"] == 0

    # A second orchestrator can take the run over at once: the kernel dropped the dead one's lock.
    res = aorta("sweep", "run", "--resume", str(run_dir), "--json", "--no-snapshot")
    assert res.returncode == 0, res.stderr
    events = journal(run_dir)
    finished = Counter(e["trial_id"] for e in events if e["event"] == "trial_finished")
    assert len(finished) == 9 and set(finished.values()) == {1}  # every trial exactly once
    starts = [e for e in events if e["event"] == "run_started"]
    assert [s["resumed"] for s in starts] == [False, True]
    assert starts[1]["already_done"] == 3
    results = list(run_dir.glob("trials/*/trial-*/result.json"))
    assert len(results) == 9
    matrix = json.loads((run_dir / "matrix.json").read_text())
    assert matrix["status"] == "completed" and matrix["trials_finished"] == 9
    # the probe run remembered its command
    assert all(json.loads(p.read_text())["argv"][:2] == ["bash", "-c"] for p in results)


def test_sigint_exits_130_and_resumes(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    proc = start(recipe, tmp_path / "out")
    events = read_until(proc, "trial_started", 2)
    run_dir = Path(events[0]["run_dir"])
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert f"--resume {run_dir}" in err
    last = journal(run_dir)[-1]
    assert last["event"] == "run_finished" and last["status"] == "interrupted"
    res = aorta("sweep", "run", "--resume", str(run_dir), "--no-snapshot")
    assert res.returncode == 0, res.stderr
    finished = Counter(e["trial_id"] for e in journal(run_dir) if e["event"] == "trial_finished")
    assert len(finished) == 9 and set(finished.values()) == {1}


def test_changed_recipe_on_resume_is_refused(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.replace("trials: 3", "trials: 1"))
    out = tmp_path / "out"
    first = aorta("--batch", str(recipe), "--output", str(out), "--no-snapshot", "--", "true")
    assert first.returncode == 0, first.stderr
    run_dir = next(out.glob("*/*"))
    recipe.write_text(RECIPE.replace("trials: 3", "trials: 2"))
    res = aorta("--batch", str(recipe), "--resume", str(run_dir), "--no-snapshot", "--", "true")
    assert res.returncode == 2
    assert "recipe changed" in res.stderr and "Traceback" not in res.stderr
    # comments and key order do not count as a change
    recipe.write_text("# a comment\n" + RECIPE.replace("trials: 3", "trials: 1"))
    res = aorta("--batch", str(recipe), "--resume", str(run_dir), "--no-snapshot", "--", "true")
    assert res.returncode == 0, res.stderr


def test_second_orchestrator_on_a_running_dir_is_refused(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    proc = start(recipe, tmp_path / "out")
    try:
        events = read_until(proc, "trial_started", 1)
        run_dir = events[0]["run_dir"]
        res = aorta("sweep", "run", "--resume", run_dir, "--no-snapshot")
        assert res.returncode == 2
        assert f"pid {proc.pid}" in res.stderr or f'"pid": {proc.pid}' in res.stderr
        # The refused resume touched nothing: the owner's running trial was not ended as an
        # "orphan", and the run finishes with every trial passing.
        rest = read_until(proc, "run_finished", 1)
        finished = [e for e in rest if e["event"] == "trial_finished"]
        assert len(finished) + sum(e["event"] == "trial_finished" for e in events) == 9
        assert {e["verdict"] for e in finished} == {"pass"}
        assert not list(Path(run_dir).glob("trials/*/trial-*.interrupted-*"))
    finally:
        proc.kill()
        proc.wait()


def test_resume_of_a_run_json_without_its_recipe_hash_says_run_json_is_damaged(tmp_path):
    # It said "the recipe changed since ... (hash None then ...)": a user would look for an edit.
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.replace("trials: 3", "trials: 1"))
    done = start(recipe, tmp_path / "out")
    stdout, _ = done.communicate(timeout=120)
    assert done.returncode == 0
    run_dir = Path(json.loads(stdout.splitlines()[0])["run_dir"])
    meta_path = run_dir / "run.json"
    for damage in (None, ["not", "a", "hash"]):
        meta = json.loads(meta_path.read_text())
        meta.pop("recipe_hash", None)
        if damage is not None:
            meta["recipe_hash"] = damage
        meta_path.write_text(json.dumps(meta))
        res = aorta("sweep", "run", "--resume", str(run_dir), "--no-snapshot")
        assert res.returncode == 2, res.stderr
        assert "run.json is damaged" in res.stderr and "recipe changed" not in res.stderr
        assert "recipe_hash is " + ("missing" if damage is None else "not a hash") in res.stderr
        assert "Traceback" not in res.stderr
