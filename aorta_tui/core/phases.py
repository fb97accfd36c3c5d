"""Phases a workload announces to a tracer that watches it (warm-up, measure, detail...).

A tracer's interval metrics (``cuda.launch``: the gap between consecutive launches on a
stream) would otherwise count the pause between two passes of a ``queue run`` -- set-up,
clock calibration, starting the profiler -- as one long "interval" (a 5.49 s max on the H200).
The tracer leaves out every interval that spans a phase boundary and shows the phase.

The protocol is one datagram per phase change on the Unix datagram socket named by
``$AORTA_TUI_PHASE_SOCKET`` (the TUI's trace worker binds it in a private directory and
passes the variable to the command it traces)::

    phase NAME CLOCK_MONOTONIC_NS

``NAME`` is ``[a-z][a-z0-9_-]*`` (at most 32 characters); ``pause`` means "between phases".
The time is ``time.monotonic_ns()`` when the phase begins: the clock bpftrace's ``nsecs``
reads, so it compares with record timestamps directly. Announcing never blocks and never
fails the workload: with no variable, no listener or a full queue the datagram is dropped.
Any program can announce its own phases the same way.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable

from aorta_tui.core.numerals import ascii_digits

PHASE_SOCKET_ENV = "AORTA_TUI_PHASE_SOCKET"
PAUSE = "pause"
MAX_DATAGRAM = 128
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def announce(phase: str) -> None:
    """Tell a watching tracer that ``phase`` begins now (a no-op when nobody listens)."""
    path = os.environ.get(PHASE_SOCKET_ENV)
    if not path:
        return
    message = f"phase {phase} {time.monotonic_ns()}\n".encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(message, path)
    except OSError:
        pass  # no listener (it stopped), queue full: the workload must not notice


def parse_announcement(data: bytes) -> tuple[str, int] | None:
    """``(name, t_ns)`` of a well-formed datagram, else None (a stray datagram is ignored)."""
    if len(data) > MAX_DATAGRAM:
        return None
    try:
        words = data.decode("ascii").split()
    except UnicodeDecodeError:
        return None
    if len(words) != 3 or words[0] != "phase" or not _NAME.fullmatch(words[1]):
        return None
    if not ascii_digits(words[2]) or len(words[2]) > 20:
        return None
    t_ns = int(words[2])
    return (words[1], t_ns) if t_ns < 1 << 63 else None


class PhaseListener:
    """Binds the phase socket in a private directory; calls ``on_phase(name, t_ns)`` per
    announcement from its own thread. ``env`` is what the traced command needs."""

    def __init__(self, on_phase: Callable[[str, int], None]) -> None:
        self._on_phase = on_phase
        self._dir = tempfile.mkdtemp(prefix="aorta-phases-")  # 0700: only we (and root) send
        self.path = os.path.join(self._dir, "phases.sock")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self._sock.settimeout(0.2)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="phase-listener", daemon=True)
        self._thread.start()

    @property
    def env(self) -> dict[str, str]:
        return {PHASE_SOCKET_ENV: self.path}

    def _loop(self) -> None:
        while not self._closed.is_set():
            try:
                data = self._sock.recv(MAX_DATAGRAM + 1)
            except TimeoutError:
                continue
            except OSError:
                return
            parsed = parse_announcement(data)
            if parsed is not None:
                self._on_phase(*parsed)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(2)
        with contextlib.suppress(OSError):
            self._sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)
