"""The Slurm executor against a real Slurm (scripts/slurm-local.sh starts a one-node cluster).

Every test submits real jobs through ``sbatch`` and reads them back with ``squeue``; nothing
here is a mock. Without ``sinfo`` the tests skip with the reason, except where
``AORTA_REQUIRE_SLURM=1`` (scripts/test.sh, CI), where they fail instead.
"""

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

from tests.engine_support import aorta, journal, only_run_dir

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow


def _slurm_problem() -> str | None:
    if shutil.which("sinfo") is None:
        return "no `sinfo` on PATH: Slurm is not installed (scripts/slurm-local.sh installs one)"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo does not answer: {exc}"
    if out.returncode != 0 or not out.stdout.strip():
        return f"Slurm does not answer: {out.stderr.strip()[-200:]} (run scripts/slurm-local.sh)"
    return None


@pytest.fixture(scope="module", autouse=True)
def slurm() -> None:
    problem = _slurm_problem()
    if problem is None:
        return
    if os.environ.get("AORTA_REQUIRE_SLURM") == "1":
        pytest.fail(f"AORTA_REQUIRE_SLURM=1 and {problem}")
    pytest.skip(problem)


RECIPE = """\
schema_version: 1
mode: probe
ticket: slurm
trials: {trials}
timeout_per_trial: {timeout}
hang_window_sec: 30
hang_grace_period_at_start: 60
mitigation_axis: [none, cuda_launch_blocking, cuda_module_loading_eager]
diagnostic_axis: [none]
{executor}
"""

# The trial: records that it ran (one file per execution), sleeps, and fails in one cell.
TRIAL = """\
#!/bin/sh
d="{runs}"
mkdir -p "$d"
echo "$SLURM_JOB_ID $CUDA_VISIBLE_DEVICES" > "$d/$(echo "$AORTA_TRIAL_ID" | tr / _).$$"
echo "cell $AORTA_CELL job ${{SLURM_JOB_ID:-none}} gpus ${{CUDA_VISIBLE_DEVICES:-none}}"
sleep "${{SLEEP_S:-0}}"
[ -n "$CUDA_LAUNCH_BLOCKING" ] && {{ echo "RuntimeError: CUDA error: an illegal memory access"; exit 1; }}
exit 0
"""


def _setup(tmp_path: Path, *, trials: int = 2, timeout: int = 60, executor: str = "",
           sleep: float = 0.0) -> tuple[Path, Path, Path]:
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(RECIPE.format(trials=trials, timeout=timeout, executor=executor))
    script = tmp_path / "trial.sh"
    script.write_text(TRIAL.format(runs=tmp_path / "runs"))
    script.chmod(0o755)
    return recipe, script, tmp_path / "out"


def _results(run_dir: Path) -> dict[str, dict]:
    out = {}
    for p in run_dir.glob("trials/*/trial-*/result.json"):
        d = json.loads(p.read_text())
        out[d["trial_id"]] = d
    return out


def _squeue(job_ids: list[str]) -> dict[str, str]:
    arrays = sorted({j.split("_")[0] for j in job_ids})
    out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(arrays), "-o", "%i|%T"],
                         capture_output=True, text=True, timeout=30)
    return dict(line.split("|", 1) for line in out.stdout.split() if "|" in line)


def _run(recipe: Path, script: Path, out: Path, *extra: str, env: dict | None = None,
         timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return aorta("--batch", str(recipe), "--output", str(out), "--no-snapshot", *extra, "--",
                 str(script), env=env, timeout=timeout)


def test_every_trial_is_a_slurm_job_and_verdicts_equal_the_local_executor(tmp_path):
    recipe, script, out = _setup(tmp_path, executor='executor: {kind: slurm, gres: "gpu:1"}')
    proc = _run(recipe, script, out / "slurm")
    assert proc.returncode == 0, proc.stderr
    local = _run(recipe, script, out / "local", "--executor", "local")  # the same recipe, here
    assert local.returncode == 0, local.stderr
    s_res, l_res = _results(only_run_dir(out / "slurm")), _results(only_run_dir(out / "local"))
    assert len(s_res) == 6
    assert {t: r["verdict"] for t, r in s_res.items()} == {t: r["verdict"] for t, r in l_res.items()}
    assert {r["verdict"] for t, r in s_res.items() if t.startswith("cuda_launch_blocking")} == {"fail"}
    assert {t: r["reason"] for t, r in s_res.items()} == {t: r["reason"] for t, r in l_res.items()}
    facts = {t: r["process"]["executor"] for t, r in s_res.items()}
    job_ids = [f["job_id"] for f in facts.values()]
    assert len(set(job_ids)) == 6 and all(f["state"] == "COMPLETED" for f in facts.values())
    assert all(f["node"] for f in facts.values())
    assert all(f["gpus"]["CUDA_VISIBLE_DEVICES"] not in (None, "") for f in facts.values()), facts
    assert all(f["queue_wait_s"] is not None and f["run_s"] is not None for f in facts.values())
    # Slurm itself knows every one of those jobs, and they ran to completion
    states = _squeue(job_ids)
    assert {states.get(j) for j in job_ids} == {"COMPLETED"}, states
    # the job's own environment reached the trial: its stdout names the job
    for t, f in facts.items():
        log = (only_run_dir(out / "slurm") / "trials" / t / "stdout.log").read_text()
        assert f"job {f['slurm_job_id']}" in log
    # one sbatch call for all six trials, recorded before the sweep waited
    jobs = json.loads((only_run_dir(out / "slurm") / "slurm" / "jobs.json").read_text())
    assert len(jobs["batches"]) == 1 and len(jobs["trials"]) == 6
    assert all(r["process"].get("executor") is None for r in l_res.values())
    # the batch output says where each trial ran, and sums failures up per node
    for t, f in facts.items():
        assert f"{t}: " in proc.stdout and f"[job {f['job_id']} on {f['node']}, GPU " in proc.stdout
    assert "per node (Slurm):" in proc.stdout and "[job " not in local.stdout
    assert "per node" not in local.stdout


def test_scancel_of_one_job_is_a_typed_verdict(tmp_path):
    recipe, script, out = _setup(tmp_path, trials=1)
    proc = subprocess.Popen([sys.executable, "-m", "aorta_tui", "--batch", str(recipe), "--output",
                             str(out), "--no-snapshot", "--executor", "slurm", "--", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SLEEP_S": "8"})  # 4 s: on a loaded box the
    # victim could end before its scancel landed (a `pass`, seen once at load 5)
    try:
        victim = _wait_for_running_job(out)
        subprocess.run(["scancel", victim[1]], check=True, timeout=30)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    res = _results(only_run_dir(out))
    cancelled = res[victim[0]]
    assert cancelled["verdict"] == "error"
    assert cancelled["detections"][0]["id"] == "slurm_cancelled", cancelled["detections"]
    assert victim[1] in cancelled["reason"]
    others = {t: r["verdict"] for t, r in res.items() if t != victim[0]}
    assert len(others) == 2 and "error" not in others.values(), others


def _wait_for_running_job(out: Path, timeout: float = 60) -> tuple[str, str]:
    """(trial id, job id) of the first trial whose job runs."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for jobs_file in out.glob("*/*/slurm/jobs.json"):
            data = json.loads(jobs_file.read_text())
            batches = data["batches"]
            ids = {f"{batches[t['batch']]['job_id']}_{t['task']}": tid for tid, t in data["trials"].items()
                   if batches[t["batch"]].get("job_id")}
            for job_id, state in _squeue(list(ids)).items():
                if state == "RUNNING" and job_id in ids:
                    return ids[job_id], job_id
        time.sleep(0.2)
    raise AssertionError("no job started running")


def test_sigkill_of_the_orchestrator_then_resume_adopts_running_jobs(tmp_path):
    recipe, script, out = _setup(tmp_path, trials=2)
    proc = subprocess.Popen([sys.executable, "-m", "aorta_tui", "--batch", str(recipe), "--output",
                             str(out), "--no-snapshot", "--executor", "slurm", "--", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SLEEP_S": "2"})
    try:
        _wait_for_running_job(out)
        proc.send_signal(signal.SIGKILL)  # mid-sweep: jobs queued and running
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_dir = only_run_dir(out)
    before = {e["trial_id"] for e in journal(run_dir) if e["event"] == "trial_finished"}
    assert len(before) < 6
    resumed = aorta("sweep", "run", "--resume", str(run_dir), env={"SLEEP_S": "2"}, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    finished = [e["trial_id"] for e in journal(run_dir) if e["event"] == "trial_finished"]
    assert sorted(finished) == sorted(set(finished)) and len(finished) == 6  # none lost, none twice
    runs = sorted(p.name.rsplit(".", 1)[0] for p in (tmp_path / "runs").iterdir())
    assert runs == sorted(set(runs)) and len(runs) == 6, runs  # every command ran exactly once
    jobs = json.loads((run_dir / "slurm" / "jobs.json").read_text())
    assert len(jobs["batches"]) == 1  # nothing was resubmitted: the resume adopted the jobs
    res = _results(run_dir)
    adopted = [t for t, r in res.items() if r["process"]["executor"]["adopted"]]
    assert adopted and set(adopted) == set(res) - before
    assert {r["verdict"] for t, r in res.items() if t.startswith("none")} == {"pass"}


def test_an_orchestrator_killed_at_the_gate_leaves_tasks_the_resume_lets_go(tmp_path):
    """The array's tasks wait at the gate (slurm_job.pass_gate) for the go the orchestrator
    writes once it sees their marker. Stopped right after its sbatch, it never writes it: the
    tasks wait; SIGKILL, then --resume adopts them and writes the go, and each trial runs once."""
    recipe, script, out = _setup(tmp_path, trials=1)
    proc = subprocess.Popen([sys.executable, "-m", "aorta_tui", "--batch", str(recipe), "--output",
                             str(out), "--no-snapshot", "--executor", "slurm", "--", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not any(b.get("job_id") for b in _batches(out)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr and proc.stderr.read()
            time.sleep(0.002)
        proc.send_signal(signal.SIGSTOP)  # the tasks start on the next scheduling pass, ~1 s away
        run_dir = only_run_dir(out)
        assert not list((run_dir / "slurm").glob("gate-*.go")), "the gate opened before the stop"
        while not list((run_dir / "slurm").glob("gate-*[0-9a-f]")):  # a task waits at the gate
            assert time.monotonic() < deadline, "no task reached the gate"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not [e for e in journal(run_dir) if e["event"] == "trial_finished"]
    # resumed under another spelling of the same directory (through a symlink): the go must
    # still land where the tasks look
    (tmp_path / "link").symlink_to(out)
    resumed = aorta("sweep", "run", "--resume", str(tmp_path / "link" / run_dir.relative_to(out)),
                    timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    finished = [e["trial_id"] for e in journal(run_dir) if e["event"] == "trial_finished"]
    assert sorted(finished) == sorted(set(finished)) and len(finished) == 3
    runs = sorted(p.name.rsplit(".", 1)[0] for p in (tmp_path / "runs").iterdir())
    assert runs == sorted(set(runs)) and len(runs) == 3, runs  # every command ran exactly once
    assert len(json.loads((run_dir / "slurm" / "jobs.json").read_text())["batches"]) == 1  # adopted
    res = _results(run_dir)
    assert all(r["process"]["executor"]["adopted"] for r in res.values())
    waited = [r["process"]["executor"]["gate_waited_s"] for r in res.values()]
    # the tasks that had reached the gate waited for the resume's go; later ones found it there
    assert all(w is not None for w in waited) and any(w > 0 for w in waited), waited


def _batches(out: Path) -> list[dict]:
    paths = list(out.glob("*/*/slurm/jobs.json"))
    try:
        return list(json.loads(paths[0].read_text())["batches"].values()) if paths else []
    except (OSError, ValueError):
        return []  # caught between its atomic rename and our read: the next look sees it


def test_a_partition_that_does_not_exist_is_exit_3_and_nothing_is_submitted(tmp_path):
    recipe, script, out = _setup(tmp_path, executor="executor: {kind: slurm, partition: nosuch}")
    proc = _run(recipe, script, out)
    assert proc.returncode == 3, proc.stderr
    assert "no partition 'nosuch'" in proc.stderr and "sinfo" in proc.stderr
    assert "probe.yaml:" in proc.stderr
    assert not list(out.glob("*/*/run.json"))


def test_a_refused_account_is_exit_3_with_the_fix(tmp_path):
    recipe, script, out = _setup(tmp_path, executor="executor: {kind: slurm, account: not-mine}")
    proc = _run(recipe, script, out)
    assert proc.returncode == 3, proc.stderr
    assert "refused the account 'not-mine'" in proc.stderr and "executor.account" in proc.stderr
    assert "Traceback" not in proc.stderr
    # refused at the array's own sbatch, after the run directory was made: it is removed
    assert "the new run directory" in proc.stderr and "was removed" in proc.stderr
    assert not list(out.glob("*/*/run.json")) and not list(out.iterdir())


def test_no_sbatch_on_path_is_exit_3(tmp_path):
    recipe, script, out = _setup(tmp_path)
    bare = tmp_path / "bin"
    bare.mkdir()
    proc = _run(recipe, script, out, "--executor", "slurm", env={"PATH": str(bare)})
    assert proc.returncode == 3, proc.stderr
    assert "no `sbatch` on PATH" in proc.stderr and "--executor local" in proc.stderr
    assert not list(out.glob("*/*/run.json"))


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare(1) for a private mount namespace")
def test_a_run_directory_the_nodes_do_not_see_is_exit_3(tmp_path):
    """The orchestrator runs in its own mount namespace with a tmpfs over --output: the job
    (started by slurmd, outside that namespace) writes its marker where this process cannot
    see it - what a node-local /tmp on a real cluster does."""
    recipe, script, out = _setup(tmp_path)
    out.mkdir()
    cmd = (f"mount -t tmpfs tmpfs {out} && exec {sys.executable} -m aorta_tui --batch {recipe} "
           f"--output {out} --no-snapshot --executor slurm -- {script}")
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd],
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, "AORTA_SLURM_PROBE_WAIT_S": "60"})
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert "not shared with the compute nodes" in proc.stderr and "--output" in proc.stderr


def test_timeout_per_trial_is_enforced_on_the_node_as_locally(tmp_path):
    recipe, _, out = _setup(tmp_path, trials=1, timeout=2)
    # `exec sleep`: the trial script's shell, killed a moment after its sleep, could still print
    # its CUDA error line (a tier-4 fail instead of the timeout error)
    sleeper = tmp_path / "sleeper.sh"
    sleeper.write_text("#!/bin/sh\nexec sleep 30\n")
    sleeper.chmod(0o755)
    slurm = _run(recipe, sleeper, out / "slurm", "--executor", "slurm")
    local = _run(recipe, sleeper, out / "local")
    # every trial errored (timed out): exit 1 on either executor (issue 27 item 4)
    assert slurm.returncode == 1 and local.returncode == 1, (slurm.stderr, local.stderr)
    s_res, l_res = _results(only_run_dir(out / "slurm")), _results(only_run_dir(out / "local"))
    for res in (s_res, l_res):
        assert {r["verdict"] for r in res.values()} == {"error"}
        assert all(r["detections"][0]["id"] == "timeout" for r in res.values()), res
    assert all(r["process"]["executor"]["state"] == "COMPLETED" for r in s_res.values())
    assert all(r["process"]["wall_s"] < 10 for r in s_res.values())  # ended at 2 s + grace


def test_ctrl_c_scancels_the_jobs_and_resume_runs_them_again(tmp_path):
    recipe, script, out = _setup(tmp_path, trials=1)
    run_dir = _ctrl_c_while_a_job_runs(tmp_path, recipe, script, out)  # exit 130, none runs on
    jobs = json.loads((run_dir / "slurm" / "jobs.json").read_text())
    ids = [f"{jobs['batches'][t['batch']]['job_id']}_{t['task']}" for t in jobs["trials"].values()]
    assert all(t.get("cancelled_by_orchestrator") for t in jobs["trials"].values())
    assert set(_squeue(ids).values()) <= {"CANCELLED", "COMPLETED"}  # none failed on its own
    assert not list(run_dir.glob("trials/*/*/result.json"))
    resumed = aorta("sweep", "run", "--resume", str(run_dir), env={"SLEEP_S": "0"}, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert len(_results(run_dir)) == 3  # the cancelled ones ran again, as a new array
    assert len(json.loads((run_dir / "slurm" / "jobs.json").read_text())["batches"]) == 2


def test_an_array_not_started_in_time_is_a_warning_and_the_run_goes_on(tmp_path):
    recipe, script, out = _setup(tmp_path, trials=1)
    proc = _run(recipe, script, out, "--executor", "slurm", env={"AORTA_SLURM_PROBE_WAIT_S": "0.001"})
    assert proc.returncode == 0, proc.stderr
    assert "warning: slurm: no task of the run's job array had started after" in proc.stdout
    assert "shared-filesystem check is left to the tasks" in proc.stdout
    events = journal(only_run_dir(out))
    assert any(e["event"] == "warning" and e.get("code") == "slurm" for e in events)
    assert len(_results(only_run_dir(out))) == 3


# -- issue 27, items 4-7 -------------------------------------------------------------------------


def _cli(cwd: Path, *args: str, env: dict | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "aorta_tui", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _jobs(run_dir: Path) -> dict[str, str]:
    """trial id -> job id, of slurm/jobs.json (batches whose id is written)."""
    data = json.loads((run_dir / "slurm" / "jobs.json").read_text())
    batches = data["batches"]
    return {tid: f"{batches[t['batch']]['job_id']}_{t['task']}" for tid, t in data["trials"].items()
            if batches[t["batch"]].get("job_id")}


def test_the_default_relative_output_and_a_relative_resume_path_run_every_trial(tmp_path):
    """Item 4: from a fresh working directory, with the default --output (aorta-out) and a
    relative --resume path, every trial's job runs (it did not: a relative --chdir, --output
    and manifest sent each task to <cwd>/aorta-out/<run>/aorta-out/<run>/..., JobLaunchFailure,
    every trial `slurm_job_failed`, and still exit 0)."""
    recipe, script, _ = _setup(tmp_path, trials=1)
    work = tmp_path / "fresh"
    work.mkdir()
    proc = _cli(work, "--batch", str(recipe), "--no-snapshot", "--executor", "slurm", "--",
                str(script), env={"SLEEP_S": "30"})
    try:
        _wait_for_running_job(work / "aorta-out")  # a job of the default output really runs
        proc.send_signal(signal.SIGINT)  # every job cancelled by the orchestrator: all resubmitted
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    run_dir = only_run_dir(work / "aorta-out")
    relative = run_dir.relative_to(work)
    assert not relative.is_absolute() and str(relative).startswith("aorta-out/")
    resumed = aorta("sweep", "run", "--resume", str(relative), cwd=work, env={"SLEEP_S": "0"},
                    timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    res = _results(run_dir)
    assert len(res) == 3
    assert {t: r["process"]["executor"]["state"] for t, r in res.items()} == dict.fromkeys(res, "COMPLETED")
    assert {t.split("/")[0]: r["verdict"] for t, r in res.items()} == {
        "none-none": "pass", "cuda_module_loading_eager-none": "pass", "cuda_launch_blocking-none": "fail"}
    assert not [d for r in res.values() for d in r["detections"] if d["id"].startswith("slurm_")]
    # the resubmitted array's tasks wrote their Slurm output where the run directory says
    batches = json.loads((run_dir / "slurm" / "jobs.json").read_text())["batches"]
    assert len(batches) == 2
    second = max(batches, key=lambda b: batches[b]["session"])
    assert sorted(p.name for p in (run_dir / "slurm" / f"{second}.out").iterdir()) == ["0.out", "1.out", "2.out"]
    assert not (run_dir / "aorta-out").exists()


def test_a_run_in_which_every_trial_errored_exits_1_on_either_executor(tmp_path):
    """Item 4: every trial errored (here: each one's timeout) is not a success, whichever
    executor ran it; one trial that did not error makes it a sweep again (exit 0)."""
    recipe, script, out = _setup(tmp_path, trials=1, timeout=1)
    for executor in ("slurm", "local"):
        # `sleep` itself, not the trial script: a shell killed a moment after its sleep could
        # still print the script's CUDA error line (a tier-4 fail, not an error)
        proc = aorta("--batch", str(recipe), "--output", str(out / executor), "--no-snapshot",
                     "--executor", executor, "--", "sleep", "30", timeout=180)
        assert proc.returncode == 1, (executor, proc.stdout, proc.stderr)
        assert "exit code 1 (every trial errored: nothing was judged" in proc.stdout
        res = _results(only_run_dir(out / executor))
        assert len(res) == 3 and {r["verdict"] for r in res.values()} == {"error"}
        (finished,) = [e for e in journal(only_run_dir(out / executor)) if e["event"] == "run_finished"]
        assert finished["exit_code"] == 1 and finished["summary"]["every_trial_errored"] is True
    mixed = _run(recipe, script, out / "mixed", "--executor", "local", env={"SLEEP_S": "0"})
    assert mixed.returncode == 0, mixed.stderr  # one cell fails, two pass: findings, not an error


def _wait_for_pending_task(run_dir_parent: Path, task: int, timeout: float = 60) -> tuple[str, str]:
    """(trial id, job id) of array task ``task`` once squeue says it is PENDING."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for jobs_file in run_dir_parent.glob("*/*/slurm/jobs.json"):
            ids = {j: t for t, j in _jobs(jobs_file.parent.parent).items()}
            for job_id, state in _squeue(list(ids)).items():
                if job_id in ids and job_id.endswith(f"_{task}") and state == "PENDING":
                    return ids[job_id], job_id
        time.sleep(0.1)
    raise AssertionError(f"array task {task} was never seen pending")


def test_a_pending_task_cancelled_out_of_squeue_is_a_typed_verdict_not_a_hang(tmp_path):
    """Items 5 and 7: `scancel <job>_3` while that task is pending (4 trials of `sleep 6` on a
    node that runs fewer at once): Slurm drops it from squeue for good, and without sacct the
    run waited on its last state, PENDING, forever. Now it ends as a typed error within a bound,
    carries no tier-2 hang line (it never launched), and the other trials pass."""
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(RECIPE.format(trials=4, timeout=60, executor="").replace(
        "[none, cuda_launch_blocking, cuda_module_loading_eager]", "[none]"))
    out = tmp_path / "out"
    proc = _cli(tmp_path, "--batch", str(recipe), "--output", str(out), "--no-snapshot",
                "--executor", "slurm", "--", "sleep", "6")
    try:
        victim, job_id = _wait_for_pending_task(out, 3)
        subprocess.run(["scancel", job_id], check=True, timeout=30)
        stdout, stderr = proc.communicate(timeout=150)  # it hung here
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    res = _results(only_run_dir(out))
    assert len(res) == 4
    gone = res[victim]
    assert gone["verdict"] == "error", gone
    first = gone["detections"][0]
    assert first["id"] in ("slurm_job_lost", "slurm_cancelled") and job_id in first["message"], first
    if first["id"] == "slurm_job_lost":  # vanished (Slurm 22.05 without sacct): the reason says so
        assert "left squeue while PENDING" in gone["reason"]
    assert not [d for d in gone["detections"] if d["tier"] == 2], gone["detections"]
    assert gone["process"]["executor"]["node"] is None and gone["process"]["pid"] is None
    assert {r["verdict"] for t, r in res.items() if t != victim} == {"pass"}


def test_resume_with_the_local_executor_refuses_while_the_runs_jobs_still_run(tmp_path):
    """Item 6: `--resume --executor local` of a SIGKILLed Slurm run ran a live trial a second
    time here (0.7 s after its job started, in the same trial directory), and the queued tasks
    then failed on their retired `slurm-job.json`. Now it is refused (exit 2, nothing changed)
    with the commands that settle the jobs; the Slurm resume they name adopts them, and every
    trial runs exactly once."""
    recipe, script, out = _setup(tmp_path, trials=2)
    proc = _cli(tmp_path, "--batch", str(recipe), "--output", str(out), "--no-snapshot",
                "--executor", "slurm", "--", str(script), env={"SLEEP_S": "4"})
    try:
        _wait_for_running_job(out)
        proc.send_signal(signal.SIGKILL)  # jobs queued and running, nobody watching
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_dir = only_run_dir(out)
    lines_before = (run_dir / "journal.jsonl").read_bytes()
    local = aorta("sweep", "run", "--resume", str(run_dir), "--executor", "local",
                  env={"SLEEP_S": "3"}, timeout=120)
    assert local.returncode == 2, (local.returncode, local.stdout, local.stderr)
    assert "still have Slurm jobs queued or running" in local.stderr and "Traceback" not in local.stderr
    assert f"--resume {run_dir} --executor slurm" in local.stderr and "scancel " in local.stderr
    assert (run_dir / "journal.jsonl").read_bytes() == lines_before  # nothing was changed
    assert not list(run_dir.glob("trials/*/*.interrupted-*"))
    resumed = aorta("sweep", "run", "--resume", str(run_dir), "--executor", "slurm",
                    env={"SLEEP_S": "3"}, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    finished = [e["trial_id"] for e in journal(run_dir) if e["event"] == "trial_finished"]
    assert sorted(finished) == sorted(set(finished)) and len(finished) == 6
    runs = sorted(p.name.rsplit(".", 1)[0] for p in (tmp_path / "runs").iterdir())
    assert runs == sorted(set(runs)) and len(runs) == 6, runs  # every command ran exactly once
    assert not [d for r in _results(run_dir).values() for d in r["detections"]
                if d["id"] == "slurm_job_failed"]


def _ctrl_c_while_a_job_runs(tmp_path: Path, recipe: Path, script: Path, out: Path) -> Path:
    """Session 1 of a run, stopped by Ctrl-C once a job runs: every job scancelled and marked
    cancelled_by_orchestrator. Its run directory, once none of those jobs runs any more."""
    proc = _cli(
        tmp_path,
        "--batch",
        str(recipe),
        "--output",
        str(out),
        "--no-snapshot",
        "--executor",
        "slurm",
        "--",
        str(script),
        env={"SLEEP_S": "30"},
    )
    try:
        _wait_for_running_job(out)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    run_dir = only_run_dir(out)
    ids = list(_jobs(run_dir).values())
    end = time.monotonic() + 60  # scancel'ed: wait until Slurm has ended every one of them
    while set(_squeue(ids).values()) - {"CANCELLED", "COMPLETED", "FAILED"}:
        assert time.monotonic() < end, _squeue(ids)
        time.sleep(0.2)
    return run_dir


def _read_jobs_file(run_dir: Path) -> dict:
    return json.loads((run_dir / "slurm" / "jobs.json").read_text())


def _resume_stopped_after_its_sbatch(tmp_path: Path, run_dir: Path) -> subprocess.Popen[str]:
    """The resume, SIGSTOPped right after it wrote its array's job id: its tasks wait at the
    gate for a go it has not written, each with its job spec in its trial directory."""
    resume = _cli(tmp_path, "sweep", "run", "--resume", str(run_dir), env={"SLEEP_S": "0"})
    deadline = time.monotonic() + 60
    while len([b for b in _batches(run_dir.parent.parent) if b.get("job_id")]) < 2:
        assert resume.poll() is None and time.monotonic() < deadline, (
            resume.stderr and resume.stderr.read()
        )
        time.sleep(0.002)
    resume.send_signal(signal.SIGSTOP)  # its tasks start on the next scheduling pass, ~1 s away
    assert not list((run_dir / "slurm").glob("gate-s2-*.go")), "the gate opened before the stop"
    return resume


def test_a_cancelled_task_of_the_interrupted_session_never_takes_the_resumed_trials_spec(tmp_path):
    """CI, once: after Ctrl-C and --resume, one resubmitted job ended FAILED. end()'s scancel
    does not wait: a task of the cancelled array that was still starting (signalled, or never
    reached by a failed scancel) went past the gate, whose go its session had written, and read
    its spec path, which the resume had just written again for the resubmitted job of the same
    trial. It took that spec (and deleted it), and the resubmitted task found none: exit 3,
    FAILED. Here that late task is run by hand, between the resume's sbatch and its go."""
    recipe, script, out = _setup(tmp_path, trials=1)
    run_dir = _ctrl_c_while_a_job_runs(tmp_path, recipe, script, out)
    ((old_name, old),) = _read_jobs_file(run_dir)["batches"].items()  # session 1's one array
    manifest = run_dir / "slurm" / f"{old_name}.json"
    gate = run_dir / "slurm" / old["gate"]
    assert gate.with_name(gate.name + ".go").exists()  # session 1 let its tasks through
    resume = _resume_stopped_after_its_sbatch(tmp_path, run_dir)
    try:
        spec = Path(json.loads(manifest.read_text())["specs"][0])
        assert spec.is_file()  # the resubmitted job's spec, at the path the old task reads
        late = subprocess.run(
            [
                sys.executable,
                "-m",
                "aorta_tui.executor.slurm_job",
                "--gate",
                str(gate),
                gate.name.rsplit("-", 1)[1],
                str(manifest),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "SLURM_ARRAY_JOB_ID": old["job_id"], "SLURM_ARRAY_TASK_ID": "0"},
        )
        resume.send_signal(signal.SIGCONT)
        _, stderr = resume.communicate(timeout=180)
    finally:
        if resume.poll() is None:
            resume.kill()
    assert resume.returncode == 0, stderr
    new_ids = [j for j in _jobs(run_dir).values() if not j.startswith(f"{old['job_id']}_")]
    assert len(new_ids) == 3
    end = time.monotonic() + 60
    while any(s not in ("COMPLETED", "FAILED", "CANCELLED") for s in _squeue(new_ids).values()):
        assert time.monotonic() < end, _squeue(new_ids)
        time.sleep(0.2)
    # Slurm's own word on the resubmitted jobs (the CI failure: one of them FAILED)
    assert _squeue(new_ids) == dict.fromkeys(new_ids, "COMPLETED")
    res = _results(run_dir)
    # each outcome was written by the trial's own Slurm task, not by a task run outside it
    assert all(r["process"]["executor"]["slurm_job_id"] for r in res.values()), res
    assert {r["process"]["executor"]["state"] for r in res.values()} == {"COMPLETED"}
    # the late task of session 1 ran nothing, and said why
    assert late.returncode != 0 and "not this job's" in late.stderr, (late.returncode, late.stderr)


def _outcome_of_a_killed_task(array_job_id: str, task: int) -> dict:
    """``slurm-outcome.json`` as a task of array ``array_job_id`` writes it once scancel's
    SIGTERM ended its trial (slurm_job.run_trial)."""
    from aorta_tui.trial.supervisor import ProcessOutcome

    now = time.time()
    killed = ProcessOutcome(
        pid=4242,
        exit_code=None,
        signal=15,
        core_dumped=False,
        timed_out=False,
        cancelled=True,
        hang=None,
        exec_error=None,
        wall_s=0.1,
        started_at=now,
        ended_at=now,
        peak_rss_kb=None,
        gpu_peak_mem_bytes=None,
        gpu_mem_reason=None,
        stdout_bytes=0,
        stderr_bytes=0,
        truncated=False,
    )
    node = {"job_id": "old", "array_job_id": array_job_id, "array_task_id": str(task)}
    return {"schema_version": 1, "process": killed.to_dict(), "node": node, "signal": "SIGTERM"}


def test_an_outcome_a_cancelled_task_leaves_in_the_resumed_trials_directory_is_not_its_result(
    tmp_path,
):
    """The other half of that race: a task of the cancelled array that had read its spec
    before the resume writes its outcome (signalled: SIGTERM) after the resume reused the
    trial directory for the resubmitted job. The resume took that file as the new job's: the
    cancelled task's process, signal and Slurm ids in the trial's result. Here it is planted
    between the resume's sbatch and its go, for the trial the resume waits on first; the
    trial's result is its own job's."""
    recipe, script, out = _setup(tmp_path, trials=1)
    run_dir = _ctrl_c_while_a_job_runs(tmp_path, recipe, script, out)
    ((old_name, old),) = _read_jobs_file(run_dir)["batches"].items()  # session 1's one array
    manifest = json.loads((run_dir / "slurm" / f"{old_name}.json").read_text())
    trial_dir = Path(manifest["specs"][0]).parent  # the trial the resume waits on first
    resume = _resume_stopped_after_its_sbatch(tmp_path, run_dir)
    try:
        planted = _outcome_of_a_killed_task(old["job_id"], 0)
        (trial_dir / "slurm-outcome.json").write_text(json.dumps(planted))
        resume.send_signal(signal.SIGCONT)
        _, stderr = resume.communicate(timeout=180)
    finally:
        if resume.poll() is None:
            resume.kill()
    assert resume.returncode == 0, stderr
    tid = str(trial_dir.relative_to(run_dir / "trials"))
    mine = _results(run_dir)[tid]
    facts = mine["process"]["executor"]
    assert facts["job_id"] == _jobs(run_dir)[tid] != f"{old['job_id']}_0"
    assert facts["slurm_job_id"] != "old" and facts["signal"] is None, facts
    assert facts["state"] == "COMPLETED" and mine["process"]["pid"] != 4242
    assert mine["verdict"] in ("pass", "fail"), mine
