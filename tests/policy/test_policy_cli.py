"""`aorta-tui policy ...` as a user runs it: real subprocesses, real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aorta_tui.policy.presets import BUILTIN_POLICIES

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

TINY = ["--device", "cpu", "--size", "tiny", "--iterations", "3", "--warmup", "1",
        "--streams", "2"]


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", "policy", *args],
                          capture_output=True, text=True, timeout=180, cwd=cwd)


def test_list_json_has_every_preset() -> None:
    out = _cli("list", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["name"] for r in rows] == [p.name for p in BUILTIN_POLICIES]
    assert all(r["sets"] for r in rows)


def test_list_includes_a_policy_file(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("policies:\n  mine:\n    env: {CUDA_DEVICE_MAX_CONNECTIONS: '4'}\n")
    out = _cli("list", "--json", "--policy-file", str(f))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[-1]["source"] == f"{f}:2"


def test_unknown_policy_is_a_usage_error_with_a_suggestion(tmp_path: Path) -> None:
    out = _cli("sweep", "tiny_kernel_stress", "--policies", "baseline,xnack_of",
               "-o", str(tmp_path / "run"), *TINY)
    assert out.returncode == 2
    assert "unknown policy 'xnack_of'" in out.stderr and "did you mean xnack_off" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "run").exists()


def test_policy_file_typo_names_file_line_key(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("policies:\n  mine:\n    env: {A: '1'}\n    vendr: cuda\n")
    out = _cli("sweep", "tiny_kernel_stress", "--policies", "mine", "--policy-file", str(f),
               "-o", str(tmp_path / "run"), *TINY)
    assert out.returncode == 2
    assert f"{f}:4: policies.mine.vendr: unknown key" in out.stderr
    assert "did you mean 'vendor'" in out.stderr and not (tmp_path / "run").exists()


def test_stream_count_out_of_range_surfaces_the_harness_error(tmp_path: Path) -> None:
    out = _cli("sweep", "tiny_kernel_stress", "--policies", "xnack_off", "--trials", "2",
               "-o", str(tmp_path / "run"), *TINY, "--streams", "999")
    assert out.returncode == 2, out.stderr
    assert "999" in out.stderr and "streams" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "run").exists()


def test_gpu_control_plan_apply_restore_with_the_fake_backend(tmp_path: Path) -> None:
    state = tmp_path / "gpu.json"
    run = tmp_path / "run"
    out = _cli("sweep", "tiny_kernel_stress", "--policies", "priority_lc", "--trials", "1",
               "--allow-gpu-control", "--gpu-control-backend", f"fake:{state}",
               "-o", str(run), *TINY)
    assert out.returncode == 0, out.stderr
    assert "GPU control plan" in out.stderr and "clock_level=7" in out.stderr
    assert json.loads(state.read_text())["0"] == {"clock_level": None, "power_limit_w": 700}
    outcome = json.loads(next((run / "trials").glob("*priority_lc*/outcome.json")).read_text())
    assert "applied" in outcome["gpu_control"] and outcome["status"] == "ok"

    # Re-render from the run directory alone, as JSON.
    again = _cli("report", str(run), "--json")
    assert again.returncode == 0, again.stderr
    assert [p["name"] for p in json.loads(again.stdout)["policies"]] == ["baseline",
                                                                         "priority_lc"]


def test_gpu_control_is_skipped_with_a_note_without_the_flag(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = _cli("sweep", "tiny_kernel_stress", "--policies", "priority_be", "--trials", "1",
               "--json", "-o", str(run), *TINY)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[0]["event"] == "run_started" and events[0]["cells"] == ["baseline"]
    skipped = [e for e in events if e["event"] == "warning" and e["code"] == "policy_skipped"]
    assert skipped and "--allow-gpu-control" in skipped[0]["message"]
    report = json.loads((run / "policy.json").read_text())
    be = next(p for p in report["policies"] if p["name"] == "priority_be")
    assert be["status"] == "skipped" and be["trials_ok"] == 0


def test_report_on_a_wrong_directory(tmp_path: Path) -> None:
    out = _cli("report", str(tmp_path))
    assert out.returncode == 2 and "not a policy sweep directory" in out.stderr


def test_sigint_then_resume(tmp_path: Path) -> None:
    import signal

    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "aorta_tui", "policy", "sweep",
                             "tiny_kernel_stress", "--policies", "xnack_off", "--trials", "1",
                             "--json", "-o", str(run), *TINY],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(json.loads(line)["event"])
            if seen[-1] == "measurement":
                break
        assert seen and seen[-1] == "measurement", (seen, proc.wait(), proc.stderr.read()
                                                    if proc.stderr else "")
        proc.send_signal(signal.SIGINT)  # what the TUI's stop key does
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    last = json.loads(rest.splitlines()[-1])
    assert last["event"] == "run_finished" and last["status"] == "interrupted"
    report = json.loads((run / "policy.json").read_text())
    assert report["status"] == "interrupted"
    statuses = [t["status"] for t in report["trials"]]
    assert statuses == ["ok", "not run"]

    resumed = _cli("resume", str(run), "--json")
    assert resumed.returncode == 0, resumed.stderr
    first = json.loads(resumed.stdout.splitlines()[0])
    assert first["event"] == "run_started" and first["resumed"] and first["already_done"] == 1
    report = json.loads((run / "policy.json").read_text())
    assert report["status"] == "completed"
    assert [t["status"] for t in report["trials"]] == ["ok", "ok"]


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    import os

    run = tmp_path / "run"
    state = tmp_path / "gpu.json"
    env = {**os.environ, "CUDA_DEVICE_MAX_CONNECTIONS": "4"}
    out = subprocess.run([sys.executable, "-m", "aorta_tui", "policy", "sweep", "hetero_kernels",
                          "--policies", "cuda_max_connections_1,priority_be", "--trials", "3",
                          "--allow-gpu-control", "--gpu-control-backend", f"fake:{state}",
                          "--dry-run", "--json", "-o", str(run)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["trials_total"] == 9 and len(plan["order"]) == 9
    by_name = {p["name"]: p for p in plan["policies"]}
    assert by_name["baseline"]["inherited_removed"] == ["CUDA_DEVICE_MAX_CONNECTIONS"]
    assert "clock_level=2" in plan["gpu_control_plans"]["priority_be"]
    assert not run.exists() and not state.exists()  # planning read the (fake) GPU, changed nothing


def test_queue_arg_passes_options_but_not_the_sweeps_own(tmp_path: Path) -> None:
    ok = _cli("sweep", "hetero_kernels", "--queue-arg=--timing=cupti", "--dry-run", "--json",
              "-o", str(tmp_path / "run"))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["policies"][0]["queue_config"]["timing"] == "cupti"
    bad = _cli("sweep", "hetero_kernels", "--queue-arg=--streams=3", "--dry-run",
               "-o", str(tmp_path / "run"))
    assert bad.returncode == 2 and "--streams is set by the sweep itself" in bad.stderr
