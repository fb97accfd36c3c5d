"""The classifier's stream scan (issue 27 item 16): the same hits however the bytes arrive.

The supervisor hands a trial's output to ``StreamScanner`` in whatever chunks the pipe gives;
``scan_file`` feeds it a file's blocks. Property: for any text (planted error lines, long lines,
bytes that are not UTF-8, ``\\r``) and any way of cutting it into chunks, the first hit's line
number, evidence and the count are those of the text fed whole, and the planted line's number
is right. Memory stays bounded: the scanner never holds more than about two blocks.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.classify.patterns import LOG_PATTERNS
from aorta_tui.classify.scan import Matcher, StreamScanner, scan_block
from aorta_tui.classify.tiers import _builtin_matcher

BLOCK = 256  # small blocks, so that texts of a few kB cross many block boundaries
ERROR = b"RuntimeError: CUDA error: an illegal memory access was encountered"
BY_ID = {p.id: p for p in LOG_PATTERNS}


def _matchers() -> list[Matcher]:
    return [_builtin_matcher(BY_ID[i]) for i in ("illegal_memory_access", "cuda_error")]


def _scan(chunks: list[bytes]) -> list[tuple[int | None, str | None, int]]:
    matchers = _matchers()
    scanner = StreamScanner("stdout", matchers, block_bytes=BLOCK)
    for chunk in chunks:
        scanner.feed(chunk)
        assert len(scanner._carry) < 2 * BLOCK + max(len(c) for c in chunks)  # bounded
    scanner.close()
    assert scanner.scanned == sum(map(len, chunks))
    return [(m.first.line_no if m.first else None, m.first.evidence if m.first else None, m.count)
            for m in matchers]


filler = st.lists(st.one_of(
    st.binary(max_size=120).map(lambda b: b.replace(b"\n", b" ")),
    st.just(b"x" * 700),  # a line longer than a block: cut into pieces
    st.just(b"progress 10%\rprogress 20%"),
    st.just(b"\xff\xfe not utf-8"),
), max_size=40)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(before=filler, after=filler, cuts=st.lists(st.integers(min_value=1, max_value=600),
                                                  min_size=1, max_size=30))
def test_any_chunking_finds_the_planted_error_on_its_line(attack_tally, before: list[bytes],
                                                          after: list[bytes],
                                                          cuts: list[int]) -> None:
    lines = [*before, ERROR, *after]
    text = b"\n".join(lines) + b"\n"
    chunks, pos, k = [], 0, 0
    while pos < len(text):
        step = cuts[k % len(cuts)]
        chunks.append(text[pos:pos + step])
        pos, k = pos + step, k + 1
    whole = _scan([text])
    same = _scan(chunks) == whole
    attack_tally.record("stream scan chunkings (hypothesis)", cases=1, failures=int(not same),
                        promise="any chunking: the same first hit, line and count as whole")
    assert same
    planted = len(before) + 1
    line_no, evidence, count = whole[0]
    # a filler line longer than a block can hide nothing, and the error line is short
    assert line_no == planted and "illegal memory access" in (evidence or "") and count >= 1


def test_scan_block_counts_every_matching_line() -> None:
    matchers = _matchers()
    text = ("ok\n" + ERROR.decode() + "\nok\n" + ERROR.decode() + "\n")
    scan_block(text, 10, "stdout", matchers)
    assert matchers[0].first is not None and matchers[0].first.line_no == 11
    assert matchers[0].count == 2
