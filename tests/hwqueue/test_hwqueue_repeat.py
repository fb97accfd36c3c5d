"""queue run --repeat: fresh processes, per-figure medians, and compare's run-to-run intervals."""

from __future__ import annotations

import copy
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from aorta_tui.core.errors import UsageError
from aorta_tui.core.events import Measurement, Progress, ResultWritten
from aorta_tui.hwqueue.compare import compare
from aorta_tui.hwqueue.harness import QueueRunConfig
from aorta_tui.hwqueue.repeat import combine, run_repeated
from tests.hwqueue.fake_results import fake_result

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def _cfg(**kw: object) -> QueueRunConfig:
    base: dict[str, object] = dict(workload="tiny_kernel_stress", streams=2, iterations=3,
                                   warmup=0, device="cpu", size="tiny")
    base.update(kw)
    return QueueRunConfig(**base)  # type: ignore[arg-type]


def test_each_repetition_is_its_own_process_and_the_summary_is_their_median(tmp_path: Path) -> None:
    events: list = []
    out = tmp_path / "r.json"
    r = run_repeated(_cfg(params={"ops_per_stream": "3"}), 3, on_event=events.append, output=out).to_json()
    rep = r["repeats"]
    assert rep["count"] == 3 and len(set(rep["run_ids"])) == 3
    assert r["run_id"] not in rep["run_ids"]
    throughputs = [s["throughput"] for s in rep["summaries"]]
    assert r["summary"]["throughput"] == statistics.median(throughputs)
    assert r["summary"]["latency_p99_ms"] == statistics.median(s["latency_p99_ms"] for s in rep["summaries"])
    # metrics and samples are the median repetition's own, and say so
    i = rep["run_ids"].index(rep["detail_from"])
    assert rep["summaries"][i]["throughput"] == statistics.median(throughputs)
    assert r["workload"]["params"]["ops_per_stream"] == 3  # the parameter reached every child
    assert all(v.startswith("median of 3 repetitions") for v in r["summary_source"].values())
    assert json.loads(out.read_text())["repeats"]["run_ids"] == rep["run_ids"]
    assert [e.done for e in events if isinstance(e, Progress)] == [1, 2, 3]
    assert isinstance(events[-2], Measurement) and events[-2].values == r["summary"]
    assert isinstance(events[-1], ResultWritten)


def test_repeat_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="at least 2"):
        run_repeated(_cfg(), 1)
    with pytest.raises(UsageError, match="--profiler-trace"):
        run_repeated(_cfg(device="cuda", profiler_trace=str(tmp_path / "t.json")), 3)
    with pytest.raises(UsageError, match="stream"):
        run_repeated(_cfg(streams=999), 3)  # validated before any process starts
    assert not list(tmp_path.iterdir())


def test_a_failing_repetition_is_reported_with_its_own_message(tmp_path: Path) -> None:
    # CPU emulation cannot trace the CUDA runtime: the child exits 2 with its message
    cfg = _cfg()
    cfg.ebpf_trace = True
    object.__setattr__(cfg, "validate", lambda: None)  # let the child be the one to refuse it
    with pytest.raises(UsageError, match=r"repetition 1 of 3 failed with exit status 2:\n.*ebpf-trace"):
        run_repeated(cfg, 3, output=tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


def _repeated(values: list[float]) -> dict:
    """A --repeat result whose repetitions had these throughputs, each with a tight run."""
    docs = []
    for k, v in enumerate(values):
        d = fake_result([10.0] * 30, [10.0] * 30)  # no within-run noise at all
        d["summary"]["throughput"] = v
        d["run_id"] = f"r{k}"
        docs.append(d)
    return combine(docs, "combined").to_json()


def test_compare_judges_repeated_results_against_the_run_to_run_spread() -> None:
    base, test = _repeated([100.0, 92.0, 108.0]), _repeated([107.0, 99.0, 115.0])
    row = next(r for r in compare(base, test)["rows"] if r["metric"] == "throughput")
    assert row["change"] == pytest.approx(0.07) and row["verdict"] == "unchanged"
    assert row["spread"] == "95% bootstrap CI, run-to-run"
    # the same medians from single tight runs would be called a change
    single_base, single_test = copy.deepcopy(base), copy.deepcopy(test)
    for d in (single_base, single_test):
        del d["repeats"]
    row = next(r for r in compare(single_base, single_test)["rows"] if r["metric"] == "throughput")
    assert row["verdict"] == "improved" and row["spread"] == "95% bootstrap CI, within-run"


def test_repeated_results_that_separate_are_called() -> None:
    report = compare(_repeated([100.0, 101.0, 99.0]), _repeated([80.0, 81.0, 79.0]))
    assert "throughput" in report["regressions"]
    assert not any("within-run noise only" in n for n in report["notes"])


def test_single_runs_carry_a_note_on_what_their_spread_means() -> None:
    report = compare(fake_result([10.0] * 5, [10.0] * 5), fake_result([10.0] * 5, [10.0] * 5))
    assert any("--repeat 3" in n for n in report["notes"])


def test_cli_repeat_prints_medians_and_ranges(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "run", "tiny_kernel_stress",
                           "--streams", "2", "-i", "2", "--device", "cpu", "--size", "tiny",
                           "--repeat", "3", "-q", "-o", str(out)], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "summary: medians of 3 repetitions" in proc.stdout
    assert "throughput:" in proc.stdout and "over 3 runs" in proc.stdout
    assert json.loads(out.read_text())["repeats"]["count"] == 3
