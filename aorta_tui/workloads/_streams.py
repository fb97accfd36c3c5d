"""Named streams and events for the race reproducer: real GPU streams, or a CPU emulation.

Both backends take the same calls: ``submit(stream, fn)`` enqueues work, ``record(stream)``
returns an event that completes when the stream's earlier work has, ``wait(stream, event)``
makes later work on ``stream`` start only after ``event``, and ``finish()`` runs everything.

On a GPU, ``submit`` launches ``fn`` under ``torch.cuda.stream``; the device decides the
interleaving. A CPU runs ops synchronously, so a missing wait would never show. The emulation
queues every op and ``finish()`` runs them adversarially: it always advances the most
downstream stream (the one whose work was submitted last) that is not blocked by a wait. Where
a wait is missing the consumer therefore runs before its producer and reads the buffer's
previous contents: the worst interleaving a GPU may pick, made certain. It proves the
reproducer notices that outcome; it says nothing about how often a GPU picks it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where a workload runs, not to list it
    import torch

STREAMS = ("h2d", "comm", "compute", "verify")


class _EmulatedEvent:
    def __init__(self) -> None:
        self.done = False


class EmulatedStreams:
    def __init__(self) -> None:
        self.queues: dict[str, deque[tuple[str, Any, int]]] = {n: deque() for n in STREAMS}
        self._seq = 0

    def _put(self, stream: str, kind: str, item: Any) -> None:
        self._seq += 1
        self.queues[stream].append((kind, item, self._seq))

    def submit(self, stream: str, fn: Callable[[], Any]) -> None:
        self._put(stream, "op", fn)

    def record(self, stream: str) -> _EmulatedEvent:
        ev = _EmulatedEvent()
        self._put(stream, "record", ev)
        return ev

    def wait(self, stream: str, event: _EmulatedEvent) -> None:
        self._put(stream, "wait", event)

    def delay(self, stream: str, microseconds: int) -> None:
        """No-op: the emulation already makes every unprotected producer as late as it can be."""

    def finish(self) -> None:
        # the stream whose work was submitted last is the furthest downstream: it goes first
        order = sorted((q[-1][2], name) for name, q in self.queues.items() if q)
        priority = [name for _, name in reversed(order)]
        while any(self.queues.values()):
            for name in priority:
                q = self.queues[name]
                if not q or (q[0][0] == "wait" and not q[0][1].done):
                    continue
                kind, item, _ = q.popleft()
                if kind == "op":
                    item()
                elif kind == "record":
                    item.done = True
                break
            else:
                heads = {n: q[0][0] for n, q in self.queues.items() if q}
                raise RuntimeError(f"emulated streams deadlocked (heads: {heads})")


class GpuStreams:
    def __init__(self, device: torch.device) -> None:
        import torch

        self.torch = torch
        self.device = device
        self.streams = {name: torch.cuda.Stream(device) for name in ("h2d", "comm", "compute")}
        self.streams["verify"] = torch.cuda.current_stream(device)
        props = torch.cuda.get_device_properties(device)
        # clock_rate is in kHz where torch exposes it; 1.5 GHz is a fair guess elsewhere
        self.cycles_per_us = int(getattr(props, "clock_rate", 1_500_000) / 1000) or 1500

    def submit(self, stream: str, fn: Callable[[], Any]) -> None:
        with self.torch.cuda.stream(self.streams[stream]):
            fn()

    def record(self, stream: str) -> torch.cuda.Event:
        ev = self.torch.cuda.Event()
        ev.record(self.streams[stream])
        return ev

    def wait(self, stream: str, event: torch.cuda.Event) -> None:
        self.streams[stream].wait_event(event)

    def delay(self, stream: str, microseconds: int) -> None:
        if microseconds > 0:
            with self.torch.cuda.stream(self.streams[stream]):
                self.torch.cuda._sleep(microseconds * self.cycles_per_us)

    def finish(self) -> None:
        """Work is already queued on the device; the caller synchronises when it reads results."""
