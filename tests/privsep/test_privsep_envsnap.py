"""Issue 33 item 2: under sudo a snapshot's root-only fields are read by the helper.

The tool runs as ``aorta-usr``, who may not read the kernel log (``kernel.dmesg_restrict``) nor
tracefs (mode 0700); the snapshot still has both fields, read by the helper as root and said so
in their source, and no field is left needing root.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from sudo_support import SudoUser, run_sudo

pytestmark = pytest.mark.slow


def _root_only_here() -> set[str]:
    fields = set()
    if Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1" and Path("/dev/kmsg").exists():
        fields.add("kernel_log_gpu_errors")
    tracing = Path("/sys/kernel/tracing")
    if (tracing / "available_events").exists() and not tracing.stat().st_mode & stat.S_IXOTH:
        fields.add("tracefs_events")
    return fields


def test_root_only_fields_come_from_the_helper(sudo_user: SudoUser, user_dir: Path) -> None:
    expected = _root_only_here()
    if not expected:
        pytest.skip("nothing on this machine is readable by root only")
    r = run_sudo(sudo_user, ["env", "probe", "-o", "env.json"], user_dir)
    assert r.returncode == 0, r.stderr[-2000:]
    snap = json.loads((user_dir / "env.json").read_text())
    for name in expected:
        leaf = snap["host"][name]
        assert leaf["state"] == "ok", leaf
        assert "read by the privileged helper as root" in leaf["source"], leaf
    assert snap["probe"]["fields_needing_root"]["value"] == []
    assert snap["probe"]["is_root"]["value"] is False  # the snapshot itself was taken as the user
