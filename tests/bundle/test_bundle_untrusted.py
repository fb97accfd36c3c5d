"""`bundle` of a run directory another user controls, as root without sudo (core/run_trust.py):
refused before anything of it is read (exit 3, naming the owner and `sudo -u OWNER aorta-tui
bundle ...`), unless `--i-trust-this-directory` is given, which the run's journal records. The
owner is a real second Unix user (the `aorta-atk` fixtures of the untrusted-run-dir tests)."""

from __future__ import annotations

import tarfile
import time

import pytest

from tests.engine_support import journal
from tests.reliability.test_rel_untrusted_rundir import (  # noqa: F401 - fixtures
    ATTACKER,
    Attacker,
    Scene,
    _assert_untouched,
    _root_cli,
    attacker,
    scene,
)

pytestmark = pytest.mark.slow


def _trust_warnings(scene: Scene) -> list[dict]:  # noqa: F811 - the fixture's value
    return [e for e in journal(scene.run_dir)
            if e.get("event") == "warning" and e.get("code") == "untrusted_run_dir"]


def test_bundle_of_another_users_run_is_refused_as_root_without_sudo(scene: Scene) -> None:  # noqa: F811
    out = scene.hand / "t.tar.gz"
    journal_before = (scene.run_dir / "journal.jsonl").read_bytes()
    before = scene.outside()
    res = _root_cli("bundle", str(scene.run_dir), "-o", str(out))
    assert res.returncode == 3, res.stdout + res.stderr
    assert f"{scene.run_dir} belongs to {ATTACKER}" in res.stderr
    assert f"sudo -u {ATTACKER} aorta-tui bundle {scene.run_dir}" in res.stderr
    assert "--i-trust-this-directory" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists() and list(scene.hand.iterdir()) == []  # nothing written
    assert (scene.run_dir / "journal.jsonl").read_bytes() == journal_before
    _assert_untouched(scene, before)

    # --review reads the run too: refused the same way
    res = _root_cli("bundle", str(scene.run_dir), "--review")
    assert res.returncode == 3 and "belongs to" in res.stderr, res.stdout + res.stderr

    # the explicit override goes on, says so, and the run's journal records it
    res = _root_cli("bundle", str(scene.run_dir), "-o", str(out), "--i-trust-this-directory")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"warning: --i-trust-this-directory: root went on without sudo although " \
           f"{scene.run_dir} belongs to {ATTACKER}" in res.stderr
    with tarfile.open(out) as tar:
        assert "MANIFEST.json" in {m.name.rsplit("/", 1)[-1] for m in tar.getmembers()}
    warnings = _trust_warnings(scene)
    assert len(warnings) == 1 and f"belongs to {ATTACKER}" in warnings[0]["message"]
    _assert_untouched(scene, before)


def test_the_owner_bundling_its_own_run_is_not_questioned(scene: Scene, attacker: Attacker) -> None:  # noqa: F811
    out = scene.hand / "own.tar.gz"
    res = attacker.run(attacker.python, "-m", "aorta_tui", "bundle", str(scene.run_dir), "-o",
                       str(out), cwd=str(scene.hand))
    assert res.returncode == 0, res.stdout + res.stderr  # type: ignore[attr-defined]
    assert out.is_file() and _trust_warnings(scene) == []


def test_a_trusted_bundle_of_a_run_its_owner_still_holds(scene: Scene, attacker: Attacker) -> None:  # noqa: F811
    """A hang is bundled while it hangs: the owner's live session holds the run's lock, so the
    override is shown, not written into the journal that session owns (and not refused)."""
    holder = attacker.py("""
        import os, sys, time
        from pathlib import Path
        from aorta_tui.store.lock import RunLock
        lock = RunLock(Path(sys.argv[1]))  # kept: the lock lives as long as this object
        lock.acquire()
        open(os.path.join(sys.argv[2], "locked"), "w").close()
        time.sleep(60)
        """, str(scene.run_dir), str(scene.hand), wait=False)
    try:
        for _ in range(400):
            if (scene.hand / "locked").exists() or holder.poll() is not None:  # type: ignore[attr-defined]
                break
            time.sleep(0.05)
        assert (scene.hand / "locked").exists(), holder.stderr.read()  # type: ignore[attr-defined]
        journal_before = (scene.run_dir / "journal.jsonl").read_bytes()
        res = _root_cli("bundle", str(scene.run_dir), "-o", str(scene.hand / "t.tar.gz"),
                        "--i-trust-this-directory")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "warning: --i-trust-this-directory" in res.stderr
        assert (scene.run_dir / "journal.jsonl").read_bytes() == journal_before
        assert "still running" in res.stderr
    finally:
        holder.kill()  # type: ignore[attr-defined]
        holder.wait()  # type: ignore[attr-defined]
