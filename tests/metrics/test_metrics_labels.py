"""Label values: the bundle's secret rules apply, the series count stays bounded; and the
classic buckets never count a value above their bound."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.metrics.buckets import BYTES, SECONDS, rebucket
from aorta_tui.metrics.labels import MAX_KEYS, MAX_LABEL_CHARS, LabelSanitiser, capped
from aorta_tui.trace.hdr import LogLinearHistogram

SANITISE = LabelSanitiser()
TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"  # GitHub's token format (detect-secrets)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_a_token_inside_a_label_never_survives(before: str, after: str) -> None:
    out = SANITISE(f"{before} {TOKEN} {after}")
    assert TOKEN not in out and len(out) <= MAX_LABEL_CHARS
    assert all(ch.isprintable() for ch in out)


def test_paths_home_dirs_and_secret_assignments_are_scrubbed() -> None:
    assert "alice" not in SANITISE("/home/alice/run")
    assert "/opt/models/llama" not in SANITISE("/opt/models/llama")
    assert "hunter2hunter2" not in SANITISE("API_TOKEN=hunter2hunter2")
    assert "u:p4ssw0rd" not in SANITISE("https://u:p4ssw0rd@example.com/x")
    assert SANITISE("0x7f00aa") == "0x7f00aa" and SANITISE("21531") == "21531"  # stream, ioctl cmd


@given(st.lists(st.tuples(st.text(min_size=1, max_size=6), st.integers(0, 10**6)),
                unique_by=lambda kv: kv[0], max_size=80))
def test_keys_are_capped_and_none_is_lost(items: list[tuple[str, int]]) -> None:
    kept, rest = capped(items)
    assert len(kept) + (1 if rest else 0) <= MAX_KEYS
    assert sorted(kept + rest) == sorted(k for k, _ in items)
    if rest:  # the busiest are the ones kept
        counts = dict(items)
        assert min(counts[k] for k in kept) >= max(counts[k] for k in rest)


@given(st.lists(st.integers(0, 20_000_000_000), min_size=1, max_size=300))
def test_classic_buckets_count_no_value_above_their_bound(values: list[int]) -> None:
    h = LogLinearHistogram()
    h.add_array(np.array(values, dtype=np.int64))
    cum = rebucket(h.counts, SECONDS, 1e9)
    v = np.array(values)
    assert cum[-1] == len(values)  # +Inf holds every value
    for bound, c in zip(SECONDS, cum, strict=False):
        b = bound * 1e9
        # never a value above the bound; every value at least one HDR bucket (6.25 %) below it
        assert int((v * 17 / 16 <= b).sum()) <= c <= int((v <= b).sum())


@given(st.lists(st.integers(0, 1 << 33), min_size=1, max_size=100))
def test_byte_buckets_are_cumulative(values: list[int]) -> None:
    h = LogLinearHistogram()
    h.add_array(np.array(values, dtype=np.int64))
    cum = rebucket(h.counts, BYTES, 1.0)
    assert cum == sorted(cum) and cum[-1] == len(values)
