"""LatestRead: one read at a time, the newest request wins (pure bookkeeping, no app)."""

from __future__ import annotations

from aorta_tui.tui.screens.latest_read import LatestRead


def _reads() -> tuple[LatestRead[str], list[str]]:
    started: list[str] = []  # the keys a worker was started for, in order
    return LatestRead(started.append), started


def test_a_request_starts_one_read_at_once() -> None:
    reads, started = _reads()
    reads.want("a")
    assert started == ["a"] and reads.reading is True


def test_a_second_request_while_one_reads_starts_no_second_worker() -> None:
    reads, started = _reads()
    reads.want("a")
    reads.want("b")  # a second key press while "a" is read (a stalled filesystem)
    assert started == ["a"]
    assert reads.wanted == "b"


def test_an_answer_still_wanted_is_applied_and_nothing_more_is_read() -> None:
    reads, started = _reads()
    reads.want("a")
    assert reads.answered("a") is True
    assert reads.reading is False and reads.wanted is None
    assert started == ["a"]


def test_an_outdated_answer_is_dropped_and_only_the_newest_request_is_read_next() -> None:
    reads, started = _reads()
    reads.want("a")
    reads.want("b")
    reads.want("c")  # only the newest counts: "b" is never read
    assert reads.answered("a") is False
    assert started == ["a", "c"] and reads.reading is True
    assert reads.answered("c") is True
    assert started == ["a", "c"]


def test_a_dropped_request_applies_no_answer_and_reads_nothing_again() -> None:
    reads, started = _reads()
    reads.want("a")
    reads.drop()  # e.g. the cursor left every trial
    assert reads.answered("a") is False
    assert started == ["a"] and reads.reading is False


def test_after_an_answer_a_new_request_reads_again() -> None:
    reads, started = _reads()
    reads.want("a")
    reads.answered("a")
    reads.want("a")  # the same key again (a running trial's tail, every second)
    assert started == ["a", "a"]


def test_a_falsy_key_is_a_request() -> None:
    started: list[int] = []
    reads: LatestRead[int] = LatestRead(started.append)  # a tail of 0 lines is still asked for
    reads.want(0)
    assert started == [0]
    assert reads.answered(0) is True
