"""trial_isolation: warm - trials forked from a zygote that imported (real, CPU) torch once.

Real processes throughout: one zygote per module (its `import torch` is the expensive part),
trials forked from it and supervised by the real run_process; the CLI for the recipe checks
and one end-to-end sweep.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aorta_tui.trial import containment, proctree, timeline
from aorta_tui.trial.hang import HangPolicy
from aorta_tui.trial.supervisor import ProcessSpec, run_process
from aorta_tui.trial.warm import MAX_ZYGOTES, WarmLauncher, WarmPool, start_zygote
from aorta_tui.trial.warm_vars import import_time_reader
from aorta_tui.trial.warm_zygote import recv_message
from tests.engine_support import aorta, only_run_dir

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

pytest.importorskip("torch")

WORKLOAD = textwrap.dedent('''\
    """A workload that reports what its process sees."""
    import ctypes, os, subprocess, sys, time
    from typing import ClassVar
    from aorta_tui.registry.workload import Workload, WorkloadResult


    class Probe(Workload):
        name: ClassVar[str] = "warm_probe_t"

        def setup(self, ctx):
            import torch
            self.t = torch.ones(4)

        def run(self, ctx):
            import torch
            libc = ctypes.CDLL(None)
            libc.getenv.restype = ctypes.c_char_p
            raw = libc.getenv(b"WARM_T_VAR")
            if os.environ.get("WARM_T_CHILD"):
                child = subprocess.Popen(["sleep", "60"])
                open(os.path.join(str(ctx.trial_dir), "child.pid"), "w").write(str(child.pid))
            print("to stdout", flush=True)
            print("to stderr", file=sys.stderr, flush=True)
            for i in range(ctx.steps):
                ctx.on_step(i, 0.001)
            time.sleep(float(os.environ.get("WARM_T_SLEEP", "0")))
            return WorkloadResult(metrics={
                "c_getenv": raw.decode() if raw is not None else None,
                "environ_var": os.environ.get("WARM_T_VAR"),
                "zygote_only": os.environ.get("WARM_T_ZYGOTE_ONLY"),
                "cwd": os.getcwd(), "pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
                "sum": float(self.t.sum()), "threads": torch.get_num_threads()},
                step_times_s=[0.001] * ctx.steps)
    ''')


@pytest.fixture(scope="module")
def plug(tmp_path_factory):
    root = tmp_path_factory.mktemp("warmplug")
    (root / "warm_probe_t.py").write_text(WORKLOAD)
    return root


@pytest.fixture(scope="module")
def zygote(plug):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plug), os.environ.get("PYTHONPATH", "")]),
           "PYTHONUNBUFFERED": "1", "WARM_T_ZYGOTE_ONLY": "leaked"}
    z = start_zygote(("test",), env, ["warm_probe_t"], Path.cwd(), plug / "zygote.log", run_dir=plug)
    yield z
    z.close()
    assert z.proc.returncode is not None  # the zygote leaves when its socket closes


def _spec(plug: Path, tdir: Path, extra: dict | None = None, timeout: float | None = 60,
          hang: HangPolicy | None = None, launcher=None, var: str = "trial-value") -> ProcessSpec:
    tdir.mkdir(parents=True)
    spec = tdir / "trial_spec.json"
    spec.write_text(json.dumps({"workload": "warm_probe_t", "workload_ref": "warm_probe_t:Probe", "steps": 3,
                                "config": {}, "seed": 0, "trial_dir": str(tdir), "switches": []}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plug), os.environ.get("PYTHONPATH", "")]),
           "PYTHONUNBUFFERED": "1", "WARM_T_VAR": var, **(extra or {})}
    env.pop("WARM_T_ZYGOTE_ONLY", None)
    return ProcessSpec(argv=[sys.executable, "-m", "aorta_tui.trial.worker", str(spec)], env=env,
                       cwd=tdir, stdout_path=tdir / "stdout.log", stderr_path=tdir / "stderr.log",
                       timeout_s=timeout, hang=hang, sample_gpu=False, kill_grace_s=0.5, launcher=launcher)


def _result(tdir: Path) -> dict:
    return json.loads((tdir / "workload_result.json").read_text())


def test_a_forked_trial_reports_what_a_fresh_process_reports(tmp_path, plug, zygote):
    fresh = run_process(_spec(plug, tmp_path / "fresh", var="fresh-value"))
    warm = run_process(_spec(plug, tmp_path / "warm", var="warm-value", launcher=WarmLauncher(zygote)))
    assert fresh.exit_code == warm.exit_code == 0
    rf, rw = _result(tmp_path / "fresh"), _result(tmp_path / "warm")
    assert set(rf) == set(rw) and rf["passed"] and rw["passed"]
    mf, mw = rf["metrics"], rw["metrics"]
    # the trial's environment is the C environment of the fork (what runtimes getenv), and only it
    assert (mf["c_getenv"], mf["environ_var"]) == ("fresh-value", "fresh-value")
    assert (mw["c_getenv"], mw["environ_var"], mw["zygote_only"]) == ("warm-value", "warm-value", None)
    assert mw["cwd"] == str(tmp_path / "warm")
    # its own session and process group, led by the process the supervisor waited for
    assert mw["pid"] == warm.pid == mw["pgid"] == mw["sid"] != zygote.pid
    for name in ("fresh", "warm"):
        out = (tmp_path / name / "stdout.log").read_text()
        assert "to stdout" in out and "aorta-step 2 " in out and "aorta-mark result_written" in out
        assert "to stderr" in (tmp_path / name / "stderr.log").read_text()
    assert warm.containment == fresh.containment
    # a fork starts with the zygote's pages: a peak below max(zygote, orchestrator) says nothing
    assert warm.peak_rss_kb is not None or warm.peak_rss_reason.startswith("at most ")
    tl = timeline.build(warm.marks, wall_start=warm.started_at, child=rw["timeline"],
                        stdout_marks=_marks(tmp_path / "warm" / "stdout.log"))
    assert timeline.is_ordered(tl)
    assert {"spawn", "spawned", "interpreter_up", "device_ready", "first_step", "last_step",
            "result_written", "exited", "reaped"} <= set(tl["marks"])
    assert tl["unavailable"]["torch_imported"].startswith(f"imported once by the warm zygote (pid {zygote.pid}")
    assert tl["info"]["warm"]["zygote_pid"] == zygote.pid


def _none_seen(out) -> bool:  # noqa: ANN001 - a ProcessOutcome
    """No survivor seen, as the containment can know it: ``None`` (not known, with the reason)
    where the trial may move itself out of its cgroup (issue 27 item 3), else ``[]``."""
    if out.containment == "cgroup":
        base, _why = containment.own_cgroup_dir()
        if base is not None and containment._leave_reason(base) is not None:
            return out.survivors is None and "not seen" in (out.survivors_reason or "")
    return out.survivors == []


def test_timeout_ends_the_forked_trial_and_its_children_and_the_zygote_serves_on(tmp_path, plug, zygote):
    out = run_process(_spec(plug, tmp_path / "slow", {"WARM_T_SLEEP": "60", "WARM_T_CHILD": "1"}, timeout=3,
                            launcher=WarmLauncher(zygote)))
    assert out.timed_out and _none_seen(out) and out.killed_count >= 2
    child = int((tmp_path / "slow" / "child.pid").read_text())
    assert not proctree.is_alive(child)
    # the orchestrator is a subreaper in warm mode: the orphan it inherited was reaped, no zombie
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}")
    assert zygote.proc.poll() is None  # a trial's kill never reaches its zygote
    again = run_process(_spec(plug, tmp_path / "next", launcher=WarmLauncher(zygote)))
    assert again.exit_code == 0 and _result(tmp_path / "next")["passed"]


def test_the_hang_detector_fires_on_a_silent_forked_trial(tmp_path, plug, zygote):
    out = run_process(_spec(plug, tmp_path / "hang", {"WARM_T_SLEEP": "60"}, timeout=30,
                            hang=HangPolicy(window_s=1.0, grace_s=0.0), launcher=WarmLauncher(zygote)))
    # fired by the detector, before the 30 s timeout and the 60 s sleep: no wall time asserted
    assert out.hang is not None and not out.timed_out and _none_seen(out)


def test_a_zygote_that_is_gone_is_a_trial_that_did_not_start(tmp_path, plug):
    env = {**os.environ, "PYTHONPATH": str(plug)}
    z = start_zygote(("gone",), env, ["no_such_module_here"], Path.cwd(), tmp_path / "z.log",
                     run_dir=tmp_path)
    out = run_process(_spec(plug, tmp_path / "t", launcher=WarmLauncher(z)))
    z.close()
    assert out.pid is None and "did not start" in out.exec_error and "no_such_module_here" in out.exec_error


def test_one_zygote_per_environment_and_import_time_values(tmp_path):
    pool = WarmPool(tmp_path, [], None)
    a = pool.key("local", {"X": "1", "OMP_NUM_THREADS": "2", "AORTA_TRIAL_ID": "c/trial-000"})
    b = pool.key("local", {"X": "2", "OMP_NUM_THREADS": "2", "AORTA_TRIAL_ID": "c/trial-001"})
    c = pool.key("local", {"X": "1", "OMP_NUM_THREADS": "4"})
    assert a == b != c and pool.key("other", {"OMP_NUM_THREADS": "2"}) != a
    for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "OMP_NUM_THREADS", "TORCH_LOGS",
                 "PYTORCH_CUDA_ALLOC_CONF", "TORCHINDUCTOR_CACHE_DIR", "TORCHDYNAMO_VERBOSE"):
        assert import_time_reader(name), name
    for name in ("CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS",
                 "PYTORCH_NO_CUDA_MEMORY_CACHING", "NCCL_DEBUG", "HIP_VISIBLE_DEVICES"):
        assert import_time_reader(name) is None, name


RECIPE = """\
schema_version: 1
ticket: WARM
workload: gpu_smoke
trials: 1
steps: 2
trial_isolation: warm
{extra}cells:
  - name: baseline-local
    mitigations: [none]
    extra_env: {{AORTA_WARM_RUNTIME: "a"}}
  - name: tf32_off-local
    mitigations: [tf32_off]
{cell_env}"""


def test_each_import_time_value_gets_a_zygote_and_too_many_are_refused_and_listed(tmp_path):
    recipe = tmp_path / "r.yaml"
    # two cells differing in import-time variables: two zygotes, accepted
    recipe.write_text(RECIPE.format(extra="", cell_env='    extra_env: {OMP_NUM_THREADS: "1", LD_PRELOAD: ""}\n'))
    p = aorta("--batch", str(recipe), "--dry-run")
    assert p.returncode == 0, p.stdout + p.stderr
    # five distinct sets need five zygotes: more than MAX_ZYGOTES, refused with every cell named
    cells = "".join(f"  - name: c{i}\n    mitigations: [none]\n    extra_env: {{OMP_NUM_THREADS: \"{i + 1}\"}}\n"
                    for i in range(MAX_ZYGOTES + 1))
    recipe.write_text("schema_version: 1\nticket: WARM\nworkload: gpu_smoke\ntrials: 1\nsteps: 2\n"
                      "trial_isolation: warm\ncells:\n" + cells)
    p = aorta("--batch", str(recipe), "--dry-run")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert f"need {MAX_ZYGOTES + 1} zygotes" in p.stderr and "OMP_NUM_THREADS" in p.stderr
    assert all(f"cells[{i}] (c{i})" in p.stderr for i in range(MAX_ZYGOTES + 1))
    assert "r.yaml" in p.stderr and "trial_isolation" in p.stderr
    # the same variable for every trial (extra_env) is what the zygote starts with: accepted
    recipe.write_text(RECIPE.format(extra='extra_env: {OMP_NUM_THREADS: "1"}\n', cell_env=""))
    assert aorta("--batch", str(recipe), "--dry-run").returncode == 0
    probe = tmp_path / "p.yaml"
    probe.write_text("schema_version: 1\nmode: probe\nticket: P\ntrials: 1\nmitigation_axis: [none]\n"
                     "diagnostic_axis: [none]\n")
    p = aorta("--batch", str(probe), "--trial-isolation", "warm", "--output", str(tmp_path / "o"), "--", "true")
    assert p.returncode == 2 and "opaque command" in p.stderr, p.stderr


def test_a_warm_sweep_runs_every_trial_from_its_zygote(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(extra="", cell_env=""))
    t0 = time.monotonic()
    p = aorta("--batch", str(recipe), "--output", str(tmp_path / "out"), "--no-snapshot", timeout=240)
    assert p.returncode == 0, p.stderr
    run = only_run_dir(tmp_path / "out")
    results = [json.loads(x.read_text()) for x in run.glob("trials/*/trial-*/result.json")]
    assert len(results) == 2 and all(r["verdict"] == "pass" for r in results)
    zygotes = {r["timeline"]["info"]["warm"]["zygote_pid"] for r in results}
    assert len(zygotes) == 1 and (run / "warm" / "zygote-1.log").exists()
    for r in results:
        assert timeline.is_ordered(r["timeline"]) and r["process"]["exit_code"] == 0
        assert r["argv"][-1].endswith("trial_spec.json")
    assert time.monotonic() - t0 < 200


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64) | st.builds(lambda n, b: n.to_bytes(4, "big") + b,
                                          st.integers(0, 2**32 - 1), st.binary(max_size=64)))
def test_a_malformed_request_stream_is_a_clean_end_or_a_value_error(attack_tally, data):
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(data)
        theirs.close()
        try:
            msg, fds = recv_message(ours, max_fds=3)
            ok = msg is None or isinstance(msg, dict)
        except ValueError:  # too large, not JSON, not UTF-8, not an object
            ok = True
        attack_tally.record("warm zygote framing fuzzer", cases=1, failures=0 if ok else 1,
                            promise="a message, the end of the stream or ValueError; never a hang")
        assert ok
    finally:
        ours.close()


def test_a_forked_trial_sees_the_import_time_value_of_its_own_zygote(tmp_path, plug):
    """OMP_NUM_THREADS is read by the OpenMP runtime when `import torch` loads it: a trial
    forked from a zygote started with the trial's own value reports that value, as a fresh
    process would; the other value gets the other zygote."""
    pool = WarmPool(tmp_path, ["warm_probe_t"], None)
    seen = {}
    try:
        for threads in ("1", "2", "1"):
            spec = _spec(plug, tmp_path / f"t{len(seen)}-{threads}", extra={"OMP_NUM_THREADS": threads})
            out = run_process(_spec_with(spec, pool.launcher("local", spec.env)))
            assert out.exit_code == 0, out
            r = _result(spec.cwd)["metrics"]
            seen[(len(seen), threads)] = (r["threads"], r["pid"])
        assert len(pool.zygotes) == 2
    finally:
        pool.close()
    assert [t for t, _ in seen.values()] == [1, 2, 1]


def _spec_with(spec: ProcessSpec, launcher) -> ProcessSpec:
    import dataclasses

    return dataclasses.replace(spec, launcher=launcher)


def test_the_zygote_preloads_what_it_can_and_leaves_the_rest_to_the_trial(tmp_path, plug):
    env = {**os.environ, "PYTHONPATH": str(plug)}
    z = start_zygote(("pre",), env, ["warm_probe_t", "json.decoder", "no_such_module_xyz"], Path.cwd(),
                     tmp_path / "z.log", run_dir=tmp_path)
    try:
        z.wait_ready()
        assert z.ready, z.error
        assert "json.decoder" in z.info["preload_ms"] and "warm_probe_t" in z.info["preload_ms"]
        assert "ModuleNotFoundError" in z.info["preload_skipped"]["no_such_module_xyz"]
    finally:
        z.close()


def test_the_workloads_preload_what_their_first_step_imports():
    from aorta_tui.trial.warm import preload_modules
    from aorta_tui.workloads.training import Training

    class Cell:
        def __init__(self, cfg):
            self.workload_config = cfg

    ddp = preload_modules(Training, [Cell({})])
    assert ddp[0] == Training.__module__ and "torch._dynamo" in ddp  # torch.optim's step
    assert "torch.distributed.fsdp" not in ddp
    assert "torch.distributed.fsdp" in preload_modules(Training, [Cell({}), Cell({"parallelism": "fsdp"})])


def test_a_killed_zygote_is_named_by_its_signal(tmp_path, plug):
    import signal

    env = {**os.environ, "PYTHONPATH": str(plug)}
    z = start_zygote(("killed",), env, ["warm_probe_t"], Path.cwd(), tmp_path / "z.log", run_dir=tmp_path)
    os.kill(z.pid, signal.SIGKILL)
    out = run_process(_spec(plug, tmp_path / "t", launcher=WarmLauncher(z)))
    z.close()
    assert out.pid is None and "killed by SIGKILL" in out.exec_error, out.exec_error


ORPHAN_ORCHESTRATOR = textwrap.dedent('''\
    import json, os, sys
    from pathlib import Path
    from aorta_tui.trial import orphans
    from aorta_tui.trial.supervisor import ProcessSpec, run_process
    from aorta_tui.trial.warm import WarmLauncher, start_zygote

    plug, run_dir = Path(sys.argv[1]), Path(sys.argv[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plug), os.environ.get("PYTHONPATH", "")]),
           "PYTHONUNBUFFERED": "1"}
    z = start_zygote(("orphan",), env, ["warm_probe_t"], Path.cwd(), run_dir / "zygote.log", run_dir=run_dir)
    ident = orphans.mint("r-warm", zygote_token=z.token)
    tdir = run_dir / "trial"
    tdir.mkdir()
    (tdir / "trial_spec.json").write_text(json.dumps({
        "workload": "warm_probe_t", "workload_ref": "warm_probe_t:Probe", "steps": 3, "config": {},
        "seed": 0, "trial_dir": str(tdir), "switches": []}))
    spec = ProcessSpec(argv=[sys.executable, "-m", "aorta_tui.trial.worker", str(tdir / "trial_spec.json")],
                       env={**env, "WARM_T_SLEEP": "60", "WARM_T_CHILD": "1", **ident.env}, cwd=tdir,
                       stdout_path=tdir / "stdout.log", stderr_path=tdir / "stderr.log", sample_gpu=False,
                       launcher=WarmLauncher(z))
    print(json.dumps(list(ident.digests)), flush=True)
    run_process(spec, on_start=lambda pid: print(pid, flush=True))
    ''')


def test_a_forked_trial_left_by_a_killed_orchestrator_is_proved_by_its_zygote_token_and_ended(tmp_path, plug):
    """Issue 27 items 1-2, warm: a forked trial's /proc/<pid>/environ shows its zygote's
    exec-time environment, not its own, so the zygote's token is what proves it is the run's."""
    from aorta_tui.core.events import TrialLaunch, TrialStarted
    from aorta_tui.trial import orphans

    orch = subprocess.Popen([sys.executable, "-c", ORPHAN_ORCHESTRATOR, str(plug), str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    assert orch.stdout is not None
    digests = json.loads(orch.stdout.readline())
    pid = int(orch.stdout.readline())
    child_file = tmp_path / "trial" / "child.pid"
    deadline = time.monotonic() + 60
    while not child_file.exists():
        assert time.monotonic() < deadline and orch.poll() is None, "the forked trial never ran"
        time.sleep(0.05)
    time.sleep(0.1)  # the pid is written before the file is closed
    child = int(child_file.read_text())
    orch.kill()
    orch.wait()
    orch.stdout.close()
    try:
        assert proctree.is_alive(pid) and proctree.is_alive(child)  # both outlived it
        tid = "c/trial-000"
        started = TrialStarted("r", trial_id=tid, cell="c", trial=0, pid=pid)
        refused = orphans.end_unfinished(tmp_path, "r-warm", [started], {tid})
        assert refused.refused == 1 and proctree.is_alive(pid)
        launch = TrialLaunch("r", trial_id=tid, cell="c", trial=0, identity=digests)
        report = orphans.end_unfinished(tmp_path, "r-warm", [launch, started], {tid}, grace_s=1.0)
        assert report.ended >= 2, report
        assert not proctree.is_alive(pid) and not proctree.is_alive(child)
    finally:
        for p in (pid, child):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


def _marks(path: Path) -> dict[str, int]:
    with open(path, "rb") as fh:
        return timeline.read_stdout_marks(fh)
