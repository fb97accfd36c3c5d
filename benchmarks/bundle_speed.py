"""Time and peak memory of `aorta-tui bundle` on the two inputs issue 35 measured.

1. a run whose stdout is one 10 MB line holding 24 secret-named variables (the trials' values
   kept as keyed hashes, so the keyed-hash search runs over the whole line);
2. a run holding a 1 GiB sparse file (logical size 1 GiB, no blocks).

Each bundle is the real CLI in a subprocess (a fresh interpreter: import time included); peak
memory is the child's maximum resident set size. Run: python benchmarks/bundle_speed.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIABLES = 24
LINE_BYTES = 10 * 1024 * 1024
SPARSE_BYTES = 1024 * 1024 * 1024


def _run_dir(root: Path) -> Path:
    run = root / "run"
    run.mkdir()
    (run / "journal.jsonl").write_text("")
    return run


def _secret_line(run: Path) -> None:
    from aorta_tui.core.secrets import record_secret_hashes

    env = {f"SVC{i}_TOKEN": f"tok{i:02d}-" + os.urandom(12).hex() for i in range(VARIABLES)}
    record_secret_hashes(run, env)
    pairs = " ".join(f"{k}={v} printed {v}" for k, v in env.items())
    filler = "step=1 loss=2.5 lr=3e-4 path=/data/shard-0001 ok "
    body = (filler * (LINE_BYTES // len(filler) // 2) + pairs)
    body = body + " " + filler * ((LINE_BYTES - len(body)) // len(filler))
    (run / "stdout.log").write_text(body + "\n")


def _sparse(run: Path) -> None:
    with open(run / "sparse.bin", "wb") as fh:
        fh.truncate(SPARSE_BYTES)


def _bundle(run: Path, out: Path) -> tuple[float, float, float]:
    """Seconds, CPU seconds and peak resident MB of one real bundle (os.wait4: this child's
    own figures; on a shared box the CPU seconds are what the bundle itself cost)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "aorta_tui", "bundle", str(run), "-o",
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bundle failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for name, make in (("10 MB line, 24 secret variables", _secret_line),
                           ("1 GiB sparse file", _sparse)):
            root = base / name.split()[0].replace(" ", "")
            root.mkdir()
            run = _run_dir(root)
            make(run)
            elapsed, cpu, peak_mb = _bundle(run, root / "b.tar.gz")
            print(f"{name}: {elapsed:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak_mb:.0f} MB "
                  "(targets: < 10 s, < 500 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
