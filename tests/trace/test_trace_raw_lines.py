"""--raw's JSON lines (session.raw_lines) are byte for byte what json.dumps writes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.trace.session import raw_lines

I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
NAMES = {1: ("cuda", "launch", "point"), 2: ("drm_sched", "queue_to_run", "duration"),
         3: ('we"ird', "m\\é", "count")}
ROW = st.tuples(st.sampled_from([1, 2, 3, 99]), I64, I64, st.none() | I64, I64, I64, st.none() | I64,
                st.none() | st.text(max_size=20))


def _reference(rows: list[tuple]) -> str:
    out = []
    for m, t, p, d, k, v, a, lb in rows:
        ps, mn, kind = NAMES.get(m, ("?", "?", "point"))
        out.append(json.dumps({"set": ps, "metric": mn, "kind": kind, "ts_ns": t, "pid": p, "tid": d, "key": k,
                               "value": v, "aux": a, "label": lb}, separators=(",", ":")))
    return "\n".join(out) + "\n" if out else ""


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=200, deadline=None)
@given(st.lists(ROW, max_size=30))
def test_raw_lines_equal_json_dumps(attack_tally, rows: list[tuple]) -> None:
    cols = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in range(8)]
    failed = 1
    try:
        got = raw_lines(NAMES, *cols)
        assert got == _reference(rows)
        for ln in got.splitlines():
            json.loads(ln)
        failed = 0
    finally:
        attack_tally.record("raw JSON lines property", cases=1, failures=failed,
                            promise="--raw lines equal json.dumps byte for byte")
