"""Issue 37 item 3: a full disk while the environment snapshot is written is exit 3 naming it.

With 100 KiB left on an 8 MiB tmpfs, ``--batch p.yaml`` ran its trials, the snapshot's write
failed in its capture process, and the run said only ``warning: snapshot ... failed`` and exited
0 with ``env/`` empty: evidence lost without an error. Now the capture's own failure (its errno)
fails the run as every other write does: exit 3 naming the file and the free space, and the
resume (once space is freed) writes the snapshot. A real tmpfs (root only), the real CLI.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.engine_support import aorta, only_run_dir

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                                reason="mounting a tmpfs needs root")

RECIPE = ("schema_version: 1\nmode: probe\nticket: SNAP\ntrials: 1\nmitigation_axis: [none]\n"
          "diagnostic_axis: [none]\n")
LEFT = 60 << 10  # room for the run's own small files, not for a snapshot (~90 KB here)


@pytest.fixture
def nearly_full(tmp_path: Path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        st = os.statvfs(mnt)
        with open(mnt / "filler", "wb") as fh, contextlib.suppress(OSError):
            fh.write(b"\0" * (st.f_bavail * st.f_frsize - LEFT))
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_snapshot_the_disk_cannot_hold_is_exit_3_naming_it_and_the_run_resumes(
        tmp_path: Path, nearly_full: Path, attack_tally) -> None:
    (tmp_path / "probe.yaml").write_text(RECIPE)
    out = nearly_full / "out"
    res = aorta("--batch", "probe.yaml", "--output", str(out), "--", "true", cwd=tmp_path,
                timeout=300)
    attack_tally.record("full disk during the env snapshot (issue 37 item 3)", cases=1,
                        failures=int(res.returncode != 3), promise="exit 3 naming the file")
    assert res.returncode == 3, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    run_dir = only_run_dir(out)
    assert f"could not write {run_dir}/env/host_env.json" in res.stderr, res.stderr
    assert "No space left on device" in res.stderr and " free there" in res.stderr
    assert f"--resume {run_dir}" in res.stderr  # how to finish it once space is freed
    assert not (run_dir / "env" / "host_env.json").exists()
    (nearly_full / "filler").unlink()
    again = aorta("sweep", "run", "--resume", str(run_dir), cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (run_dir / "env" / "host_env.json").is_file(), "the resume wrote no host snapshot"
    assert (run_dir / "matrix.json").is_file()
