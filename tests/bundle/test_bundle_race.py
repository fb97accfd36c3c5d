"""A run subdirectory swapped for a symlink while root bundles it cannot lead the bundle out.

The real `aorta-tui bundle` runs as root (the user a bundle of a shared run is often made as)
while a racing loop swaps the run's `data/` directory for a symlink to a directory holding a
root-only canary file of the same names, and back, as fast as it can. Before the bundle read
through directory descriptors, 3 of 6 archives held /etc/shadow this way; the canary must
reach none.
"""

from __future__ import annotations

import os
import tarfile
import threading
from pathlib import Path

import pytest

from tests.engine_support import aorta

CANARY = "root-only-canary-7f3a9c1e"
ROUNDS = 6
FILES = 300


def _swapper(run: Path, target: Path, stop: threading.Event) -> None:
    data, parked = run / "data", run.parent / "parked"  # outside the run: never listed
    while not stop.is_set():
        # each state a millisecond: the listing sees the real directory half the time
        stop.wait(0.001)
        os.rename(data, parked)
        os.symlink(target, data)
        stop.wait(0.001)
        os.unlink(data)
        os.rename(parked, data)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.skipif(os.geteuid() != 0, reason="the canary is a root-only file read by root")
def test_a_subdirectory_swapped_for_a_symlink_never_leads_outside(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    (run / "journal.jsonl").write_text("")
    for i in range(FILES):
        (run / "data" / f"f{i:03}.txt").write_text(f"step {i} ok\n")
    secret = tmp_path / "rootonly"
    secret.mkdir(mode=0o700)
    for i in range(FILES):
        p = secret / f"f{i:03}.txt"
        p.write_text(f"{CANARY}\n")
        p.chmod(0o600)
    leaked = []
    for n in range(ROUNDS):
        stop = threading.Event()
        racer = threading.Thread(target=_swapper, args=(run, secret, stop), daemon=True)
        racer.start()
        try:
            out = tmp_path / f"b{n}.tar.gz"
            proc = aorta("bundle", str(run), "-o", str(out), cwd=tmp_path, timeout=120)
        finally:
            stop.set()
            racer.join()
        assert proc.returncode == 0, proc.stderr
        with tarfile.open(out) as tar:
            for member in tar.getmembers():
                fh = tar.extractfile(member)
                if fh is not None and CANARY.encode() in fh.read():
                    leaked.append((n, member.name))
    assert leaked == []
