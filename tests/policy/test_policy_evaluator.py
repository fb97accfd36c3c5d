"""The evaluator against the real `aorta-tui queue run` (CPU, tiny sizes).

A ``sitecustomize`` probe on the trial's PYTHONPATH records, as the child interpreter starts
and before any aorta-tui code runs, the environment the process was created with and the
state of the (fake) GPU at that moment. That is what proves the policy was applied at process
creation rather than inside a running process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from aorta_tui.core.errors import UsageError
from aorta_tui.core.events import Event, event_from_dict
from aorta_tui.policy.evaluator import PolicySweepRequest, plan_order, run_policy_sweep
from aorta_tui.policy.gpu_control import FakeBackend
from aorta_tui.policy.presets import BUILTIN_BY_NAME, GpuControlSettings, Policy
from aorta_tui.policy.report import build_report, rerender

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

PROBE = textwrap.dedent("""
    import json, os, sys
    out = os.environ.get("POLICY_PROBE_DIR")
    if out and "aorta_tui.hwqueue.child" in getattr(sys, "orig_argv", []):  # a trial's process
        gpu = os.environ.get("POLICY_PROBE_GPU_STATE")
        state = json.load(open(gpu)) if gpu and os.path.exists(gpu) else None
        keep = {k: v for k, v in os.environ.items()
                if k.startswith(("CUDA_", "POLICY_", "HSA_"))}
        with open(os.path.join(out, f"{os.getpid()}.json"), "w") as fh:
            json.dump({"argv": list(getattr(sys, "orig_argv", sys.argv)), "env": keep,
                       "gpu": state}, fh)
""")

PROBE_POLICY = Policy(name="probe_connections", env={"CUDA_DEVICE_MAX_CONNECTIONS": "1",
                                                     "POLICY_MARK": "probe"})
# The same variables plus device-wide knobs, applied around each of its trials.
PROBE_GPU_POLICY = Policy(name="probe_gpu", env={"CUDA_DEVICE_MAX_CONNECTIONS": "1",
                                                 "POLICY_MARK": "probe"},
                          gpu_control=GpuControlSettings(clock_level=2, power_limit_w=150))
QUEUE = ("--size", "tiny")


def _request(out: Path, policies: tuple[Policy, ...], trials: int, **kw: Any) -> PolicySweepRequest:
    return PolicySweepRequest(workload="tiny_kernel_stress", policies=policies, streams=2,
                        output_dir=out, trials=trials, iterations=3, warmup=1, device="cpu",
                        seed=5, queue_args=QUEUE, timeout_s=120, python=sys.executable, **kw)


def _probe_env(tmp: Path, gpu_state: Path) -> dict[str, str]:
    probe_dir = tmp / "probe"
    site_dir = tmp / "site"
    probe_dir.mkdir()
    site_dir.mkdir()
    (site_dir / "sitecustomize.py").write_text(PROBE)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site_dir), *filter(None, [env.get("PYTHONPATH")])])
    env["POLICY_PROBE_DIR"] = str(probe_dir)
    env["POLICY_PROBE_GPU_STATE"] = str(gpu_state)
    env["CUDA_DEVICE_MAX_CONNECTIONS"] = "32"  # inherited: must not leak into baseline
    return env


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("sweep")
    gpu_state = tmp / "gpu.json"
    base_env = _probe_env(tmp, gpu_state)
    events: list[Event] = []
    outcome = run_policy_sweep(
        _request(tmp / "run", (PROBE_GPU_POLICY,), 2,
                 allow_gpu_control=True),
        on_event=events.append, gpu_backend=FakeBackend(gpu_state), base_env=base_env)
    probes = [json.loads(p.read_text()) for p in (tmp / "probe").glob("*.json")]
    return {"outcome": outcome, "events": events, "probes": probes, "gpu_state": gpu_state,
            "run_dir": tmp / "run"}


def _probe_for(probes: list[dict[str, Any]], trial_dir: str) -> dict[str, Any]:
    hits = [p for p in probes if any(trial_dir in a for a in p["argv"])]
    assert len(hits) == 1, (trial_dir, [p["argv"] for p in probes])
    return hits[0]


def test_every_trial_ran_in_its_own_process_with_the_policy_env(sweep: dict[str, Any]) -> None:
    report = sweep["outcome"].report.to_json()
    assert sweep["outcome"].status == "completed" and report["failed_trials"] == 0
    rows = report["trials"]
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
    for row in rows:
        probe = _probe_for(sweep["probes"], row["dir"])
        env = probe["env"]
        if row["policy"] == "probe_gpu":
            assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
            assert env["POLICY_MARK"] == "probe"
        else:
            # The parent's CUDA_DEVICE_MAX_CONNECTIONS=32 is removed from every arm.
            assert "CUDA_DEVICE_MAX_CONNECTIONS" not in env
            assert "POLICY_MARK" not in env


def test_gpu_control_is_on_during_its_trials_only_and_restored(sweep: dict[str, Any]) -> None:
    for row in sweep["outcome"].report.to_json()["trials"]:
        gpu = _probe_for(sweep["probes"], row["dir"])["gpu"]
        if row["policy"] == "probe_gpu":
            assert gpu["0"] == {"clock_level": 2, "power_limit_w": 150}
        else:
            assert gpu is None or gpu["0"] == {"clock_level": None, "power_limit_w": 700}
    assert json.loads(sweep["gpu_state"].read_text())["0"] == {"clock_level": None,
                                                               "power_limit_w": 700}
    plans = [e for e in sweep["events"] if e.kind == "warning" and e.code == "gpu_control_plan"]
    assert len(plans) == 1 and "probe_gpu" in plans[0].message


def test_trials_ran_in_the_planned_interleaved_order(sweep: dict[str, Any]) -> None:
    manifest = json.loads((sweep["run_dir"] / "sweep.json").read_text())
    order = [o["policy"] for o in manifest["order"]]
    started = [e.cell for e in sweep["events"] if e.kind == "trial_started"]
    assert started == order
    for r in range(2):
        assert sorted(order[r * 2:(r + 1) * 2]) == ["baseline", "probe_gpu"]
    assert [o["dir"][:3] for o in manifest["order"]] == [f"{i:03d}" for i in range(1, 5)]


def test_events_cover_the_run_and_match_the_journal(sweep: dict[str, Any]) -> None:
    kinds = [e.kind for e in sweep["events"]]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("measurement") == 4 and kinds.count("progress") == 4
    assert kinds.count("result_written") == 2
    m = next(e for e in sweep["events"] if e.kind == "measurement")
    assert m.source == "policy" and "throughput" in m.values
    # A figure the platform cannot measure is null with the harness's reason, never 0.
    assert m.values["launch_delay_mean_us"] is None
    assert "no reason" not in m.reasons["launch_delay_mean_us"]
    assert m.values["queue_depth_max"] is None and "no reason" not in m.reasons["queue_depth_max"]
    journal = [event_from_dict(json.loads(line)) for line in
               (sweep["run_dir"] / "journal.jsonl").read_text().splitlines()]
    assert [e.kind for e in journal] == kinds


def test_report_files_and_rerender(sweep: dict[str, Any]) -> None:
    run_dir = sweep["run_dir"]
    written = json.loads((run_dir / "policy.json").read_text())
    assert written["schema_version"] == 1 and written["emulated"] is True
    names = [p["name"] for p in written["policies"]]
    assert names == ["baseline", "probe_gpu"]
    base = written["policies"][0]["metrics"]["throughput"]
    # Two trials give a median but no interval (test_policy_report.py has the intervals).
    assert base["n"] == 2 and base["median"] is not None and base["ci_low"] is None
    assert "at least 4" in base["reason"]
    unmeasured = written["policies"][0]["metrics"]["launch_delay_mean_us"]
    assert unmeasured["median"] is None and unmeasured["reason"]
    probe = next(p for p in written["policies"] if p["name"] == "probe_gpu")
    assert any("CPU emulation" in n for n in probe["notes"])
    assert any("gpu control (fake)" in n for n in probe["notes"])
    assert set(probe["vs_reference"]) == {m["name"] for m in written["metrics"]}
    md = (run_dir / "policy.md").read_text()
    assert "| probe_gpu |" in md and "not available" in md
    again, _, _ = rerender(run_dir)
    for key in ("policies", "differences", "trials", "metrics", "status"):
        assert again.to_json()[key] == written[key]


def test_harness_usage_error_aborts_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    req = PolicySweepRequest(workload="tiny_kernel_stress", policies=(BUILTIN_BY_NAME["xnack_off"],),
                       streams=500, output_dir=out, trials=2, device="cpu", queue_args=QUEUE,
                       python=sys.executable)
    events: list[Event] = []
    with pytest.raises(UsageError) as info:
        run_policy_sweep(req, on_event=events.append)
    assert "1..64 streams" in info.value.message  # the harness's own message
    assert not out.exists()
    assert events[-1].kind == "run_finished" and events[-1].status == "failed"


def test_unknown_harness_option_from_a_policy_is_a_usage_error(tmp_path: Path) -> None:
    bogus = Policy(name="bogus", harness_args=("--no-such-harness-option",))
    out = tmp_path / "run"
    out.mkdir()  # an empty directory given by the user is kept, and left empty
    req = dataclasses.replace(_request(out, (bogus,), 1), seed=3)
    assert [t.policy for t in plan_order(["baseline", "bogus"], 1, 3)][0] == "bogus"  # fast
    with pytest.raises(UsageError, match="bogus"):
        run_policy_sweep(req)
    assert out.exists() and list(out.iterdir()) == []


def test_existing_output_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="already holds files"):
        run_policy_sweep(_request(tmp_path, (PROBE_POLICY,), 1))
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_cancel_stops_between_trials_and_reports_what_finished(tmp_path: Path) -> None:
    cancel = threading.Event()

    def on_event(event: Event) -> None:
        if event.kind == "measurement":
            cancel.set()

    outcome = run_policy_sweep(_request(tmp_path / "run", (PROBE_POLICY,), 3),
                               on_event=on_event, cancel=cancel)
    assert outcome.status == "interrupted" and outcome.exit_code == 130
    statuses = [t["status"] for t in outcome.report.to_json()["trials"]]
    assert statuses.count("ok") == 1 and statuses.count("not run") == 5
    assert build_report(tmp_path / "run").status == "interrupted"
    assert (tmp_path / "run" / "policy.md").exists()


def test_each_outcome_says_what_the_tool_set_beyond_the_user_and_the_policy(sweep: dict[str, Any]) -> None:
    """tool_env, as a recipe sweep's result.json has it: the variables the tool set (here
    PYTHONUNBUFFERED; the bytecode cache where the image keeps none), the trial's identity token
    by name only, never the policy's own variables, never the other arms' (env_removed)."""
    for row in sweep["outcome"].report.to_json()["trials"]:
        doc = json.loads((Path(sweep["run_dir"]) / "trials" / Path(row["dir"]).name / "outcome.json").read_text())
        tool = doc["tool_env"]
        assert tool.get("PYTHONUNBUFFERED", "1") == "1"
        assert ("PYTHONUNBUFFERED" in tool) == (os.environ.get("PYTHONUNBUFFERED") != "1")
        assert tool.pop("AORTA_TRIAL_TOKEN") == "<masked: secret>"
        assert not [k for k in tool if k.startswith(("AORTA_", "CUDA_", "POLICY_"))], tool
        if row["policy"] != "probe_gpu":
            assert doc["env_removed"] == ["CUDA_DEVICE_MAX_CONNECTIONS"]
