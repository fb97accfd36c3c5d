"""bpftrace's output buffering (aorta_tui/trace/runner.py): block-buffered output still delivers
every heartbeat at once when the program pads after it, and a program that does not pad runs
line-buffered (real bpftrace)."""

from __future__ import annotations

import time

from aorta_tui.trace import program
from aorta_tui.trace.runner import BpftraceRunner

HB = 'interval:ms:100 {{ printf("@H %lld\\n", nsecs); {pad} }}\n'


def _first_heartbeats(bpftrace: str, text: str, block: bool) -> tuple[float, int]:
    got: list[str] = []
    r = BpftraceRunner(text, bpftrace=bpftrace, on_lines=got.extend, block_buffered=block)
    t0 = time.monotonic()
    r.start()
    try:
        r.wait_attached(20)
        first = time.monotonic() - t0
        time.sleep(0.6)
        return first, sum(ln.startswith("@H ") for ln in got)
    finally:
        r.stop()
        r.cleanup()


def test_padded_heartbeats_arrive_at_once_block_buffered(bpftrace: str) -> None:
    first, n = _first_heartbeats(bpftrace, HB.format(pad=program.FLUSH_PAD), block=True)
    # bpftrace's start-up takes ~1-2 s here; unpadded, 20-byte heartbeats would need ~20 s to
    # fill a 4 KiB buffer
    assert first < 10 and n >= 3


def test_a_program_without_padding_is_line_buffered_by_default(bpftrace: str) -> None:
    first, n = _first_heartbeats(bpftrace, HB.format(pad=""), block=False)
    assert first < 10 and n >= 3
