"""Tier 3 against the real kernel log: lines written to /dev/kmsg as root.

Lines written from user space carry the ``user`` facility, which the default KernelLog
ignores (so these tests cannot make a concurrent sweep on this machine see a fake GPU fault);
the tests read with ``include_user=True``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from aorta_tui.classify import KernelLog, classify
from aorta_tui.classify import dmesg as dmesg_mod


def _kmsg_writable() -> str | None:
    try:
        with open("/dev/kmsg", "w") as fh:
            fh.write("<6>aorta-tui test: probing /dev/kmsg write access\n")
    except OSError as exc:
        return f"/dev/kmsg is not writable here ({exc.strerror})"
    return None


_SKIP = _kmsg_writable()
needs_kmsg = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")


def write_kmsg(text: str) -> None:
    with open("/dev/kmsg", "w") as fh:
        fh.write(text + "\n")


@needs_kmsg
def test_xid_written_to_kmsg_is_an_event_after_the_mark() -> None:
    tag = uuid.uuid4().hex[:8]
    with KernelLog.open(include_user=True) as log:
        assert log.unavailable is None and log.source == "/dev/kmsg"
        write_kmsg(f"<3>aorta-test {tag} before the mark: NVRM: Xid (PCI:0000:01:00): 13, pid=1, old")
        cursor = log.mark()
        write_kmsg(f"<3>aorta-test {tag}: NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.")
        write_kmsg(f"<6>aorta-test {tag}: an unrelated kernel line")
        write_kmsg(f"<3>aorta-test {tag}: [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=1")
        events = [e for e in log.events_since(cursor) if tag in e.line]
        assert [e.tier3_id for e in events] == ["nvidia_xid", "amdgpu_sdma_timeout"]
        xid = events[0]
        assert xid.captures == {"device": "PCI:0000:01:00", "xid": "79"}
        assert xid.time is not None and xid.time > 0 and xid.seq is not None
        # A later mark excludes what came before it.
        later = log.mark()
        write_kmsg(f"<3>aorta-test {tag}: pcieport 0000:00:01.1: AER: Uncorrected (Fatal) error received")
        assert [e.tier3_id for e in log.events_since(later) if tag in e.line] == ["pcie_aer_fatal"]
        # The first cursor still sees all three (several trials may be in flight).
        assert len([e for e in log.events_since(cursor) if tag in e.line]) == 3

    c = classify(None, stdout_path=None, stderr_path=None, kernel_events=events)
    assert c.verdict == "fail" and {d.id for d in c.detections} == {"nvidia_xid", "amdgpu_sdma_timeout"}


@needs_kmsg
def test_default_log_ignores_lines_written_from_user_space() -> None:
    tag = uuid.uuid4().hex[:8]
    with KernelLog.open() as log:
        cursor = log.mark()
        write_kmsg(f"<3>aorta-test {tag}: NVRM: Xid (PCI:0000:01:00): 79, pid=1, fake")
        assert [e for e in log.events_since(cursor) if tag in e.line] == []


@needs_kmsg
@pytest.mark.skipif(shutil.which("dmesg") is None, reason="dmesg is not installed")
def test_dmesg_fallback_sees_new_lines() -> None:
    tag = uuid.uuid4().hex[:8]
    log = KernelLog.open(include_user=True, source="dmesg")
    assert log.unavailable is None and log.source == "dmesg --raw"
    cursor = log.mark()
    write_kmsg(f"<3>aorta-test {tag}: amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!")
    events = [e for e in log.events_since(cursor) if tag in e.line]
    assert [e.tier3_id for e in events] == ["amdgpu_reset"]
    assert events[0].time is not None
    assert [e for e in log.events_since(log.mark()) if tag in e.line] == []


def test_unreadable_kmsg_gives_one_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(dmesg_mod, "KMSG_PATH", str(tmp_path / "no-kmsg"))
    log = KernelLog.open(source="kmsg")
    assert log.unavailable is not None
    assert "cannot read" in log.unavailable and "no-kmsg" in log.unavailable
    assert log.mark() == log.mark()
    assert log.events_since(log.mark()) == []


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
                    reason="needs root to start a process as nobody, and /usr/bin/python3")  # fmt: skip
def test_unprivileged_process_gets_unavailable_not_an_exception() -> None:
    restrict = Path("/proc/sys/kernel/dmesg_restrict")
    if not restrict.exists() or restrict.read_text().strip() != "1":
        pytest.skip("kernel.dmesg_restrict is 0: everybody may read the kernel log here")
    repo = Path(__file__).resolve().parents[2]
    code = "from aorta_tui.classify import KernelLog; print(KernelLog.open().unavailable)"
    proc = subprocess.run(
        ["/usr/bin/python3", "-c", code], user=65534, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
        cwd="/", capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if proc.returncode != 0 and "Permission denied" in proc.stderr:
        pytest.skip(f"nobody cannot read the checkout: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr
    reason = proc.stdout.strip()
    assert "cannot read /dev/kmsg" in reason and "dmesg" in reason
    assert reason.count("\n") == 0
