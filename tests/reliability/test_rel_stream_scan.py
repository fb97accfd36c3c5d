"""Issue 27 item 16: an error printed beyond what a trial's log keeps is still classified.

A trial printed 300 MB, then ``RuntimeError: CUDA error: an illegal memory access was
encountered``, then 300 MB more, and got the verdict **pass**: only the kept 64 MiB head and
64 KiB tail of its log were scanned. Now the classifier's patterns run over the whole stream as
the supervisor reads it, the log keeps its cap, and ``result.json`` says how much was scanned
and how much was kept.

The issue's 2 x 300 MB takes ~45 s through a real trial on this 2-core box, so this test uses
2 x 80 MB: the error still sits 80 MB into the stream, far beyond the 64 MiB head, with 80 MB
after it (far more than the 64 KiB tail). Memory is checked by running 2 x 8 MB and 2 x 80 MB
and comparing the orchestrator's peak RSS: a scan that held the stream would grow by ~150 MB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine_support import REPO, only_run_dir

pytestmark = pytest.mark.slow

RECIPE = """\
schema_version: 1
mode: probe
ticket: BIG
trials: 1
mitigation_axis: [none]
diagnostic_axis: [none]
"""
LINE = "step 12345: loss 0.1234 lr 0.001 tokens/s 98765 padding to make a longer line"
EMIT = (f'yes "{LINE}" | head -c "$1"; echo; '
        'echo "RuntimeError: CUDA error: an illegal memory access was encountered"; '
        f'yes "{LINE}" | head -c "$1"')
KEPT = 64 << 20  # the log's cap (ProcessSpec.max_log_bytes)


def test_an_error_beyond_the_kept_head_and_tail_fails_the_trial(tmp_path: Path) -> None:
    small, small_rss = _run(tmp_path, 8_000_000)
    big, big_rss = _run(tmp_path, 80_000_000)
    for result, each in ((big, 80_000_000), (small, 8_000_000)):
        assert result["verdict"] == "fail", result["reason"]
        ids = {d["id"] for d in result["detections"]}
        assert "illegal_memory_access" in ids, ids
        scan = result["log_scan"]["stdout"]
        assert scan["scanned_bytes"] == result["process"]["stdout_bytes"] >= 2 * each
        assert scan["whole_stream_scanned"] is True
    # the big trial's error is not in its log, and the result says so
    big_scan = big["log_scan"]["stdout"]
    assert big_scan["kept_in_log"] is False and big_scan["kept_bytes"] <= KEPT
    assert "in the part its log does not keep" in big["reason"], big["reason"]
    # bounded memory: ten times the output, (almost) the same peak RSS
    assert big_rss - small_rss < 32 * 1024, (small_rss, big_rss)


def _run(tmp_path: Path, each: int) -> tuple[dict, int]:
    """A real sweep, its one trial printing ``each`` bytes, the error, ``each`` bytes more:
    the trial's result and the orchestrator's peak RSS in KiB (``wait4``'s rusage)."""
    work = tmp_path / str(each)
    work.mkdir()
    (work / "big.yaml").write_text(RECIPE)
    with open(work / "out.txt", "wb") as out, open(work / "err.txt", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "aorta_tui", "--batch", "big.yaml", "--no-snapshot", "--",
             "sh", "-c", EMIT, "emit", str(each)],
            cwd=work, stdout=out, stderr=err, env={**os.environ, "PYTHONPATH": str(REPO)})
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, (work / "err.txt").read_text()[-2000:]
    run = only_run_dir(work / "aorta-out")
    result = json.loads(next(run.glob("trials/*/trial-*/result.json")).read_text())
    assert next(run.glob("trials/*/trial-*/stdout.log")).stat().st_size <= KEPT
    return result, usage.ru_maxrss
