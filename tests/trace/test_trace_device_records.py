"""The collector's wire format (aorta_tui/trace/device/records.py): 64-byte records, parsed in
bulk; bad magic or version is counted, a partial trailing record is kept for the next read."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.trace.device.records import (
    MAGIC,
    RECORD_BYTES,
    VERSION,
    Rec,
    describe_error,
    pack,
    parse,
)

U64 = (1 << 64) - 1


def test_pack_is_64_bytes_in_the_c_layout() -> None:
    raw = pack(Rec.KERNEL, 4242, 7, 1000, 2000, (3 << 32) | 1, 9, 0)
    assert len(raw) == RECORD_BYTES
    magic, version, kind, pid, *f = struct.unpack("<HBBI7Q", raw)
    assert (magic, version, kind, pid) == (MAGIC, VERSION, int(Rec.KERNEL), 4242)
    assert f == [7, 1000, 2000, (3 << 32) | 1, 9, 0, 0]


def test_round_trip_splits_by_type_and_keeps_every_field() -> None:
    data = (pack(Rec.HELLO, 1, 130000, 100, 1 << 17, 1, 1) + pack(Rec.LAUNCH, 1, 11, 5, 900, 0xABC, 7 | (1 << 32))
            + pack(Rec.KERNEL, 1, 5, 1000, 2000, 0, 3, 0) + pack(Rec.LAUNCH, 2, 12, 6, 901, 0xDEF, 7 | (1 << 32))
            + pack(Rec.BYE, 1, 1, 2, 3, 4, 5, 6, 7) + pack(Rec.KERNEL, 1, U64, U64, U64, U64, U64, U64, U64))
    p = parse(data)
    assert p.malformed == 0 and p.rest == b""
    assert sorted(p.by_type) == [int(Rec.HELLO), int(Rec.LAUNCH), int(Rec.KERNEL), int(Rec.BYE)]
    launches = p.of(Rec.LAUNCH)
    assert launches["pid"].tolist() == [1, 2]
    assert launches["f"][:, 1].tolist() == [5, 6]
    assert launches["f"][:, 4].tolist() == [7 | (1 << 32)] * 2
    kernels = p.of(Rec.KERNEL)
    assert kernels["f"][0].tolist() == [5, 1000, 2000, 0, 3, 0, 0]
    assert kernels["f"][1].tolist() == [U64] * 7  # full 64-bit range survives
    assert p.of(Rec.BYE)["f"][0].tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert len(p.of(Rec.MEMCPY)) == 0  # an absent type is an empty array, not a KeyError


def test_wrong_magic_or_version_is_counted_and_dropped() -> None:
    good = pack(Rec.KERNEL, 1, 1, 2, 3)
    bad_magic = b"\x00\x00" + good[2:]
    bad_version = good[:2] + bytes([VERSION + 1]) + good[3:]
    p = parse(good + bad_magic + bad_version + good)
    assert p.malformed == 2
    assert len(p.of(Rec.KERNEL)) == 2


def test_partial_trailing_record_is_kept_in_rest_and_completes_on_the_next_read() -> None:
    a, b = pack(Rec.LAUNCH, 3, 1, 2, 3), pack(Rec.KERNEL, 3, 2, 10, 20)
    cut = 17
    first = parse(a + b[:cut])
    assert len(first.of(Rec.LAUNCH)) == 1 and len(first.of(Rec.KERNEL)) == 0
    assert first.rest == b[:cut]
    second = parse(first.rest + b[cut:])
    assert second.rest == b"" and second.of(Rec.KERNEL)["f"][0, :3].tolist() == [2, 10, 20]


def test_describe_error_is_a_sentence_for_known_and_unknown_codes() -> None:
    assert describe_error(39, 1) == ("cuptiSubscribe failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED "
                                     "(another profiler already uses CUPTI in this process)")
    assert describe_error(12345, 77) == "step 77 failed: CUptiResult 12345"


_records = st.builds(lambda k, pid, f: pack(k, pid, *f), st.sampled_from(list(Rec)),
                     st.integers(0, (1 << 32) - 1), st.lists(st.integers(0, U64), max_size=7))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(st.one_of(st.binary(max_size=200), _records), max_size=12), split=st.integers(0, 2000))
def test_any_bytes_parse_without_raising_and_counts_add_up(attack_tally, chunks: list[bytes], split: int) -> None:
    """Arbitrary byte strings (garbage mixed with real records): parse never raises; good plus
    malformed records equal the whole records read; the rest is shorter than one record; and a
    stream split at any point parses to the same records as the whole."""
    data = b"".join(chunks)
    failed = 1
    try:
        p = parse(data)
        whole = len(data) // RECORD_BYTES
        good = sum(len(a) for a in p.by_type.values())
        assert good + p.malformed == whole
        assert len(p.rest) == len(data) % RECORD_BYTES < RECORD_BYTES
        # in two reads (as the channel does): same records
        cut = min(split, len(data))
        p1 = parse(data[:cut])
        p2 = parse(p1.rest + data[cut:])
        assert p1.malformed + p2.malformed == p.malformed
        for t, arr in p.by_type.items():
            both = [r.tobytes() for r in p1.by_type.get(t, [])] + [r.tobytes() for r in p2.by_type.get(t, [])]
            assert both == [r.tobytes() for r in arr]
        failed = 0
    finally:
        attack_tally.record("device record parser fuzzer", cases=1, failures=failed,
                            promise="never raises; good + malformed == whole records; split reads agree")
