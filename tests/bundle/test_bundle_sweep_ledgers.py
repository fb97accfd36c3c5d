"""A policy sweep and a queue sweep keep the keyed hashes of their trials' secrets, as a recipe
sweep does: a token the sweep's shell held, printed by a trial, is hidden in a bundle made later
from a shell without it (the common case: sweep over SSH today, bundle tomorrow). Real sweeps,
the real `bundle` CLI, a real archive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from tests.policy.test_policy_crashpoints import CHILD as POLICY_CHILD

REPO = Path(__file__).resolve().parents[2]
TOKEN = "hf_LEDGERplantedTok3n77"

# A trial that prints the inherited token, then writes a queue-run-shaped result (the crash-point
# test's trial).
CHILD = 'import os\nprint("token", os.environ["HF_TOKEN"], flush=True)\n' + POLICY_CHILD
POLICY_SWEEP = textwrap.dedent("""
    import sys
    from pathlib import Path
    from aorta_tui.policy.evaluator import PolicySweepRequest, run_policy_sweep
    from aorta_tui.policy.presets import Policy
    child, out = sys.argv[1], Path(sys.argv[2])
    req = PolicySweepRequest(workload="fake", policies=(Policy(name="other", env={"X_SHIFT": "1"}),),
                             streams=2, output_dir=out, trials=1, seed=4, python=sys.executable)
    run_policy_sweep(req, trial_command=lambda r, p, res: [sys.executable, child, "-o", str(res)])
""")


def _shell_without_token() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}


def _archive_bytes(archive: Path) -> tuple[list[str], bytes]:
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        data = b"".join(f.read() for m in tar.getmembers() if m.isfile() and (f := tar.extractfile(m)))
    return names, data


def _bundle(target: Path, cwd: Path) -> tuple[list[str], bytes]:
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "bundle", str(target), "-o", "t.tar.gz"],
                          cwd=cwd, env=_shell_without_token(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return _archive_bytes(cwd / "t.tar.gz")


def test_a_policy_sweeps_trial_printing_the_shells_token_is_hidden_in_a_later_bundle(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    run = tmp_path / "policy-run"
    made = subprocess.run([sys.executable, "-c", POLICY_SWEEP, str(child), str(run)], cwd=REPO,
                          env={**os.environ, "HF_TOKEN": TOKEN}, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    logs = b"".join(p.read_bytes() for p in run.rglob("stdout.txt"))
    assert TOKEN.encode() in logs  # the trials printed it, or this proves nothing
    assert (run / "secret-hashes.json").stat().st_mode & 0o777 == 0o600
    assert TOKEN not in (run / "secret-hashes.json").read_text()
    names, data = _bundle(run, tmp_path)
    assert TOKEN.encode() not in data
    assert not [n for n in names if n.endswith("secret-hashes.json")]
    assert [n for n in names if n.endswith("stdout.txt")]  # the logs are in it, scrubbed


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_queue_sweeps_inherited_token_is_kept_as_a_hash_never_a_value(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    made = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "sweep", "tiny_kernel_stress",
                           "--streams", "1", "--device", "cpu", "--size", "tiny", "-i", "2", "-w", "0",
                           "--run-dir", "run"], cwd=tmp_path, env={**os.environ, "HF_TOKEN": TOKEN},
                          capture_output=True, text=True, timeout=180)
    assert made.returncode == 0, made.stderr
    ledger = json.loads((tmp_path / "run" / "secret-hashes.json").read_text())
    assert "HF_TOKEN" in [h["name"] for h in ledger["hashes"]]
    assert TOKEN not in json.dumps(ledger)
    names, data = _bundle(tmp_path / "run", tmp_path)
    assert not [n for n in names if n.endswith("secret-hashes.json")]
    assert TOKEN.encode() not in data
