"""A probe run by a real non-root process (setpriv to nobody) reports which fields need root
instead of failing; as root the same fields are readable."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from envsnap_helpers import REPO

from aorta_tui.envsnap import EnvSnapshot, capture_snapshot, load_snapshot
from aorta_tui.envsnap.summary import summarize

NOBODY = "65534"


def _python_for_nobody() -> str | None:
    # The test venv's interpreter may live under /root (mode 0700); nobody needs a system one.
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate):
            return candidate
    return None


PYTHON = _python_for_nobody()
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or PYTHON is None,
    reason="needs root, setpriv and a system python3 to start a real non-root process")


def _expected_root_only() -> set[str]:
    """Fields this machine hides from non-root users, derived from the machine itself."""
    expected = set()
    try:
        if Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1" and os.path.exists("/dev/kmsg"):
            expected.add("host.kernel_log_gpu_errors")
    except OSError:
        pass
    tracing = Path("/sys/kernel/tracing")
    if (tracing / "available_events").exists() and not tracing.stat().st_mode & stat.S_IXOTH:
        expected.add("host.tracefs_events")
    return expected


@pytest.fixture(scope="module")
def nonroot_snapshot() -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="envsnap-nonroot-", dir="/tmp"))
    try:
        shutil.copytree(REPO / "aorta_tui", workdir / "aorta_tui",
                        ignore=shutil.ignore_patterns("__pycache__"))
        for root, dirs, files in os.walk(workdir):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(workdir, 0o777)
        out = workdir / "nonroot.json"
        proc = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             "env", f"PYTHONPATH={workdir}", f"HOME={workdir}",
             PYTHON, "-m", "aorta_tui.envsnap", "--output", str(out), "--no-torch"],
            capture_output=True, text=True, timeout=120, cwd=workdir)
        assert proc.returncode == 0, proc.stderr
        assert out.stat().st_uid == int(NOBODY)  # really written by the non-root process
        return json.loads(out.read_text())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_nonroot_probe_lists_the_fields_that_need_root(nonroot_snapshot: dict) -> None:
    expected = _expected_root_only()
    if not expected:
        pytest.skip("this machine hides nothing from non-root users that the probe reads")
    probe = nonroot_snapshot["probe"]
    assert probe["is_root"]["value"] is False
    needing = set(probe["fields_needing_root"]["value"])
    assert expected <= needing
    for path in expected:
        section, key = path.split(".")
        leaf = nonroot_snapshot[section][key]
        assert leaf["state"] == "error" and leaf["needs_root"] is True and "needs root" in leaf["reason"]


def test_the_same_fields_are_readable_as_root(nonroot_snapshot: dict) -> None:
    expected = _expected_root_only()
    if not expected:
        pytest.skip("nothing root-only here")
    as_root = capture_snapshot(include_torch=False)
    assert as_root.probe["fields_needing_root"].value == []
    for path in expected:
        section, key = path.split(".")
        assert as_root.section(section)[key].state == "ok", as_root.section(section)[key]


def test_summary_shows_what_needs_root(nonroot_snapshot: dict, tmp_path: Path) -> None:
    expected = _expected_root_only()
    if not expected:
        pytest.skip("nothing root-only here")
    path = tmp_path / "nonroot.json"
    path.write_text(json.dumps(nonroot_snapshot))
    groups = dict(summarize(load_snapshot(path)))
    needs_root = dict(groups["probe"])["needs root"]
    assert all(field in needs_root for field in expected)


def test_probe_command_names_the_root_only_fields(nonroot_snapshot: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's note, fed the snapshot the real non-root process wrote (typer is not
    installed for the system interpreter nobody runs, so the command itself runs here)."""
    expected = _expected_root_only()
    if not expected:
        pytest.skip("nothing root-only here")
    from typer.testing import CliRunner

    import aorta_tui.envsnap as envsnap
    from aorta_tui.cli.env_cmd import app

    typed = EnvSnapshot.from_dict(nonroot_snapshot)
    monkeypatch.setattr(envsnap, "capture_snapshot", lambda **_: typed)
    result = CliRunner().invoke(app, ["probe", "--summary"])
    assert result.exit_code == 0
    assert "need root and were not read" in result.stderr
    assert all(field in result.stderr for field in expected)
