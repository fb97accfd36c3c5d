"""Detection from format files of two kernel generations, and recorded drm_sched output
replayed through the parser and statistics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aorta_tui.trace import probes, program, tracefs
from aorta_tui.trace.parser import RecordParser
from aorta_tui.trace.stream_stats import MetricStats, split_batch

FIX = Path(__file__).parent.parent / "fixtures" / "trace"


def ctx(variant: str) -> probes.ProbeContext:
    return probes.ProbeContext(tracefs=FIX / f"tracefs-{variant}")


def test_format_files_parse_strings_and_numbers() -> None:
    f = tracefs.event_format(FIX / "tracefs-old", "gpu_scheduler", "drm_sched_job")
    assert f is not None
    assert set(f) == {"entity", "fence", "name", "id", "job_count", "hw_job_count"}
    assert f["name"].is_string and not f["id"].is_string
    assert tracefs.event_format(FIX / "tracefs-old", "gpu_scheduler", "nope") is None


@pytest.mark.parametrize(("variant", "events", "key_text"), [
    ("old", ("drm_sched_job", "drm_run_job", "drm_sched_process_job"), "args->id"),
    ("new", ("drm_sched_job_queue", "drm_sched_job_run", "drm_sched_job_done"), "args->fence_context"),
])
def test_drm_sched_detects_each_kernel_generation(variant: str, events: tuple, key_text: str) -> None:
    ps = probes.get("drm_sched")
    det = ps.detect(ctx(variant))
    assert det.available, det.reason
    assert det.found == [f"gpu_scheduler:{e}" for e in events]
    text = program.render([(ps, det)], mode="events", pid=None).text
    for e in events:
        assert f"tracepoint:gpu_scheduler:{e}" in text
    assert key_text in text
    assert "str(args->name)" in text and "args->hw_job_count" in text
    # fields of the other generation must not leak in
    other = "args->fence_seqno" if variant == "old" else "args->id)"
    assert other not in text


@pytest.mark.parametrize(("variant", "key"), [("old", "args->sched_job_id"), ("new", "args->context")])
def test_amdgpu_pairs_jobs_by_the_fields_its_kernel_has(variant: str, key: str) -> None:
    ps = probes.get("amdgpu")
    det = ps.detect(ctx(variant))
    assert det.available, det.reason
    text = program.render([(ps, det)], mode="aggregate", pid=None).text
    assert key in text and "str(args->ring)" in text and "args->num_ibs" in text


def test_memory_sizes_come_from_format_fields() -> None:
    det = probes.get("memory").detect(ctx("old"))
    found = set(det.found)
    assert {"amdgpu:amdgpu_bo_create", "amdgpu:amdgpu_bo_move", "amdgpu:amdgpu_vm_bo_map"} <= found
    bo = {i.params["metric"]: i.params for i in det.instances if i.block == "bo"}
    assert bo["bo_create"]["bytes"] == "(args->pages) * 4096"
    assert bo["bo_move"]["bytes"] == "args->bo_size"


def test_missing_tracepoints_say_why_and_how_to_fix(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    det = probes.get("drm_sched").detect(probes.ProbeContext(tracefs=tmp_path))
    assert not det.available and "no gpu_scheduler tracepoints" in det.reason and det.fix
    det = probes.get("amdgpu").detect(probes.ProbeContext(tracefs=None))
    assert not det.available and det.fix == tracefs.MOUNT_COMMAND


def test_recorded_amdgpu_output_replays_into_per_ring_statistics() -> None:
    truth = json.loads((FIX / "amdgpu_truth.json").read_text())
    ps = probes.get("amdgpu")
    stats = {1: MetricStats(ps.metric("cs_to_run"))}
    parser = RecordParser()
    lines = (FIX / "amdgpu_recorded.txt").read_text().splitlines(keepends=True)
    sent: dict[int, int] = {}
    for i in range(0, len(lines), 97):
        b = parser.feed(lines[i : i + 97])
        split_batch(b, stats)
        sent.update(b.sent)
    assert parser.malformed_total == truth["malformed"] and parser.examples == ["@R 1 7000 5151"]
    s = stats[1].summary(wall_s=2.0).to_json()
    per_ring = truth["cs_to_run"]
    assert s["count"] == sent[1] == sum(len(v) for v in per_ring.values())
    assert s["events_per_s"] == s["count"] / 2.0
    assert s["measures"].startswith("amdgpu CS ioctl -> scheduler run_job")
    for ring, v in per_ring.items():
        b = s["breakdown"][ring]
        assert b["count"] == len(v)
        assert b["mean"] == pytest.approx(np.mean(v) / 1000.0)
        assert b["max"] == pytest.approx(max(v) / 1000.0)


def test_recorded_drm_sched_output_replays_into_exact_statistics() -> None:
    truth = json.loads((FIX / "drm_sched_truth.json").read_text())
    ps = probes.get("drm_sched")
    stats = {1: MetricStats(ps.metric("queue_to_run")), 2: MetricStats(ps.metric("run_to_done"))}
    parser = RecordParser()
    lines = (FIX / "drm_sched_recorded.txt").read_text().splitlines(keepends=True)
    received = {1: 0, 2: 0}
    sent: dict[int, int] = {}
    for i in range(0, len(lines), 333):  # batches of arbitrary size
        b = parser.feed(lines[i : i + 333])
        for mid, n in split_batch(b, stats).items():
            received[mid] += n
        sent.update(b.sent)
    assert parser.malformed_total == truth["malformed"]
    assert parser.lost_total == truth["lost"]
    assert {str(k): v for k, v in sent.items() if k} == truth["sent"]
    for mid, name in ((1, "queue_to_run"), (2, "run_to_done")):
        s = stats[mid].summary(wall_s=1.0).to_json()
        per_ring = truth[name]
        allv = np.concatenate([np.array(v) for v in per_ring.values()])
        assert s["count"] == len(allv) == received[mid]
        assert s["breakdown_by"] == "ring"
        assert {k: v["count"] for k, v in s["breakdown"].items()} == {k: len(v) for k, v in per_ring.items()}
        for q, key in ((50, "p50"), (99, "p99")):
            exact = np.percentile(allv, q, method="inverted_cdf") / 1000.0
            assert s["histogram"]["percentiles"][key] == pytest.approx(exact)
        assert s["histogram"]["percentiles"]["max"] == pytest.approx(allv.max() / 1000.0)
        for ring, v in per_ring.items():
            assert s["breakdown"][ring]["max"] == pytest.approx(max(v) / 1000.0)
