"""Issue 12, item 9: no regex can stall the orchestrator.

Recipe patterns (``custom_patterns``, ``step_time_regex``) run on RE2, which never backtracks;
patterns RE2 cannot run are refused by validation with a located message. Built-in patterns
stay on ``re`` and are attacked here with long adversarial lines: each must scan in time
linear in the line (``nan_loss`` was quadratic on a long run of digits before this).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.classify import (
    KERNEL_PATTERNS,
    LOG_PATTERNS,
    PatternRule,
    classify,
    extract_step_times,
)
from aorta_tui.classify.dmesg import match_kernel_line
from aorta_tui.classify.scan import Matcher, scan_file
from aorta_tui.recipe import check_recipe_text
from aorta_tui.trial.supervisor import ProcessOutcome
from tests.engine_support import REPO, aorta, only_run_dir

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

CATASTROPHIC = "^(a+)+$"  # exponential in Python's re: 6.3 s at 28 characters, x2 per character


def _outcome() -> ProcessOutcome:
    return ProcessOutcome(
        pid=1, exit_code=0, signal=None, core_dumped=False, timed_out=False, cancelled=False,
        hang=None, exec_error=None, wall_s=1.0, started_at=0.0, ended_at=1.0, peak_rss_kb=None,
        gpu_peak_mem_bytes=None, gpu_mem_reason="test", stdout_bytes=0, stderr_bytes=0,
        truncated=False,
    )  # fmt: skip


HANG_GUARD_S = 60.0  # far below any backtracking run, far above any loaded box's linear run


@pytest.mark.parametrize("n", [28, 34, 64, 10_000])
def test_catastrophic_custom_pattern_classifies_at_once(tmp_path: Path, n: int) -> None:
    log = tmp_path / "stdout.log"
    log.write_text(("a" * n + "b\n") * 2000 + "a" * n + "\n")  # the last line matches
    rule = PatternRule("evil", re.compile(CATASTROPHIC), "warn")
    started = time.monotonic()
    c = classify(_outcome(), stdout_path=log, stderr_path=log, custom_rules=[rule])
    # a hang guard, not a speed figure: Python's re took 6.3 s for ONE line at n=28, so 2001
    # lines backtracking would take hours; linear matching takes milliseconds
    assert time.monotonic() - started < HANG_GUARD_S
    (det,) = [d for d in c.detections if d.id == "evil"]
    assert det.line_no == 2001 and det.count == 1
    assert c.verdict == "pass"  # a warn pattern
    started = time.monotonic()
    assert extract_step_times(log, r"^(a+)+(?P<s>)$") == []  # an empty group: not a number
    assert time.monotonic() - started < HANG_GUARD_S


def test_pattern_the_linear_matcher_cannot_run_is_a_clear_error(tmp_path: Path) -> None:
    """A caller of classify() that bypasses validation gets a detection, not a backtracker."""
    log = tmp_path / "stdout.log"
    log.write_text("abc\n")
    rule = PatternRule("look", re.compile(r"a(?=b)"), "fail")
    c = classify(_outcome(), stdout_path=log, stderr_path=log, custom_rules=[rule])
    (det,) = [d for d in c.detections if d.id == "look"]
    assert det.severity == "error"
    assert "custom pattern 'look' was not searched" in det.message
    assert "lookahead" in det.message
    assert c.verdict == "error"


RECIPE = ("schema_version: 1\nmode: probe\ntrials: 1\nmitigation_axis: [none]\n"
          "diagnostic_axis: [none]\n")


@pytest.mark.parametrize(("regex", "names"), [
    (r"loss(?=\\d)", "lookahead"),
    (r"(?<!val_)loss", "lookbehind"),
    (r"(\\w+) \\1", "backreference"),
    (r"(?P<x>a)(?P=x)", "backreference"),
    (r"(?x) a b", "verbose"),
    (r"done\\Z", "\\z"),
])
def test_validation_refuses_patterns_re2_cannot_run(regex: str, names: str) -> None:
    for key_text, line, path in (
        (f"custom_patterns:\n  - id: p\n    match: {{regex: \"{regex}\"}}\n", 8,
         "custom_patterns[0].match.regex"),
        (f"step_time_regex: \"{regex}\"\n", 6, "step_time_regex"),
    ):
        (issue,) = check_recipe_text(RECIPE + key_text, source="recipe.yaml")
        text = issue.render("recipe.yaml")
        assert text.startswith(f"recipe.yaml:{line}:"), text
        assert issue.path == path
        assert "RE2" in text and names in text, text
        assert issue.hint and "condition" in issue.hint


def test_validation_accepts_the_catastrophic_pattern_re2_runs_linearly() -> None:
    text = RECIPE + f"custom_patterns:\n  - id: p\n    match: {{regex: '{CATASTROPHIC}'}}\n"
    assert check_recipe_text(text, source="recipe.yaml") == []


def test_real_sweep_with_the_catastrophic_pattern_finishes(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.replace("trials: 1", "trials: 2") +
                      f"custom_patterns:\n  - id: evil\n    match: {{regex: '{CATASTROPHIC}'}}\n"
                      "    on_match: warn\n")
    script = "for i in $(seq 200); do echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab; done"
    started = time.monotonic()
    proc = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot",
                 "--", "bash", "-c", script, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 30  # 200 lines x 2 trials at 2^34 steps each: never
    assert len(list(only_run_dir(tmp_path / "out").glob("trials/*/*/result.json"))) == 2


def _first_trial_pid(out: Path) -> int:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        for path in out.glob("*/*/journal.jsonl"):
            for raw in path.read_text().splitlines():
                if '"trial_started"' in raw and '"pid"' in raw:
                    pid = json.loads(raw).get("pid")
                    if pid:
                        return int(pid)
        time.sleep(0.01)
    raise AssertionError("the first trial never started")


def test_sigint_while_classifying_a_big_log_is_honoured(tmp_path: Path) -> None:
    """SIGINT as soon as the first trial's process is gone: the orchestrator is then
    classifying 16 MiB against the pattern (2^34 steps a line for Python's re) - exit 130."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.replace("trials: 1", "trials: 3") +
                      f"custom_patterns:\n  - id: evil\n    match: {{regex: '{CATASTROPHIC}'}}\n"
                      f"step_time_regex: '{CATASTROPHIC}'\n")
    line = "a" * 34 + "b\n"
    count = (16 << 20) // len(line)
    code = f"import sys; sys.stdout.write({line!r} * {count})"
    out = tmp_path / "out"
    orchestrator = subprocess.Popen(
        [sys.executable, "-m", "aorta_tui", "--batch", str(recipe), "--output", str(out),
         "--no-snapshot", "--", sys.executable, "-c", code],
        cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        pid = _first_trial_pid(out)
        while Path(f"/proc/{pid}").exists():  # reaped: the orchestrator is classifying now
            time.sleep(0.005)
        orchestrator.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _stdout, stderr = orchestrator.communicate(timeout=60)
        waited = time.monotonic() - sent
    finally:
        if orchestrator.poll() is None:
            orchestrator.kill()
    assert orchestrator.returncode == 130, stderr
    assert waited < 10, f"SIGINT took {waited:.1f} s to be honoured"


# -- built-in patterns under attack ---------------------------------------------------------

_FILLERS = ("1", "_", "a", " ", "A", "0.", ", 1", "\t", "x" * 7 + " ", "é")
LINE_CHARS = 20_000
LIMIT_S = 0.25  # a linear scan of 20 kB takes well under 10 ms; quadratic took seconds
_ALL = (*KERNEL_PATTERNS, *LOG_PATTERNS)


def _adversarial_lines() -> list[str]:
    """Per pattern: each needle and sample wrapped in, or repeated through, long fillers."""
    lines: list[str] = []
    for p in _ALL:
        for piece in (*p.needles, *p.samples()):
            lines.append((piece + " ") * (LINE_CHARS // (len(piece) + 1)))
            for filler in _FILLERS[:: 1 if p.tier == 4 else 3]:
                pad = filler * (LINE_CHARS // len(filler))
                lines += [pad + piece, piece + pad, pad + " " + piece + " = nan"]
    return lines


def _scan_time(tmp_path: Path, line: str) -> tuple[float, str]:
    """The slowest built-in pattern on ``line``: tier 4 as the log scanner runs them, tier 3
    as the kernel log does (one record at a time, through match_kernel_line)."""
    log = tmp_path / "attack.log"
    log.write_text(line + "\n")
    started = time.perf_counter()
    match_kernel_line(line)
    worst, worst_id = time.perf_counter() - started, "tier 3 (kernel patterns)"
    for p in LOG_PATTERNS:
        mt = Matcher(p.id, p.regex, lambda m: {}, p.needles)
        started = time.perf_counter()
        scan_file(log, "stdout", [mt])
        took = time.perf_counter() - started
        if took > worst:
            worst, worst_id = took, p.id
    return worst, worst_id


def test_builtin_patterns_are_linear_on_adversarial_lines(tmp_path: Path, attack_tally) -> None:
    lines = _adversarial_lines()
    slow = []
    for line in lines:
        took, pid = _scan_time(tmp_path, line)
        if took > LIMIT_S:
            slow.append((pid, round(took, 2), line[:40]))
    attack_tally.record("built-in pattern time (adversarial lines)", cases=len(lines),
                        failures=len(slow), promise=f"every built-in pattern < {LIMIT_S} s per 20 kB line")
    assert slow == []


_PIECES = st.sampled_from(sorted({piece for p in _ALL for piece in (*p.needles, *p.samples())}
                                 | set(_FILLERS) | {"loss", "nan", "=", ":", " is ", "OpType=", "Ranks "}))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.tuples(_PIECES, st.integers(1, 2000)), min_size=1, max_size=6))
def test_builtin_patterns_are_linear_on_generated_lines(tmp_path: Path, attack_tally, parts) -> None:
    line = "".join(piece * n for piece, n in parts)[: 4 * LINE_CHARS]
    took, pid = _scan_time(tmp_path, line)
    attack_tally.record("built-in pattern time (hypothesis lines)", cases=1, failures=int(took > LIMIT_S),
                        promise=f"every built-in pattern < {LIMIT_S} s per line up to 80 kB")
    assert took <= LIMIT_S, (pid, took, line[:80])
