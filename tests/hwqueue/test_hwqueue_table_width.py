"""`queue run`'s table fits the terminal: plain text at $COLUMNS (80 and wider) and the rich
table on a real pty of 80 columns; a wide terminal keeps a long value on one line."""

from __future__ import annotations

import re
import sys

import pytest

from tests.engine_support import aorta, output_on_a_pty

ARGS = ["queue", "run", "hetero_kernels", "--streams", "2", "--iterations", "3", "--warmup", "1",
        "--device", "cpu", "--size", "tiny"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("columns", [80, 100, 200])
def test_the_plain_table_fits_columns(tmp_path, columns):
    proc = aorta(*ARGS, cwd=tmp_path, env={"COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].split() == ["metric", "value", "unit", "from"]
    assert max(len(ln) for ln in lines) <= columns, max(lines, key=len)
    # every metric is still there, and a wide terminal needs no wrapping of the table
    assert any(ln.startswith("cost_us_per_kernel ") for ln in lines)
    delay = next(ln for ln in lines if ln.startswith("launch_delay_mean_us"))
    assert ("separate device start)" in delay) == (columns >= 200)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_the_rich_table_fits_an_80_column_pty(tmp_path):
    text = output_on_a_pty([sys.executable, "-m", "aorta_tui", *ARGS], tmp_path)
    lines = [ln for ln in text.split("\n") if ln.strip()]
    assert any("cost_us_per_kernel" in ln for ln in lines), text[:2000]
    assert max(len(ln) for ln in lines) <= 80, max(lines, key=len)
