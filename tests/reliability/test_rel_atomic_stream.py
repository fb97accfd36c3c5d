"""atomic_open_binary (a ticket bundle's archive): the temp file exists only while a watcher
that removes it once this process is gone runs. Before, the temp file was created first and its
watcher spawned after: a kill in between left it for good (the bundle's interrupted-at-reading
tests failed that way under load). Real files, a real ``sh`` watcher, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aorta_tui.core import atomic


def test_the_watcher_runs_before_the_temp_file_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, bool]] = []
    real = atomic._remove_when_gone

    def spy(tmp: str) -> subprocess.Popen[bytes] | None:
        seen.append((tmp, os.path.exists(tmp)))
        return real(tmp)

    monkeypatch.setattr(atomic, "_remove_when_gone", spy)
    with atomic.atomic_open_binary(tmp_path / "out.bin") as fh:
        fh.write(b"payload")
    assert (tmp_path / "out.bin").read_bytes() == b"payload"
    assert len(seen) == 1 and seen[0][1] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_a_taken_temp_name_is_left_alone_and_another_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = iter(["a" * 16, "b" * 16])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda _n: next(names))
    foreign = tmp_path / f".out.bin.{'a' * 16}.tmp"
    foreign.write_bytes(b"someone else's")
    with atomic.atomic_open_binary(tmp_path / "out.bin") as fh:
        fh.write(b"ours")
    time.sleep(0.2)  # a watcher wrongly released would have removed it by now
    assert foreign.read_bytes() == b"someone else's"
    assert (tmp_path / "out.bin").read_bytes() == b"ours"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([foreign.name, "out.bin"])


WRITER = """
import sys, time
from aorta_tui.core.atomic import atomic_open_binary
with atomic_open_binary(sys.argv[1]) as fh:
    fh.write(b"x"); fh.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def test_sigkill_while_writing_leaves_nothing(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "out.bin")], stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
        assert [p.name.endswith(".tmp") for p in tmp_path.iterdir()] == [True]
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30
    while list(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert list(tmp_path.iterdir()) == []
