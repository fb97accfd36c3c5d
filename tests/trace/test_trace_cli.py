"""The CLI against real bpftrace: errors are one clear paragraph with exit code 3, Ctrl-C
leaves no bpftrace and no probe behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aorta_tui.core.events import event_from_dict

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "aorta_tui"]


def cli(*args: str, env: dict | None = None, timeout: float = 90, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, **kw)


def test_info_json_reports_every_probe_set(bpftrace) -> None:
    r = cli("trace", "info", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["bpftrace"]["path"] and data["bpftrace"]["version"]
    assert data["privileges"]["sufficient"] is True
    assert data["tracefs"]["mounted_at"]
    assert set(data["probe_sets"]) >= {"cuda", "hip", "amdgpu", "drm_sched", "memory", "errors", "ioctl"}
    assert data["probe_sets"]["ioctl"]["available"] is True
    amd = data["probe_sets"]["amdgpu"]
    assert amd["available"] is False and amd["reason"] and amd["fix"]


def test_missing_bpftrace_is_exit_3_with_the_fix(tmp_path: Path) -> None:
    r = cli("trace", "queue", "--probes", "ioctl", "--bpftrace", str(tmp_path / "nope"), "--", "true")
    assert r.returncode == 3
    assert "bpftrace not found" in r.stderr and "apt-get install bpftrace" in r.stderr
    assert "Traceback" not in r.stderr
    r = cli("trace", "info", "--json", env={"AORTA_TUI_BPFTRACE": str(tmp_path / "nope")})
    assert r.returncode == 0 and json.loads(r.stdout)["bpftrace"]["path"] is None


def test_no_privilege_is_exit_3(bpftrace) -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    r = subprocess.run([setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups",
                        *CLI, "trace", "queue", "--probes", "ioctl", "--", "true"],
                       capture_output=True, text=True, timeout=90, cwd="/",
                       env={**os.environ, "HOME": "/tmp", "PYTHONPATH": str(Path(__file__).parents[2])})
    assert r.returncode == 3, r.stderr
    assert "not privileged" in r.stderr and "sudo" in r.stderr


def test_probe_set_without_events_here_is_exit_3(bpftrace) -> None:
    r = cli("trace", "queue", "--probes", "drm_sched", "--", "true")
    assert r.returncode == 3
    assert "drm_sched" in r.stderr and "gpu_scheduler" in r.stderr and "fix:" in r.stderr
    r = cli("trace", "queue", "--probes", "nosuchset", "--", "true")
    assert r.returncode == 2 and "unknown probe set" in r.stderr


def test_default_probe_sets_none_available_is_exit_3_with_each_reason(bpftrace, tmp_path: Path) -> None:
    # without --probes the queue defaults are filtered by what attaches here; when none does,
    # one error names every set and why
    gone = tmp_path / "nope.so"
    r = cli("trace", "queue", "--lib", f"cuda={gone}", "--lib", f"hip={gone}", "--", "true")
    assert r.returncode == 3, r.stderr
    assert "none of the probe sets cuda, hip, amdgpu, drm_sched can attach here" in r.stderr
    assert f"cuda: {gone} does not exist" in r.stderr and f"hip: {gone} does not exist" in r.stderr
    assert "trace info" in r.stderr


def test_ctrl_c_stops_cleanly_and_leaves_no_probe(bpftrace, fakelibs, tmp_path: Path) -> None:
    target = subprocess.Popen(["sleep", "60"])
    out = tmp_path / "r.json"
    try:
        p = subprocess.Popen([*CLI, "trace", "queue", "--probes", "cuda,ioctl", "--lib",
                              f"cuda={fakelibs.cuda}", "--pid", str(target.pid), "-o", str(out), "--no-calibrate"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stderr.readline()
        deadline = time.time() + 60
        while "tracing" not in line and time.time() < deadline and p.poll() is None:
            line = p.stderr.readline()
        assert "tracing" in line, line + p.stderr.read()
        children = _children(p.pid)
        assert any(_comm(c) == "bpftrace" for c in children)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=90)  # detaching takes longer on a loaded box
        assert p.returncode == 130, stderr
        for c in children:
            assert not Path(f"/proc/{c}").exists() or _comm(c) != "bpftrace"
        assert Path("/sys/kernel/tracing/uprobe_events").read_text().strip() == ""
        result = json.loads(out.read_text())
        assert result["probe_sets"]["cuda"]["metrics"]["launch"]["count"] == 0
        assert result["target"]["pid"] == target.pid
    finally:
        target.kill()
        target.wait()


def test_queue_command_writes_result_raw_and_perfetto(bpftrace, fakelibs, tmp_path: Path) -> None:
    out, raw, pf = tmp_path / "q.json", tmp_path / "ev.jsonl.gz", tmp_path / "trace.json"
    r = cli("trace", "queue", "--probes", "cuda_calls", "--lib", f"cuda={fakelibs.cuda}", "-o", str(out),
            "--raw", str(raw), "--perfetto", str(pf), "--no-calibrate", "--",
            str(fakelibs.driver), "cuda", str(fakelibs.cuda), "12", "200", "0x10", "0x20")
    assert r.returncode == 0, r.stderr
    assert "launch_call: 12 events" in r.stdout and "CUDA launch call duration" in r.stdout
    result = json.loads(out.read_text())
    assert result["raw_event_count"] == 12 and raw.exists()
    trace = json.loads(pf.read_text())
    slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert len(slices) == 12 and all(e["dur"] >= 200 for e in slices)
    assert trace["metadata"]["truncated"] is False


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_json_prints_each_snapshot_then_the_result(bpftrace, fakelibs, tmp_path: Path) -> None:
    r = cli("trace", "queue", "--probes", "cuda_calls", "--lib", f"cuda={fakelibs.cuda}", "--json",
            "--interval", "0.2", "--no-calibrate", "--",
            str(fakelibs.driver), "cuda", str(fakelibs.cuda), "12", "200", "0x10", "0x20")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert all(event_from_dict(x) for x in lines)  # every line is an event, the last one too
    snaps = [x for x in lines[:-1] if x["event"] == "histogram_snapshot"]
    others = [x["event"] if x["event"] != "measurement" else x["name"] for x in lines if x not in snaps]
    assert snaps and others[:2] == ["run_started", "attached"] and others[-1] == "run_finished"
    assert set(others[2:-1]) <= {"warning"}  # nothing else on stdout
    assert lines[-1]["status"] == "completed" and lines[-1]["exit_code"] == 0
    metrics = lines[-1]["summary"]["result"]["probe_sets"]["cuda_calls"]["metrics"]
    # the uprobe metrics count what bpftrace delivered; the device half's metrics (CUPTI, when
    # the collector is found: no GPU here, so empty) have their own accounting ("source")
    host = [m for m in metrics.values() if "source" not in m]
    assert sum(m["records_received"] for m in host) == 12
    # the last snapshot of each metric has seen what the result counts
    last = {s["probe_set"]: s["count"] for s in snaps}
    assert last["cuda_calls.launch_call"] == 12
    assert all(s["probe_set"].startswith("cuda_calls.") and s["unit"] for s in snaps)


def test_json_is_the_event_stream_and_output_the_document(bpftrace, fakelibs, tmp_path: Path) -> None:
    """The dialect (docs/cli.md): `--json` prints events as they happen, never the document
    alone; `-o FILE` holds the document, the same one the stream's last event carries; the
    traced command's own stdout goes to stderr, never into the event lines."""
    r = cli("trace", "queue", "--probes", "cuda_calls", "--lib", f"cuda={fakelibs.cuda}", "--json",
            "-o", "q.json", "--no-calibrate", "--", "sh", "-c", "echo from-the-command", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert [e["event"] for e in events][0] == "run_started" and events[-1]["event"] == "run_finished"
    assert all(event_from_dict(e) for e in events)
    document = json.loads((tmp_path / "q.json").read_text())
    assert events[-1]["summary"]["result"] == document and document["probes"] == ["cuda_calls"]
    assert "from-the-command" in r.stderr.splitlines()  # every stdout line parsed as an event


def test_the_old_json_stream_flag_is_refused_naming_it() -> None:
    r = cli("trace", "queue", "--json-stream", "--", "true")
    assert r.returncode == 2 and "--json-stream" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("script, status", [("exit 7", 7), ("exit 0", 0), ("kill -TERM $$", 128 + 15)])
def test_queue_exits_with_the_traced_commands_status(bpftrace, script: str, status: int) -> None:
    # as `time`, `strace` and `perf stat`: the command's exit code, 128+N when signal N killed it
    r = cli("trace", "queue", "--probes", "ioctl", "--no-calibrate", "--", "sh", "-c", script)
    assert r.returncode == status, r.stderr
    assert "Traceback" not in r.stderr
    if status == 128 + 15:
        assert "command exit code: -15 (killed by signal 15)" in r.stdout


def test_memory_exits_with_the_traced_commands_status(bpftrace, fakelibs) -> None:
    r = cli("trace", "memory", "--lib", f"cuda={fakelibs.cuda}", "--no-calibrate", "--json",
            "--", "sh", "-c", "exit 7")
    assert r.returncode == 7, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["event"] == "run_finished" and last["exit_code"] == 7
    assert last["summary"]["result"]["target"]["command_exit_code"] == 7


def test_duration_that_stops_the_command_is_exit_0_and_ctrl_c_is_130(bpftrace) -> None:
    r = cli("trace", "queue", "--probes", "ioctl", "--no-calibrate", "--duration", "1", "--", "sleep", "30")
    assert r.returncode == 0, r.stderr
    p = subprocess.Popen([*CLI, "trace", "queue", "--probes", "ioctl", "--no-calibrate", "--",
                          "sh", "-c", "sleep 30; exit 7"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    while "tracing" not in line and p.poll() is None:
        line = p.stderr.readline()
    p.send_signal(signal.SIGINT)
    _out, stderr = p.communicate(timeout=90)
    assert p.returncode == 130, stderr
