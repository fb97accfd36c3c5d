"""tests/tiers.py names files that exist, and its ``alone`` mark reaches exactly their slow tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.tiers import ALONE, ALONE_FILES

TESTS = Path(__file__).resolve().parents[1]


def test_every_file_the_table_names_exists_once() -> None:
    # A renamed test file would leave the table silently: its slow tests would share the workers.
    missing = sorted(f for f in ALONE_FILES if not (TESTS / f).is_file())
    assert missing == []
    named = [f for files in ALONE.values() for f in files]
    assert len(named) == len(set(named)), "a file is named under two reasons"


def _collected(expr: str, *paths: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", expr, *paths], cwd=TESTS.parent, capture_output=True, text=True, check=False)
    return {line for line in out.stdout.splitlines() if "::" in line}


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_alone_marks_the_slow_tests_of_a_named_file_and_no_other() -> None:
    # test_rel_signals.py has fast and slow tests; test_cli_dialect.py is named nowhere.
    named, other = "tests/reliability/test_rel_signals.py", "tests/cli/test_cli_dialect.py"
    alone = _collected("alone", named, other)
    assert alone and alone == _collected("slow", named)
    assert _collected("not slow", named).isdisjoint(alone)
    assert _collected("slow", other) and not (alone & _collected("slow", other))
