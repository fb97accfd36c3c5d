"""One read at a time, the newest request wins: the bookkeeping of a screen's read worker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")


class LatestRead(Generic[K]):
    """What a screen asked its read worker for (``wanted``), and whether a read runs now.

    Why: the reads behind a key press (a run, a recipe, a log tail, two snapshots) may sit on a
    network filesystem that stalls. A thread worker cannot be stopped, so a second key press must
    never start a second worker (threads would pile up behind the stalled one): it only records
    what is wanted now. The read under way always answers; its answer is applied only when it is
    still what is wanted, else the newest request is read next.

    ``read(key)`` starts the worker for ``key`` (it must always answer, even when it fails); the
    answer's handler calls ``answered(key)`` first. A key is never None (None: nothing wanted).
    """

    def __init__(self, read: Callable[[K], None]) -> None:
        self._read = read
        self.wanted: K | None = None  # the newest request, until its answer is applied
        self.reading = False  # a worker reads now; its answer clears this

    def want(self, key: K) -> None:
        """Ask for ``key``: read now, or once the read under way has answered (it is not stopped)."""
        self.wanted = key
        self._start()

    def drop(self) -> None:
        """Nothing is wanted any more: an answer still to come is not applied."""
        self.wanted = None

    def answered(self, key: K) -> bool:
        """The answer for ``key`` came. True: it is still what is wanted, apply it (nothing is
        wanted any more). False: drop it; what was asked for meanwhile (if anything) is read now."""
        self.reading = False
        if key == self.wanted:
            self.wanted = None
            return True
        self._start()
        return False

    def _start(self) -> None:
        if self.wanted is None or self.reading:
            return  # the read under way answers first; ``answered`` reads what is wanted then
        self.reading = True
        self._read(self.wanted)
