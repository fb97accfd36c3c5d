"""The one read of every input file: its bytes kept aside, learned from, then scrubbed.

A run may still be written while it is bundled (a trial that still prints). Each file is read
once (:mod:`aorta_tui.bundle.fsread`, through descriptors); those exact bytes are what the
scanner learns from and what the archive receives after redaction, so a line printed after
the read is in neither, and a line printed before it is in both. The bytes wait in an
unnamed temporary file (mode 0600, unlinked at once; memory up to :data:`SPOOL_IN_MEMORY`),
not in memory, so a large run does not need its size in RAM.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from aorta_tui.bundle.fsread import Found, read_one, shown_name, walk_files


class GatherInput(Protocol):
    """What gathering reads of an input (``archive.GatherInput`` fills it; declared here so
    that this module does not import the one that imports it)."""

    @property
    def path(self) -> Path: ...
    @property
    def kind(self) -> str: ...  # run | policy-sweep | queue-result
    @property
    def name(self) -> str: ...

MiB = 1024 * 1024
# The most of one file a bundle reads, counted in logical bytes (st_size, then bytes read):
# a larger file, sparse or not, is listed as skipped without being read. A trial's log is
# bounded at 64 MiB plus its marker.
MAX_FILE_BYTES = 256 * MiB
SPOOL_IN_MEMORY = 32 * MiB


@dataclass
class Gathered:
    """One entry of an input as read: where its bytes wait in the spool, or why it is out."""

    inp: GatherInput
    rel: str
    offset: int = -1
    size: int = 0
    skipped: str | None = None
    mode: int = 0o644
    mtime: float = 0.0


class Spool:
    """Bytes kept aside in one temporary file, read back by (offset, size)."""

    def __init__(self) -> None:
        self._fh = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115
        self._end = 0

    def put(self, data: bytes) -> int:
        self._fh.seek(self._end)
        self._fh.write(data)
        offset, self._end = self._end, self._end + len(data)
        return offset

    def get(self, offset: int, size: int) -> bytes:
        self._fh.seek(offset)
        return self._fh.read(size)

    def close(self) -> None:
        self._fh.close()


def owner_of(inp: GatherInput) -> os.stat_result:
    """Whose the input is: the run directory's (or the queue result file's) owner, device."""
    return os.stat(inp.path)


def found_in(inp: GatherInput, owner: os.stat_result) -> Iterator[Found]:
    if inp.kind == "queue-result":
        yield read_one(os.fspath(inp.path), owner, MAX_FILE_BYTES)
        return
    yield from walk_files(os.path.realpath(inp.path), owner, MAX_FILE_BYTES)


def gather(inputs: Sequence[GatherInput], spool: Spool,
           skip: Callable[[GatherInput, str], str | None]) -> Iterator[tuple[Gathered,
                                                                                 bytes | None]]:
    """Every entry of every input, read once: (its record, its bytes or None). ``skip(inp,
    rel)`` names an entry that is never read (the run's secret hashes)."""
    import stat

    for inp in inputs:
        owner = owner_of(inp)
        for found in found_in(inp, owner):
            rel = shown_name(found.rel)
            why = skip(inp, found.rel)
            if why is not None:
                yield Gathered(inp, rel, skipped=why), None
                continue
            if found.data is None:
                yield Gathered(inp, rel, skipped=found.skipped), None
                continue
            assert found.st is not None
            entry = Gathered(inp, rel, spool.put(found.data), len(found.data),
                             mode=stat.S_IMODE(found.st.st_mode), mtime=found.st.st_mtime)
            yield entry, found.data
