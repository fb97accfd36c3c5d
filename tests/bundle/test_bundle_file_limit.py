"""A file over 256 MiB (logical size) is left out of a bundle before any read and listed with
its reason in MANIFEST.json (docs/bundle.md); a sparse one costs no read."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from aorta_tui.bundle.gather import MAX_FILE_BYTES
from tests.engine_support import aorta, only_run_dir

RECIPE = """\
schema_version: 1
mode: probe
ticket: T-BIG
trials: 1
timeout_per_trial: 30
mitigation_axis: [none]
diagnostic_axis: [none]
"""


def test_a_file_over_the_limit_is_listed_not_archived(tmp_path: Path) -> None:
    (tmp_path / "probe.yaml").write_text(RECIPE)
    proc = aorta("--batch", "probe.yaml", "--no-snapshot", "--", "sh", "-c", "echo ok",
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = only_run_dir(tmp_path / "aorta-out")
    trial = run / "trials/none-none/trial-000"
    with open(trial / "core.dump", "wb") as fh:  # sparse: 1 byte past the limit, no blocks
        fh.truncate(MAX_FILE_BYTES + 1)
    (trial / "small.txt").write_text("kept\n")
    made = aorta("bundle", str(run), "-o", "t.tar.gz", "--json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    manifest = json.loads(made.stdout)
    entry = next(f for f in manifest["files"] if f["path"].endswith("trial-000/core.dump"))
    assert entry["skipped"] == f"{MAX_FILE_BYTES + 1} bytes, over the 268435456 bytes a bundle reads"
    assert manifest["totals"]["skipped"] >= 1
    with tarfile.open(tmp_path / "t.tar.gz") as tar:
        names = [m.name for m in tar.getmembers()]
    assert not any(n.endswith("core.dump") for n in names)
    assert any(n.endswith("trial-000/small.txt") for n in names)
