"""Issue 27, items 1 and 2: a SIGKILLed orchestrator's trial is ended by the resume, and a
forged journal line ends nothing.

Item 1 (kill points). A real bpftrace program SIGKILLs a real orchestrator from inside the
kernel at its K-th syscall exit (main thread) after its trial's process entered ``execve``, at
kill points over the whole window until the ``trial_started`` line of that trial is in the journal: the window in which the
process runs and the journal did not name it. The trial (``orphan-trial``, a script) keeps
writing ``orphan-was-here`` into its ``$AORTA_ARTIFACT_DIR`` for as long as it lives. Then the
real resume (``aorta-tui sweep run --resume``) must have ended it before the trial ran again
(nothing of the old attempt alive, nothing of it in the trial directory that counts), must
have said so (a ``warning`` event, code ``orphan``), and the run must hold the planned trial once.

The same harness runs a policy sweep then ``policy resume`` (its trial a ``queue run`` stand-in
that measures for a minute), and a queue sweep then ``queue resume`` (its points real
``queue run`` children, ``python -m aorta_tui.hwqueue.child``).

Item 2 (forgeries). A ``trial_started`` line naming a real, unrelated process-group leader (its
pid and, for the old check, its start time), then ``--resume`` / ``policy resume`` /
``queue resume``: the leader and its group must survive, and the resume must say it refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.trace.conftest import _bpftrace_problem

REPO = Path(__file__).resolve().parents[2]
MAGIC = 0x4143524F  # "ACRO": no prctl option has this number
BY_NAME, ANY_CHILD = 1, 2  # arm on a child's exec of `orphan-trial`, or on any child's exec
TRIAL_COMM = "orphan-trial"

# Arm when a child of the registered orchestrator has exec'd `orphan-trial` (BY_NAME), or when
# any child of it enters execve (ANY_CHILD: a vfork'd child's parent runs on while the exec
# completes); then count the orchestrator main thread's syscall exits, SIGKILL at the K-th.
PROGRAM = """
tracepoint:syscalls:sys_enter_prctl /args->option == MAGIC/ {
  $p = (uint64)args->arg2;
  @want[$p] = (uint64)args->arg3;
  @mode[$p] = (uint64)args->arg4;
  @hits[$p] = (uint64)0;
  @armed[$p] = (uint64)0;
}
tracepoint:sched:sched_process_exec /@want[(uint64)curtask->real_parent->tgid] != 0
    && @armed[(uint64)curtask->real_parent->tgid] == 0
    && @mode[(uint64)curtask->real_parent->tgid] == 1 && comm == "COMM"/ {
  @armed[(uint64)curtask->real_parent->tgid] = (uint64)1;
}
tracepoint:syscalls:sys_enter_execve /@want[(uint64)curtask->real_parent->tgid] != 0
    && @armed[(uint64)curtask->real_parent->tgid] == 0
    && @mode[(uint64)curtask->real_parent->tgid] == 2/ {
  @armed[(uint64)curtask->real_parent->tgid] = (uint64)1;
}
tracepoint:raw_syscalls:sys_exit /@armed[(uint64)pid] == 1 && tid == pid/ {
  @hits[(uint64)pid] = @hits[(uint64)pid] + (uint64)1;
  if (@hits[(uint64)pid] == @want[(uint64)pid]) { signal("SIGKILL"); @armed[(uint64)pid] = (uint64)2; }
}
BEGIN { printf("ready\\n"); }
END { clear(@want); clear(@mode); clear(@hits); clear(@armed); }
""".replace("MAGIC", str(MAGIC)).replace("COMM", TRIAL_COMM)

ENDED: dict[str, int] = {}  # engine -> orphan processes found after a kill and ended by its resume

HOLD = ("import os, sys; fd = int(sys.argv[1]); os.read(fd, 1); os.close(fd); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])")


def _register(pid: int, k: int, mode: int = BY_NAME) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(ctypes.c_int(MAGIC), ctypes.c_ulong(pid), ctypes.c_ulong(k), ctypes.c_ulong(mode),
               ctypes.c_ulong(0))


@pytest.fixture(scope="module")
def killer():
    problem = _bpftrace_problem()
    if problem:
        pytest.skip(problem)
    exe = os.environ.get("AORTA_TUI_BPFTRACE") or "bpftrace"
    with tempfile.NamedTemporaryFile("w", suffix=".bt", delete=False) as fh:
        fh.write(PROGRAM)
    proc = subprocess.Popen([exe, "--unsafe", fh.name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "ready" in line:
                break
        else:
            proc.kill()
            pytest.fail(f"bpftrace did not start: {proc.stderr.read()[-500:] if proc.stderr else ''}")
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.unlink(fh.name)


def run_killed_at(args: list[str], k: int, cwd: Path, env: dict[str, str],
                  late: Callable[[], bool] = lambda: False, mode: int = ANY_CHILD,
                  patience_s: float = 60.0) -> int:
    """``python ARGS`` in ``cwd``, SIGKILLed at its K-th syscall exit after its trial exec'd.

    ``late()``: the kill point is past the window (its line is in the journal); once it says so,
    the test SIGKILLs the orchestrator itself (an idle orchestrator makes few syscalls)."""
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(r), *args], pass_fds=(r,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(r)
    _register(proc.pid, k, mode)
    os.write(w, b"x")
    os.close(w)
    try:
        end = time.monotonic() + patience_s
        while proc.poll() is None:
            if late() or time.monotonic() > end:  # idle in the window: few syscalls come
                proc.kill()
            time.sleep(0.05)
    finally:
        _register(proc.pid, 0)
    assert proc.returncode in (0, -9), proc.returncode
    return proc.returncode


def marked(case: Path) -> set[int]:
    """Live processes started for this case (its marker is in their environment)."""
    want = f"ORPHAN_CASE={case}".encode()
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if want in env and state != b"Z":
            out.add(int(name))
    return out


def trial_mains(pids: set[int]) -> set[int]:
    """The trial processes among ``pids``, not the short ``sleep`` the shell loop runs (which
    ends by itself and must not count as an orphan the resume ended)."""
    out = set()
    for pid in pids:
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0) != b"sleep":
            out.add(pid)
    return out


def kill_all(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def journal(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def kill_points(check: Callable[[int], tuple[str, list[str]]], probe: Callable[[int], str],
                workers: int = 2, spread: int = 6) -> tuple[int, int, dict[int, list[str]]]:
    """The window is every syscall exit from the trial's exec to its ``trial_started`` write:
    ``probe(k)`` says where a kill at ``k`` lands ("window", "after", "done"); a binary search
    finds the window's end N, then ``check`` runs at ``spread`` kill points over [1, N - 1]
    (the first, the last and evenly between). Returns (N - 1, points tried, failures)."""
    lo, hi = 1, 8
    while probe(hi) == "window":  # grow until a kill lands after the line
        lo, hi = hi, hi * 2
        if hi > 128:  # the window never closes (the line is never written): sample its start
            lo = hi = 128
            break
    while hi - lo > 1:  # lo: in the window (or 1), hi: after it
        mid = (lo + hi) // 2
        if probe(mid) == "window":
            lo = mid
        else:
            hi = mid
    last = lo
    points = sorted({1, last, *(1 + (last - 1) * i // (spread - 1) for i in range(spread))})
    failures: dict[int, list[str]] = {}
    tried = 0
    with ThreadPoolExecutor(workers) as pool:
        for k, (where, problems) in zip(points, pool.map(check, points), strict=True):
            if where != "window":
                continue  # a kill point whose timing moved out of the window: not counted
            tried += 1
            if problems:
                failures[k] = problems
    return last, tried, failures


# -- the recipe sweep ------------------------------------------------------------------------

TRIAL = textwrap.dedent("""\
    #!/bin/sh
    # The first attempt runs until it is ended, marking the trial directory it writes into.
    if mkdir "$ORPHAN_CASE/first" 2>/dev/null; then
      while :; do date +%s.%N > "$AORTA_ARTIFACT_DIR/orphan-was-here" 2>/dev/null; sleep 0.05; done
    fi
    sleep 0.5
    echo step_time 0.01
    """)

RECIPE = """\
schema_version: 1
mode: probe
ticket: ORPH
trials: 1
mitigation_axis: [none]
diagnostic_axis: [none]
"""


def _case_env(case: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ORPHAN_CASE"] = str(case)
    env["PATH"] = f"{case / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["PYTHONPATH"] = str(REPO)
    return env


def _make_case(root: Path, name: str) -> Path:
    case = root / name
    (case / "bin").mkdir(parents=True)
    trial = case / "bin" / TRIAL_COMM
    trial.write_text(TRIAL)
    trial.chmod(0o755)
    (case / "probe.yaml").write_text(RECIPE)
    return case


def _cli(args: list[str], case: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=case, env=_case_env(case))


def _sweep_case(root: Path, k: int, *, probe_only: bool = False) -> tuple[str, list[str]]:
    case = _make_case(root, f"sweep-k{k}{'-probe' if probe_only else ''}")
    try:
        def started() -> bool:
            return any(e.get("event") == "trial_started" for p in (case / "aorta-out").glob("ORPH/*/")
                       for e in journal(p / "journal.jsonl"))

        code = run_killed_at(["-m", "aorta_tui", "--batch", "probe.yaml", "--no-snapshot",
                              "--json", "--", TRIAL_COMM], k, case, _case_env(case), late=started)
        if code == 0:
            return "done", []
        (run_dir,) = [p for p in (case / "aorta-out" / "ORPH").iterdir() if not p.name.startswith(".")]
        lines = journal(run_dir / "journal.jsonl")
        if any(e.get("event") == "trial_started" for e in lines):
            return "after", []
        if probe_only:
            return "window", []
        orphans = marked(case) - {os.getpid()}
        mains = trial_mains(orphans)
        problems: list[str] = []
        if not orphans:
            problems.append("the trial was not running after the kill")
        res = _cli(["sweep", "run", "--resume", str(run_dir.relative_to(case)), "--no-snapshot",
                    "--json"], case)
        if res.returncode != 0 or "Traceback" in res.stderr:
            problems.append(f"resume: exit {res.returncode}: {res.stderr[-400:]}")
        alive = orphans & marked(case)
        ENDED["sweep"] = ENDED.get("sweep", 0) + len(mains - alive)
        if alive:
            problems.append(f"the old attempt still runs after the resume: pid {sorted(alive)}")
        events = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
        if orphans and not any(e.get("event") == "warning" and e.get("code") == "orphan"
                               for e in events):
            problems.append("the resume did not say it ended the orphan")
        counted = run_dir / "trials" / "none-none" / "trial-000"
        if (counted / "orphan-was-here").exists():
            problems.append("the orphan wrote into the trial directory that counts")
        matrix = json.loads((run_dir / "matrix.json").read_text())
        if matrix["trials_finished"] != 1 or matrix["status"] != "completed":
            problems.append(f"matrix: {matrix['status']}, {matrix['trials_finished']} of 1")
        return "window", problems
    finally:
        kill_all(marked(case))


@pytest.mark.bpftrace
@pytest.mark.slow
def test_sweep_orphans_killed_in_the_spawn_window_are_ended_by_the_resume(
        killer, tmp_path: Path, attack_tally) -> None:
    window, points, failures = kill_points(
        lambda k: _sweep_case(tmp_path, k), lambda k: _sweep_case(tmp_path, k, probe_only=True)[0])
    attack_tally.record("orphans: sweep kill points (exec .. trial_started)", cases=points,
                        failures=len(failures),
                        promise=f"the resume ends the old attempt first (window: {window} syscalls; "
                                f"{ENDED.get('sweep', 0)} orphaned trial processes ended)")
    assert points >= 4, f"only {points} kill points: the hook did not see the window"
    assert not failures, failures


# -- the policy sweep ------------------------------------------------------------------------

POLICY_TRIAL = textwrap.dedent("""\
    #!PYTHON -I
    # A queue-run stand-in: the first attempt measures until it is ended, marking the trial
    # directory its result goes to; later attempts write a queue result at once.
    import json, os, sys, time
    out = sys.argv[sys.argv.index("-o") + 1]
    try:
        os.mkdir(os.path.join(os.environ["ORPHAN_CASE"], "first"))
        while True:
            with open(os.path.join(os.path.dirname(out), "orphan-was-here"), "w") as fh:
                fh.write(str(time.time()))
            time.sleep(0.05)
    except FileExistsError:
        pass
    time.sleep(0.3)
    json.dump({"schema_version": 1, "kind": "aorta-tui/queue-result", "emulated": True,
               "workload": {"name": "fake"}, "config": {"streams": 2},
               "platform": {"backend": "cpu"},
               "summary": {"throughput": 100.0}, "summary_units": {"throughput": "items/s"},
               "summary_better": {"throughput": "higher"}, "unavailable": {}}, open(out, "w"))
    """)

POLICY_ORCHESTRATOR = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    from aorta_tui.policy.evaluator import PolicySweepRequest, resume_policy_sweep, run_policy_sweep
    from aorta_tui.policy.presets import Policy

    trial, out, what = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

    def command(req, policy, result):
        return [trial, "-o", str(result)]

    if what == "sweep":
        req = PolicySweepRequest(workload="fake", policies=(Policy(name="other", env={"X_SHIFT": "1"}),),
                                 streams=2, output_dir=out, trials=1, seed=4, python=sys.executable)
        run_policy_sweep(req, trial_command=command)
    else:
        events = []
        resume_policy_sweep(out, trial_command=command, on_event=events.append)
        print(json.dumps([e.to_dict() for e in events]))
    """)


def _policy_case(root: Path, k: int, *, probe_only: bool = False) -> tuple[str, list[str]]:
    case = root / f"policy-k{k}{'-probe' if probe_only else ''}"
    (case / "bin").mkdir(parents=True)
    trial = case / "bin" / TRIAL_COMM
    trial.write_text(POLICY_TRIAL.replace("PYTHON", sys.executable))
    trial.chmod(0o755)
    (case / "orch.py").write_text(POLICY_ORCHESTRATOR)
    run = case / "run"
    env = _case_env(case)

    def started() -> bool:
        return any(e.get("event") == "trial_started" for e in journal(run / "journal.jsonl"))

    try:
        code = run_killed_at([str(case / "orch.py"), str(trial), str(run), "sweep"], k, case, env,
                             late=started)
        if code == 0:
            return "done", []
        if started():
            return "after", []
        if probe_only:
            return "window", []
        orphans = marked(case)
        mains = trial_mains(orphans)
        problems = [] if orphans else ["the trial was not running after the kill"]
        res = subprocess.run([sys.executable, str(case / "orch.py"), str(trial), str(run), "resume"],
                             capture_output=True, text=True, timeout=120, cwd=case, env=env)
        if res.returncode != 0:
            return "window", [f"resume: exit {res.returncode}: {res.stderr[-400:]}"]
        alive = orphans & marked(case)
        ENDED["policy"] = ENDED.get("policy", 0) + len(mains - alive)
        if alive:
            problems.append(f"the old attempt still runs after the resume: pid {sorted(alive)}")
        events = json.loads(res.stdout.splitlines()[-1])
        if orphans and not any(e["event"] == "warning" and e.get("code") == "orphan" for e in events):
            problems.append("the resume did not say it ended the orphan")
        if list((run / "trials").glob("*/orphan-was-here")):
            problems.append("the orphan wrote into a trial directory that counts")
        report = json.loads((run / "policy.json").read_text())
        ok = sorted(t["dir"] for t in report["trials"] if t["status"] == "ok")
        if report["status"] != "completed" or len(ok) != 2:
            problems.append(f"report: {report['status']}, ok trials {ok}")
        return "window", problems
    finally:
        kill_all(marked(case))


@pytest.mark.bpftrace
@pytest.mark.slow
def test_policy_orphans_killed_in_the_spawn_window_are_ended_by_policy_resume(
        killer, tmp_path: Path, attack_tally) -> None:
    window, points, failures = kill_points(
        lambda k: _policy_case(tmp_path, k), lambda k: _policy_case(tmp_path, k, probe_only=True)[0])
    attack_tally.record("orphans: policy sweep kill points (exec .. trial_started)", cases=points,
                        failures=len(failures),
                        promise=f"policy resume ends the old attempt first (window: {window} syscalls; "
                                f"{ENDED.get('policy', 0)} orphaned trial processes ended)")
    assert points >= 4, f"only {points} kill points: the hook did not see the window"
    assert not failures, failures


# -- the queue sweep -------------------------------------------------------------------------


def _queue_tmp(run: Path) -> set[str]:
    """The old runner's temp directories that hold a point of the sweep in ``run``."""
    try:
        sweep_id = json.loads((run / "request.json").read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        return set()
    out = set()
    for p in Path(tempfile.gettempdir()).glob("aorta-queue-*"):
        try:
            if json.loads((p / "config.json").read_text()).get("run_id", "").startswith(sweep_id):
                out.add(p.name)
        except (OSError, ValueError, AttributeError):
            continue
    return out


def _queue_case(root: Path, k: int, *, probe_only: bool = False) -> tuple[str, list[str]]:
    """A real ``queue sweep`` (its points real ``queue run`` children, a long CPU run each),
    SIGKILLed in the window of its first point; then a real ``queue resume``, stopped once its
    own first point started: by then the old point must be gone."""
    case = root / f"queue-k{k}{'-probe' if probe_only else ''}"
    case.mkdir(parents=True)
    env = _case_env(case)
    run = case / "qrun"

    def started() -> bool:  # the journal names the point's process (before the fix: pid null)
        return any(e.get("event") == "trial_started" and e.get("pid")
                   for e in journal(run / "journal.jsonl"))

    try:
        code = run_killed_at(["-m", "aorta_tui", "queue", "sweep", "tiny_kernel_stress",
                              "--streams", "1,2", "--device", "cpu", "--iterations", "200000",
                              "--run-dir", "qrun", "--json"], k, case, env, late=started,
                             mode=ANY_CHILD, patience_s=8.0)
        if code == 0:
            return "done", []
        if started():
            return "after", []
        if probe_only:
            return "window", []
        orphans = marked(case)
        mains = trial_mains(orphans)
        problems = [] if orphans else ["the point was not running after the kill"]
        resume = subprocess.Popen([sys.executable, "-m", "aorta_tui", "queue", "resume", "qrun",
                                   "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, cwd=case, env=env)
        assert resume.stdout is not None
        events: list[dict[str, Any]] = []
        alive: set[int] = set()
        for line in resume.stdout:
            events.append(json.loads(line))
            if events[-1]["event"] == "trial_started":
                alive = orphans & marked(case)  # the re-run has begun: the old one must be gone
                break
        resume.kill()
        resume.wait()
        resume.stdout.close()
        ENDED["queue"] = ENDED.get("queue", 0) + len(mains - alive)
        if alive:
            problems.append(f"the old point still measures beside its re-run: pid {sorted(alive)}")
        if not any(e["event"] == "trial_started" for e in events):
            problems.append(f"the resume never started the point: {events[-3:]}")
        if orphans and not any(e["event"] == "warning" and e.get("code") == "orphan" for e in events):
            problems.append("the resume did not say it ended the orphan")
        left = _queue_tmp(run)
        if left:
            problems.append(f"left in {tempfile.gettempdir()}: {sorted(left)}")
        return "window", problems
    finally:
        kill_all(marked(case))


@pytest.mark.bpftrace
@pytest.mark.slow
def test_queue_orphans_killed_in_the_spawn_window_are_ended_by_queue_resume(
        killer, tmp_path: Path, attack_tally) -> None:
    window, points, failures = kill_points(
        lambda k: _queue_case(tmp_path, k), lambda k: _queue_case(tmp_path, k, probe_only=True)[0])
    attack_tally.record("orphans: queue sweep kill points (exec .. trial_started)", cases=points,
                        failures=len(failures),
                        promise=f"queue resume ends the old point first (window: {window} syscalls; "
                                f"{ENDED.get('queue', 0)} orphaned trial processes ended)")
    assert points >= 4, f"only {points} kill points: the hook did not see the window"
    assert not failures, failures


# -- item 2: forged journal lines ------------------------------------------------------------


def _victim() -> subprocess.Popen[bytes]:
    """An unrelated process-group leader with a member: what a forger names."""
    return subprocess.Popen(["sh", "-c", "sleep 300 & exec sleep 300"], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def _group(pgid: int) -> set[int]:
    from aorta_tui.trial import proctree

    return set(proctree.live_group_members(pgid))


def _forge(journal_path: Path, trial_id: str, cell: str, victim: int) -> None:
    """Cut the journal before ``trial_id``'s trial_finished line (as a kill there would) and
    append a trial_started line naming ``victim`` with its real start time, as anyone can read
    it from /proc (the old check compared exactly those)."""
    from aorta_tui.trial import proctree

    lines = journal_path.read_text().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines)
               if json.loads(x).get("event") == "trial_finished" and json.loads(x)["trial_id"] == trial_id)
    began = proctree.start_time(victim)
    assert began is not None
    forged = {"event": "trial_started", "run_id": "forged", "ts": began, "trial_id": trial_id,
              "cell": cell, "trial": 1, "attempt": 1, "pid": victim}
    journal_path.write_text("".join(lines[:cut]) + json.dumps(forged) + "\n")


def _check_refused(victim: subprocess.Popen[bytes], members: set[int], messages: list[str]) -> list[str]:
    problems = []
    alive = _group(victim.pid)
    if victim.poll() is not None or not members <= alive:
        problems.append(f"the unrelated group was signalled (left: {sorted(alive)} of {sorted(members)})")
    if not any(f"pid {victim.pid}" in m and "left alone" in m for m in messages):
        problems.append(f"the resume did not say it refused pid {victim.pid}: {messages[-3:]}")
    return problems


def _forged_sweep(root: Path) -> list[str]:
    case = root / "forge-sweep"
    case.mkdir()
    (case / "probe.yaml").write_text(RECIPE.replace("trials: 1", "trials: 2"))
    res = _cli(["--batch", "probe.yaml", "--no-snapshot", "--", "true"], case)
    assert res.returncode == 0, res.stderr
    (run_dir,) = list((case / "aorta-out" / "ORPH").iterdir())
    victim = _victim()
    try:
        members = _wait_group(victim.pid, 2)
        _forge(run_dir / "journal.jsonl", "none-none/trial-001", "none-none", victim.pid)
        res = _cli(["sweep", "run", "--resume", str(run_dir.relative_to(case)), "--no-snapshot",
                    "--json"], case)
        if res.returncode != 0:
            return [f"resume: exit {res.returncode}: {res.stderr[-300:]}"]
        events = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
        return _check_refused(victim, members, [e.get("message", "") for e in events
                                                if e["event"] == "warning"])
    finally:
        victim.kill()
        victim.wait()
        kill_all(_group(victim.pid))


def _forged_policy(root: Path) -> list[str]:
    case = root / "forge-policy"
    (case / "bin").mkdir(parents=True)
    (case / "first").mkdir()  # every attempt of the stand-in writes its result at once
    trial = case / "bin" / TRIAL_COMM
    trial.write_text(POLICY_TRIAL.replace("PYTHON", sys.executable))
    trial.chmod(0o755)
    (case / "orch.py").write_text(POLICY_ORCHESTRATOR)
    run, env = case / "run", _case_env(case)
    res = subprocess.run([sys.executable, str(case / "orch.py"), str(trial), str(run), "sweep"],
                         capture_output=True, text=True, timeout=120, cwd=case, env=env)
    assert res.returncode == 0, res.stderr
    last = [e for e in journal(run / "journal.jsonl") if e.get("event") == "trial_finished"][-1]
    victim = _victim()
    try:
        members = _wait_group(victim.pid, 2)
        _forge(run / "journal.jsonl", last["trial_id"], last["cell"], victim.pid)
        res = subprocess.run([sys.executable, str(case / "orch.py"), str(trial), str(run), "resume"],
                             capture_output=True, text=True, timeout=120, cwd=case, env=env)
        if res.returncode != 0:
            return [f"resume: exit {res.returncode}: {res.stderr[-300:]}"]
        events = json.loads(res.stdout.splitlines()[-1])
        return _check_refused(victim, members, [e.get("message", "") for e in events
                                                if e["event"] == "warning"])
    finally:
        victim.kill()
        victim.wait()
        kill_all(_group(victim.pid))


def _forged_queue(root: Path) -> list[str]:
    case = root / "forge-queue"
    case.mkdir()
    env = _case_env(case)
    res = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "sweep", "tiny_kernel_stress",
                          "--streams", "1", "--device", "cpu", "--iterations", "5", "--run-dir",
                          "qrun"], capture_output=True, text=True, timeout=120, cwd=case, env=env)
    assert res.returncode == 0, res.stderr
    victim = _victim()
    try:
        members = _wait_group(victim.pid, 2)
        _forge(case / "qrun" / "journal.jsonl", "s0001", "s0001", victim.pid)
        # without --json, as a user runs it: the warning is printed on stderr, as sweep and
        # policy resumes print theirs (issue 37 item 5: it went only to the journal)
        res = subprocess.run([sys.executable, "-m", "aorta_tui", "queue", "resume", "qrun"],
                             capture_output=True, text=True, timeout=120, cwd=case, env=env)
        if res.returncode != 0:
            return [f"resume: exit {res.returncode}: {res.stderr[-300:]}"]
        return _check_refused(victim, members, [ln for ln in res.stderr.splitlines()
                                                if ln.startswith("warning: ")])
    finally:
        victim.kill()
        victim.wait()
        kill_all(_group(victim.pid))


def _wait_group(pgid: int, n: int) -> set[int]:
    end = time.monotonic() + 10
    while len(members := _group(pgid)) < n:
        assert time.monotonic() < end, f"the victim's group never had {n} members"
        time.sleep(0.01)
    return members


@pytest.mark.slow
def test_a_forged_trial_started_line_ends_no_unrelated_process_group(tmp_path: Path, attack_tally) -> None:
    failures = {}
    engines = {"sweep": _forged_sweep, "policy": _forged_policy, "queue": _forged_queue}
    for name, forge in engines.items():
        problems = forge(tmp_path)
        if problems:
            failures[name] = problems
    attack_tally.record("orphans: forged trial_started lines (sweep, policy, queue resume)",
                        cases=len(engines), failures=len(failures),
                        promise="the named group survives; the resume says it refused")
    assert not failures, failures
