from __future__ import annotations

import gzip
import json
from pathlib import Path

from aorta_tui.trace.export import RING_PID, export_perfetto, to_chrome_trace


def records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        out.append({"set": "drm_sched", "metric": "queue_to_run", "kind": "duration", "ts_ns": 1_000_000 + i * 10_000,
                    "pid": 42, "tid": 43, "key": i, "value": 5_000, "aux": 2, "label": "gfx_0.0.0" if i % 2 else "sdma0"})
        out.append({"set": "cuda", "metric": "launch", "kind": "point", "ts_ns": 1_000_500 + i * 10_000,
                    "pid": 42, "tid": 44, "key": 0x7F00, "value": 0, "aux": 0, "label": None})
    return out


def test_submit_to_dispatch_becomes_a_flow_between_thread_and_ring_tracks() -> None:
    trace = to_chrome_trace(records(10))
    ev = trace["traceEvents"]
    starts = {e["id"]: e for e in ev if e.get("ph") == "s"}
    finishes = {e["id"]: e for e in ev if e.get("ph") == "f"}
    assert set(starts) == set(finishes) and len(starts) == 10
    for fid, s in starts.items():
        f = finishes[fid]
        assert s["pid"] == 42 and f["pid"] == RING_PID
        assert f["ts"] - s["ts"] == 5.0  # microseconds: the wait
    rings = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    assert rings == {"gfx_0.0.0", "sdma0"}
    assert sum(1 for e in ev if e.get("ph") == "i") == 10  # launches are instants


def test_export_is_capped_and_says_so(tmp_path: Path) -> None:
    raw = tmp_path / "raw.jsonl.gz"
    with gzip.open(raw, "wt") as fh:
        for r in records(100):
            fh.write(json.dumps(r) + "\n")
    meta = export_perfetto(raw, tmp_path / "t.json", max_events=50)
    assert meta["truncated"] is True and meta["records"] == 200
    data = json.loads((tmp_path / "t.json").read_text())
    assert len([e for e in data["traceEvents"] if e["ph"] != "M"]) <= 53  # the cap, plus one record's flow
    # every exported record is one instant or one "... submit" slice
    shown = [e for e in data["traceEvents"] if e["ph"] == "i" or e.get("name", "").endswith(" submit")]
    assert 0 < meta["records_exported"] == len(shown) < meta["records"]
