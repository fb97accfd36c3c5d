"""Tier 3: GPU and PCIe trouble reported by the kernel while a trial ran.

:class:`KernelLog` follows the kernel log from one open file descriptor on ``/dev/kmsg``
(non-blocking; every record carries a sequence number, so "new since the trial started" is
exact and costs one ``read`` returning EAGAIN when nothing happened). Where ``/dev/kmsg``
cannot be read it falls back to running ``dmesg --raw`` (kernel timestamps as the cursor).
Where neither works (no privilege, a container), it is *unavailable* with one reason string
and tier 3 reports "not available (reason)" instead of pretending nothing happened.

Only records of the kernel facility count by default: lines that user space writes into
``/dev/kmsg`` (facility ``user``) cannot fake a GPU fault. Tests that inject lines use
``include_user=True``.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.classify.model import Pattern
from aorta_tui.core import spawn_gate


def _k(id: str, regex: str, description: str, sample: str, *more_samples: str) -> Pattern:
    return Pattern(id, re.compile(regex), "fail", description, sample, 3, (), more_samples)


KERNEL_PATTERNS: tuple[Pattern, ...] = (
    _k(
        "nvidia_xid",
        r"NVRM: Xid \((?P<device>[^)]*)\): (?P<xid>\d+)",
        "NVIDIA driver Xid error",
        "NVRM: Xid (PCI:0000:01:00): 79, pid=1234, GPU has fallen off the bus.",
    ),
    _k(
        "nvidia_fallen_off_bus",
        r"NVRM: GPU (?:at )?(?P<device>[0-9A-Za-z:.]+):? (?:GPU )?has fallen off the bus",
        "NVIDIA GPU fell off the PCIe bus",
        "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
    ),
    _k(
        "amdgpu_reset",
        r"amdgpu.*\b(?i:GPU reset)\b",
        "amdgpu reset the GPU",
        "amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!",
    ),
    _k(
        "amdgpu_sdma_timeout",
        r"\bring (?P<ring>sdma\S*) timeout|(?i:\bSDMA (?:semaphore )?timeout|\bSDMA hang\b)",
        "amdgpu SDMA (copy engine) ring timeout",
        "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=1234, emitted seq=1236",
        "amdgpu 0000:c1:00.0: amdgpu: SDMA hang detected on sdma1, resetting the engine",
        "[drm] SDMA semaphore timeout on queue 3",
    ),
    _k(
        "amdgpu_ring_timeout",
        r"\bring (?!sdma)(?P<ring>\S+) timeout",
        "amdgpu ring (queue) timeout",
        "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=99, emitted seq=101",
    ),
    _k(
        "amdgpu_vm_fault",
        r"amdgpu.*(?:\[\w*hub\d*\] (?:(?:no-)?retry )?page fault|VM_L2_PROTECTION_FAULT|VM fault"
        r"|GPU fault detected)"
        # the register dump line on its own (dmesg read without the device prefix)
        r"|\bVM_L2_PROTECTION_FAULT",
        "amdgpu GPU virtual-memory fault",
        "amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] retry page fault (src_id:0 ring:0 vmid:8 "
        "pasid:32769, for process python3 pid 4242 thread python3 pid 4242)",
        "  VM_L2_PROTECTION_FAULT_STATUS:0x00841051",
    ),
    _k(
        "amdgpu_ras_uncorrectable",
        r"amdgpu.*\b(?P<count>\d+) uncorrectable hardware errors? detected in (?P<block>\S+) block",
        "amdgpu RAS: uncorrectable hardware error (memory, XGMI, ...)",
        "amdgpu 0000:03:00.0: amdgpu: 1 uncorrectable hardware errors detected in umc block",
    ),
    _k(
        "xgmi_link_error",
        # From each "XGMI" to the next one only, so a line full of them stays linear; a healthy
        # "XGMI initialized" has none of the words.
        r"(?i)\bXGMI\b(?:(?!XGMI\b)[^\n])*?\b(?:error|fail|link down)",
        "XGMI (GPU-to-GPU link) error",
        "amdgpu 0000:0c:00.0: amdgpu: XGMI: link down between node 2 and node 3",
        "amdgpu 0000:8c:00.0: amdgpu: xgmi: failed to train link 1 (error -110)",
    ),
    _k(
        "pcie_aer_fatal",
        r"AER: .*Uncorrect\w* \(Fatal\)|\bAER:?\s+Fatal\b",
        "PCIe AER uncorrectable fatal error",
        "pcieport 0000:00:01.1: AER: Uncorrected (Fatal) error received: 0000:01:00.0",
        "pcieport 0000:40:01.1: AER: Fatal error received from 0000:41:00.0",
    ),
)

KMSG_PATH = "/dev/kmsg"
_MAX_KEPT = 4096  # matching events kept in memory for events_since
_RAW_LINE = re.compile(r"^<(?P<prio>\d+)>(?:\[\s*(?P<time>\d+\.\d+)\]\s?)?(?P<msg>.*)$")


@dataclass(frozen=True)
class KernelEvent:
    """A kernel log line matching a tier-3 pattern. ``time`` is the kernel's monotonic
    timestamp in seconds (since boot), ``seq`` the kmsg sequence number when known."""

    line: str
    tier3_id: str
    time: float | None
    captures: dict[str, Any] = field(default_factory=dict)
    seq: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "tier3_id": self.tier3_id, "time": self.time,
                "captures": dict(self.captures), "seq": self.seq}  # fmt: skip


# The kernel never logs a longer message (PRINTK_MESSAGE_MAX is 2048); the cap bounds the
# `amdgpu.*\b...` patterns, whose backtracking is quadratic in the line, whatever the source.
KERNEL_LINE_MAX = 4096


def match_kernel_line(message: str) -> tuple[Pattern, re.Match[str]] | None:
    message = message[:KERNEL_LINE_MAX]
    for pattern in KERNEL_PATTERNS:
        m = pattern.regex.search(message)
        if m is not None:
            return pattern, m
    return None


def _event(message: str, time_s: float | None, seq: int | None) -> KernelEvent | None:
    hit = match_kernel_line(message)
    if hit is None:
        return None
    pattern, m = hit
    captures = {k: v for k, v in m.groupdict().items() if v is not None}
    return KernelEvent(message.strip(), pattern.id, time_s, captures, seq)


class KernelLog:
    """Follows the kernel log; ``mark()`` before a trial, ``events_since(mark)`` after it.

    Several trials may be in flight: matching events are kept (bounded) with their cursor
    value, so any earlier mark still works. Use :meth:`open`; it never raises.
    """

    def __init__(self) -> None:
        self.unavailable: str | None = None
        self.source: str | None = None  # "/dev/kmsg" | "dmesg --raw"
        self.include_user = False
        self._fd: int | None = None
        self._last: float = -1.0  # last cursor value seen (kmsg seq or dmesg timestamp)
        self._events: deque[tuple[float, KernelEvent]] = deque(maxlen=_MAX_KEPT)
        self.records_lost = 0  # kmsg ring overwrote records before we read them

    @classmethod
    def open(cls, *, include_user: bool = False, source: str = "auto") -> KernelLog:
        """``source``: ``auto`` (kmsg, then dmesg), ``kmsg`` or ``dmesg``."""
        log = cls()
        log.include_user = include_user
        problems: list[str] = []
        if source in ("auto", "kmsg"):
            try:
                fd = os.open(KMSG_PATH, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                os.lseek(fd, 0, os.SEEK_END)  # only what happens from now on
                log._fd, log.source = fd, KMSG_PATH
                return log
            except OSError as exc:
                problems.append(f"cannot read {KMSG_PATH} ({exc.strerror or exc})")
        if source in ("auto", "dmesg"):
            try:
                lines = log._dmesg_lines()
                log.source = "dmesg --raw"
                log._last = max((t for t, _ in lines), default=-1.0)
                return log
            except RuntimeError as exc:
                problems.append(str(exc))
        log.unavailable = "; ".join(problems) + " - run as root or allow kernel.dmesg_restrict=0"
        return log

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:  # a forgotten close must not leak the descriptor
        self.close()

    def __enter__(self) -> KernelLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def mark(self) -> float:
        """A cursor: events after it belong to whatever starts now."""
        self._poll()
        return self._last

    def events_since(self, cursor: float) -> list[KernelEvent]:
        self._poll()
        return [ev for at, ev in self._events if at > cursor]

    # -- reading -----------------------------------------------------------------------------

    def _poll(self) -> None:
        if self.unavailable is not None:
            return
        if self._fd is not None:
            self._poll_kmsg()
        else:
            try:
                lines = self._dmesg_lines()
            except RuntimeError:
                return  # it worked at open; a transient failure loses nothing we keep
            for time_s, message in lines:
                if time_s > self._last:
                    self._keep(time_s, _event(message, time_s, None))
            self._last = max([self._last, *(t for t, _ in lines)])

    def _poll_kmsg(self) -> None:
        assert self._fd is not None
        while True:
            try:
                record = os.read(self._fd, 16384)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # ring overwritten past our position
                    self.records_lost += 1
                    continue
                if exc.errno == errno.EINTR:
                    continue
                return
            if not record:
                return
            self._parse_kmsg(record)

    def _parse_kmsg(self, record: bytes) -> None:
        # "prio,seq,usec,flags[,...];message\n[ KEY=value\n...]"
        head, _, rest = record.partition(b";")
        fields = head.split(b",")
        try:
            prio, seq, usec = int(fields[0]), int(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            return
        self._last = max(self._last, float(seq))
        if prio >> 3 != 0 and not self.include_user:
            return  # not from the kernel
        message = rest.split(b"\n", 1)[0].decode("utf-8", "replace")
        message = re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), message)
        self._keep(float(seq), _event(message, usec / 1e6, seq))

    def _keep(self, at: float, event: KernelEvent | None) -> None:
        if event is not None:
            self._events.append((at, event))

    def _dmesg_lines(self) -> list[tuple[float, str]]:
        # No --facility: dmesg refuses it when it reads through syslog(2), the only case in
        # which this fallback runs; the facility is filtered from the <prio> prefix instead.
        argv = ["dmesg", "--raw"]
        try:
            proc = spawn_gate.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"`dmesg --raw` could not run ({exc})") from exc
        if proc.returncode != 0:
            why = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
            raise RuntimeError(f"`dmesg --raw` failed ({why[0] if why else proc.returncode})")
        out: list[tuple[float, str]] = []
        for raw in proc.stdout.decode("utf-8", "replace").splitlines():
            m = _RAW_LINE.match(raw)
            if m is None or m.group("time") is None:
                continue  # continuation line, or printk timestamps are off (no cursor)
            if int(m.group("prio")) >> 3 != 0 and not self.include_user:
                continue  # not from the kernel
            out.append((float(m.group("time")), m.group("msg")))
        return out


__all__ = ["KERNEL_PATTERNS", "KernelEvent", "KernelLog", "match_kernel_line"]
