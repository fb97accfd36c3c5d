"""An interrupt inside the one checked open (core/inputs.py) closes the file once.

CI saw ``aorta-tui bundle`` interrupted by SIGINT exit 3 ("cannot write the bundle: Bad file
descriptor") instead of 130: the KeyboardInterrupt landed inside ``os.fdopen`` after its file
object had taken the descriptor, and ``open_input``'s clean-up closed the descriptor a second
time. The interrupt is placed there deterministically here, with the real ``os.fdopen`` doing
its part first.
"""

from __future__ import annotations

import os

import pytest

from aorta_tui.core.inputs import open_input


def _fdopen_then_interrupted(opened_meanwhile: list[int]):
    real = os.fdopen

    def fdopen(fd: int, *args, **kwargs):
        real(fd, *args, **kwargs).close()  # the file object took fd and closed it, as when dropped
        # the number is free again: another thread's open gets it (here: this one's)
        opened_meanwhile.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        raise KeyboardInterrupt

    return fdopen


def test_an_interrupt_inside_fdopen_stays_an_interrupt_and_closes_nothing_else(tmp_path, monkeypatch):
    target = tmp_path / "input.txt"
    target.write_bytes(b"data\n")
    opened: list[int] = []
    monkeypatch.setattr(os, "fdopen", _fdopen_then_interrupted(opened))
    with pytest.raises(KeyboardInterrupt):
        open_input(target, what="file", follow_symlinks=False)
    monkeypatch.undo()
    assert len(opened) == 1
    try:
        os.fstat(opened[0])  # still open: the clean-up did not close the reused number
    finally:
        os.close(opened[0])

