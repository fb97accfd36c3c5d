"""`aorta-tui queue ...` end to end through real subprocesses: results, exit codes, no debris."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", "queue", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=120)


def test_queue_run_writes_a_schema_v1_result(tmp_path: Path) -> None:
    p = cli("run", "tiny_kernel_stress", "--streams", "2", "--device", "cpu", "-i", "3", "-w", "1",
            "-o", "x.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "x.json").read_text())
    assert data["schema_version"] == 1 and data["kind"] == "aorta-tui/queue-result"
    assert data["config"]["streams"] == 2 and data["emulated"] is True
    assert "throughput" in p.stdout and "EMULATED" in p.stdout
    # plain text when stdout is not a terminal: no rich box characters
    assert "┏" not in p.stdout and "│" not in p.stdout
    assert [f.name for f in tmp_path.iterdir()] == ["x.json"]  # no temp files left behind


def test_queue_run_json_is_event_lines_ending_with_the_result(tmp_path: Path) -> None:
    from aorta_tui.core.events import Measurement, RunFinished, RunStarted, event_from_dict

    p = cli("run", "hetero_kernels", "--streams", "2", "--device", "cpu", "--size", "tiny", "-i", "2",
            "--json", "-o", "r.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    events = [event_from_dict(json.loads(line)) for line in p.stdout.splitlines()]  # every line an event
    first, last = events[0], events[-1]
    assert isinstance(first, RunStarted) and first.source == "queue"
    assert isinstance(last, RunFinished) and last.status == "completed" and last.exit_code == 0
    assert {e.run_id for e in events} == {first.run_id}
    assert any(isinstance(e, Measurement) for e in events)
    data = last.summary["result"]
    assert data == json.loads((tmp_path / "r.json").read_text())  # the document, whole
    assert data["run_id"] == first.run_id
    assert data["workload"]["name"] == "hetero_kernels"
    assert data["summary"]["launch_delay_mean_us"] is None
    assert data["unavailable"]["launch_delay_us"]


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["run", "hetero_kernel", "--device", "cpu"], 2, "did you mean 'hetero_kernels'"),
        (["run", "moe", "--streams", "64", "--device", "cpu"], 2, "4..32 streams"),
        (["run", "moe", "--streams", "4", "--device", "cpu", "--sync-mode", "maybe"], 2, "sync mode"),
        (["run", "moe", "--streams", "4", "--device", "cpu", "--param", "hiden=3"], 2, "did you mean 'hidden'"),
        (["run", "tiny_kernel_stress", "--streams", "1", "--device", "cuda"], 3, "needs a GPU"),
        (["sweep", "moe", "--streams", "1,4", "--device", "cpu"], 2, "out of range: 1"),
        (["sweep", "moe", "--streams", "4,x", "--device", "cpu"], 2, "comma-separated"),
    ],
)
def test_bad_input_gives_a_message_a_typed_exit_and_no_file(tmp_path: Path, args: list[str],
                                                           code: int, needle: str) -> None:
    p = cli(*args, "-o", "out.json", cwd=tmp_path)
    assert p.returncode == code, (p.stdout, p.stderr)
    assert needle in p.stderr
    assert "Traceback" not in p.stderr and "fix:" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_queue_list_json_has_fifteen_workloads(tmp_path: Path) -> None:
    p = cli("list", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert len(rows) == 15 and {r["category"] for r in rows} == {
        "latency_sensitive", "distributed", "inference", "pipeline"}


def test_sweep_then_compare_round_trip(tmp_path: Path) -> None:
    p = cli("sweep", "tiny_kernel_stress", "--streams", "1,2", "--device", "cpu", "--size", "tiny",
            "-i", "3", "-w", "1", "-o", "s.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    sweep = json.loads((tmp_path / "s.json").read_text())
    assert sweep["kind"] == "aorta-tui/queue-sweep" and sweep["stream_counts"] == [1, 2]
    assert sweep["analysis"]["efficiency"]["1"] == 1.0
    assert sweep["analysis"]["peak_streams"] in (1, 2)
    assert "peak:" in p.stdout and "knee:" in p.stdout
    # a result compared with itself is unchanged everywhere: exit 0
    point = tmp_path / "p.json"
    point.write_text(json.dumps(sweep["points"][0]))
    p = cli("compare", str(point), str(point), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["regressions"] == [] and report["improvements"] == []
    # a sweep is compared with a sweep, never with a single run
    p = cli("compare", "s.json", str(point), cwd=tmp_path)
    assert p.returncode == 2 and "one file is a stream sweep and the other a single run" in p.stderr
    p = cli("compare", "s.json", "s.json", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["regressions"] == []


def test_compare_exits_one_on_a_clear_regression(tmp_path: Path) -> None:
    p = cli("run", "tiny_kernel_stress", "--streams", "1", "--device", "cpu", "--size", "tiny",
            "-i", "20", "-o", "base.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    base = json.loads((tmp_path / "base.json").read_text())
    slow = json.loads(json.dumps(base))  # the same run, every iteration 3x slower
    slow["summary"]["throughput"] /= 3
    slow["samples"]["iteration_period_ms"] = [x * 3 for x in base["samples"]["iteration_period_ms"]]
    for key in ("latency_mean_ms", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms"):
        slow["summary"][key] *= 3
    slow["samples"]["iteration_latency_ms"] = [x * 3 for x in base["samples"]["iteration_latency_ms"]]
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    p = cli("compare", "base.json", "slow.json", cwd=tmp_path)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "regressed" in p.stdout
    p = cli("compare", "base.json", "slow.json", "--no-fail", cwd=tmp_path)
    assert p.returncode == 0
    (tmp_path / "bad.json").write_text("{not json")
    p = cli("compare", "base.json", "bad.json", cwd=tmp_path)
    assert p.returncode == 2 and "bad.json:1:2" in p.stderr


def test_help_and_list_do_not_import_torch_rich_or_textual() -> None:
    code = (
        "import sys\n"
        "from aorta_tui.cli import queue_cmd\n"
        "from aorta_tui.hwqueue.workloads import all_infos\n"
        "import aorta_tui.hwqueue.harness, aorta_tui.hwqueue.sweep, aorta_tui.hwqueue.compare\n"
        "all_infos()\n"
        "bad = [m for m in ('torch', 'rich', 'textual') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=60)
    assert p.returncode == 0, p.stderr


def test_real_gloo_collectives_under_torchrun(tmp_path: Path) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun not installed next to this python")
    p = subprocess.run(
        [str(torchrun), "--nproc_per_node=2", "-m", "aorta_tui", "queue", "run", "comms_compute_overlap",
         "--device", "cpu", "--size", "tiny", "--param", "collectives=real", "--streams", "2",
         "-i", "2", "-w", "1", "-q", "-o", "cc.json"],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    for rank in (0, 1):
        data = json.loads((tmp_path / f"cc.rank{rank}.json").read_text())
        assert data["platform"]["distributed"] == {"rank": rank, "world_size": 2, "backend": "gloo"}
        assert data["workload"]["params"]["collectives"] == "real"


def test_real_collectives_without_torchrun_say_how(tmp_path: Path) -> None:
    env = {k: v for k, v in ENV.items() if k not in ("RANK", "WORLD_SIZE")}
    p = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "run", "comms_compute_overlap",
                        "--device", "cpu", "--size", "tiny", "--param", "collectives=real",
                        "--streams", "2", "-o", "x.json"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 3 and "torchrun" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_refused_queue_run_json_still_ends_with_a_typed_failed_event(tmp_path: Path) -> None:
    from aorta_tui.core.events import RunFinished, event_from_dict

    p = cli("run", "hetero_kernels", "--streams", "2", "--device", "cpu", "--size", "tiny", "-i", "2",
            "--param", "nope=1", "--json", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "nope" in p.stderr and "Traceback" not in p.stderr
    events = [event_from_dict(json.loads(line)) for line in p.stdout.splitlines()]
    assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"
    assert events[-1].exit_code == 2
