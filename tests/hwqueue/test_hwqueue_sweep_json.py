"""`queue sweep --json` is an event stream like every long command's --json: RunStarted first,
the sweep's own events, RunFinished last carrying the sweep document; a failure ends it typed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aorta_tui.core.events import Progress, RunFinished, RunStarted, RunWarning, event_from_dict

pytest.importorskip("torch")

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _sweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "sweep", *args, "--json"],
                          cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("mode", [[], ["--in-process"]], ids=["isolated", "in-process"])
def test_every_line_is_an_event_and_the_last_carries_the_document(tmp_path: Path, mode: list[str]) -> None:
    p = _sweep("tiny_kernel_stress", "--streams", "1,2", "--device", "cpu", "--size", "tiny",
               "-i", "2", "-w", "0", "-o", "s.json", *mode, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    events = [event_from_dict(json.loads(line)) for line in p.stdout.splitlines()]
    first, last = events[0], events[-1]
    assert isinstance(first, RunStarted) and first.source == "queue_sweep" and first.total == 2
    assert isinstance(last, RunFinished) and last.status == "completed" and last.exit_code == 0
    doc = last.summary["result"]
    assert doc["kind"] == "aorta-tui/queue-sweep" and doc["stream_counts"] == [1, 2]
    assert doc == json.loads((tmp_path / "s.json").read_text())  # the same document as -o
    assert {e.run_id for e in events if not e.run_id.startswith(doc["run_id"] + "-s")} == {doc["run_id"]}
    assert [e.done for e in events if isinstance(e, Progress) and e.run_id == doc["run_id"]] == [1, 2]


def test_a_refused_sweep_ends_the_stream_failed_with_exit_2(tmp_path: Path) -> None:
    p = _sweep("moe", "--streams", "1,4", "--device", "cpu", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "out of range: 1" in p.stderr and "Traceback" not in p.stderr
    events = [event_from_dict(json.loads(line)) for line in p.stdout.splitlines()]
    assert isinstance(events[0], RunStarted)
    assert isinstance(events[-2], RunWarning) and events[-2].code == "error"
    assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"
    assert events[-1].exit_code == 2 and "out of range: 1" in events[-1].summary["error"]
    assert list(tmp_path.iterdir()) == []
