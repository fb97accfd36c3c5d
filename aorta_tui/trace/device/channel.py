"""The FIFO the collector writes into, and the thread that reads it.

The session creates the FIFO in a private folder (mode 0700) and opens its read end *before*
the traced program starts, so the collector's non-blocking open finds a reader. The session
also holds a write end of its own: a FIFO with no writer reads as end-of-file, and programs
open and close theirs at their own pace (one per CUDA process).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from aorta_tui.trace.device.records import Parsed, parse

F_SETPIPE_SZ = 1031
PIPE_BYTES = 16 << 20  # ~250k records: seconds of slack at 100k launches/s
READ_BYTES = 4 << 20


class DeviceChannel:
    def __init__(self, on_records: Callable[[Parsed], None]) -> None:
        self.on_records = on_records
        self._dir = Path(tempfile.mkdtemp(prefix="aorta-cupti-"))  # mkdtemp makes it 0700
        self.path = self._dir / "records.fifo"
        os.mkfifo(self.path, 0o600)
        self._rfd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self._wfd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self.pipe_bytes: int | None = None
        for size in (PIPE_BYTES, 1 << 20):  # 1 MiB: /proc/sys/fs/pipe-max-size for non-root
            with contextlib.suppress(OSError):
                self.pipe_bytes = fcntl.fcntl(self._rfd, F_SETPIPE_SZ, size)
                break
        self.bytes_read = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._rest = b""
        # AORTA_CUPTI_RECORD=FILE keeps every byte read (recorded fixtures for CPU-side tests)
        rec = os.environ.get("AORTA_CUPTI_RECORD")
        self._record = open(rec, "ab") if rec else None  # noqa: SIM115 - closed in stop()
        self._thread = threading.Thread(target=self._loop, name="cupti-reader", daemon=True)

    def env(self, library: Path) -> dict[str, str]:
        """What the traced program's environment needs for the collector to load and write."""
        return {"CUDA_INJECTION64_PATH": str(library), "AORTA_CUPTI_FIFO": str(self.path)}

    def start(self) -> None:
        self._thread.start()

    def _read_available(self) -> bool:
        got = False
        while True:
            try:
                chunk = os.read(self._rfd, READ_BYTES)
            except BlockingIOError:
                return got
            except OSError as exc:
                self.errors.append(f"reading device records failed: {exc.strerror or exc}")
                return got
            if not chunk:
                return got
            got = True
            self.bytes_read += len(chunk)
            if self._record is not None:
                self._record.write(chunk)
            parsed = parse(self._rest + chunk)
            self._rest = parsed.rest
            try:
                self.on_records(parsed)
            except Exception as exc:  # a handler bug must not stop the reading
                self.errors.append(f"device record handler failed: {type(exc).__name__}: {exc}")

    def _loop(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._rfd], [], [], 0.05)
            if ready:
                self._read_available()

    def stop(self) -> None:
        """Read what is left, then close and remove the FIFO."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._read_available()
        if self._record is not None:
            self._record.close()
        for fd in (self._wfd, self._rfd):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._dir, ignore_errors=True)
