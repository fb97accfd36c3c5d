from __future__ import annotations

import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.trace.parser import RecordParser, parse_aggregate_line

ints = st.integers(min_value=-(1 << 62), max_value=(1 << 62))
label = st.one_of(st.just("-"), st.from_regex(r"[a-z_0-9.]{1,12}( [a-z]{1,5})?", fullmatch=True))
record = st.tuples(st.integers(0, 20), ints, st.integers(0, 1 << 22), st.integers(0, 1 << 22), ints, ints, ints, label)
junk = st.sampled_from(["@R 1 2 3\n", "@R a b c d e f g h\n", "hello\n", "@H notanumber\n", "@R 1 2 3 4 5 6 7 \n"])


def fmt(r) -> str:
    return "@R " + " ".join(str(x) for x in r[:7]) + f" {r[7]}\n"


@given(st.lists(st.one_of(record.map(lambda r: ("ok", r)), junk.map(lambda j: ("bad", j))), max_size=60))
def test_parser_keeps_every_good_record_and_counts_every_bad_line(items) -> None:
    lines = [fmt(x) if kind == "ok" else x for kind, x in items]
    good = [x for kind, x in items if kind == "ok"]
    p = RecordParser()
    b = p.feed(lines)
    assert b.malformed == len(items) - len(good)
    assert len(b) == len(good)
    # order within the fast path is kept; compare as multisets to allow the slow path's append
    got = sorted(zip(b.metric.tolist(), b.ts.tolist(), b.pid.tolist(), b.tid.tolist(),
                     b.key.tolist(), b.value.tolist(), b.aux.tolist(),
                     b.labels if b.labels is not None else ["-"] * len(b), strict=False))
    assert got == sorted(tuple(g) for g in good)


def test_control_lines_are_understood() -> None:
    p = RecordParser()
    b = p.feed(["Attaching 3 probes...\n", "@H 123456\n", "@sent[1]: 42\n", "@sent[2]: 0\n", "\n",
                "Lost 17 events\n", "@R 1 10 20 21 5 6 7 -\n"])
    assert b.heartbeats == [123456]
    assert b.sent == {1: 42, 2: 0}
    assert b.lost == 17 and p.lost_total == 17
    assert b.malformed == 0
    assert b.ts.tolist() == [10] and b.labels is None


def test_labels_with_spaces_fall_back_to_the_slow_path() -> None:
    b = RecordParser().feed(["@R 3 1 2 3 4 5 6 GPU has fallen off the bus\n", "@R 3 2 2 3 4 5 6 -\n"])
    assert len(b) == 2 and b.malformed == 0
    assert sorted(b.labels) == ["-", "GPU has fallen off the bus"]


def test_fast_path_handles_large_batches() -> None:
    n = 50_000
    lines = [f"@R 1 {i} 7 8 {i % 5} {i * 3} 0 -\n" for i in range(n)]
    b = RecordParser().feed(lines)
    assert len(b) == n
    assert np.array_equal(b.value, np.arange(n) * 3)


def test_aggregate_json_lines_fold_into_state() -> None:
    state: dict = {}
    p = RecordParser()
    for obj in (
        {"type": "attached_probes", "data": {"probes": 3}},
        {"type": "printf", "data": "@H 99\n"},
        {"type": "map", "data": {"@sent": {"0": 1, "1": 10}}},
        {"type": "map", "data": {"@lh": {"1,100": 4, "1,101": 6}}},
        {"type": "map", "data": {"@n": {"1,4096": 7, "1,4097": 3}}},
        {"type": "map", "data": {"@nl": {"2,gfx_0.0.0": 5}}},
        {"type": "lost_events", "data": {"events": 2}},
    ):
        parse_aggregate_line(json.dumps(obj), state, p)
    parse_aggregate_line("{not json", state, p)
    assert state["sent"] == {0: 1, 1: 10}
    assert state["lh"] == {1: {100: 4, 101: 6}}
    assert state["n"] == {1: {4096: 7, 4097: 3}}
    assert state["nl"] == {2: {"gfx_0.0.0": 5}}
    assert state["lost"] == 2 and state["heartbeats"] == [99]
    assert p.malformed_total == 1


def test_flush_padding_lines_are_skipped_not_malformed() -> None:
    from aorta_tui.trace.program import PAD_BYTES

    pad = "@P " + "." * PAD_BYTES + "\n"
    p = RecordParser()
    b = p.feed(["@R 1 10 20 21 5 6 7 -\n", "@H 99\n", pad, "@R 1 11 20 21 5 6 7 -\n", pad])
    assert len(b) == 2 and b.heartbeats == [99] and b.malformed == 0 and p.malformed_total == 0
