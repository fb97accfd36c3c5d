"""Issue 27, items 1 and 2: a SIGKILLed orchestrator's trial is ended by the resume, and a
forged journal line ends nothing.

Item 1 (kill points). A real bpftrace program SIGKILLs a real orchestrator from inside the
kernel at its K-th syscall exit (main thread) after its trial's process exec'd, for every K
until the ``trial_started`` line of that trial is in the journal: the window in which the
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
ON_EXEC, ON_SENDMSG = 1, 2
TRIAL_COMM = "orphan-trial"

# Arm when a child of the registered orchestrator execs `orphan-trial` (ON_EXEC); then count
# the orchestrator main thread's syscall exits and SIGKILL it at the K-th.
PROGRAM = """
tracepoint:syscalls:sys_enter_prctl /args->option == MAGIC/ {
  $p = (uint64)args->arg2;
  @want[$p] = (uint64)args->arg3;
  @hits[$p] = (uint64)0;
  @armed[$p] = (uint64)0;
}
tracepoint:sched:sched_process_exec /@want[(uint64)curtask->real_parent->tgid] != 0 && comm == "COMM"/ {
  @armed[(uint64)curtask->real_parent->tgid] = (uint64)1;
}
tracepoint:raw_syscalls:sys_exit /@armed[(uint64)pid] == 1 && tid == pid/ {
  @hits[(uint64)pid] = @hits[(uint64)pid] + (uint64)1;
  if (@hits[(uint64)pid] == @want[(uint64)pid]) { signal("SIGKILL"); @armed[(uint64)pid] = (uint64)2; }
}
BEGIN { printf("ready\\n"); }
END { clear(@want); clear(@hits); clear(@armed); }
""".replace("MAGIC", str(MAGIC)).replace("COMM", TRIAL_COMM)

HOLD = ("import os, sys; fd = int(sys.argv[1]); os.read(fd, 1); os.close(fd); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])")


def _register(pid: int, k: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(ctypes.c_int(MAGIC), ctypes.c_ulong(pid), ctypes.c_ulong(k), ctypes.c_ulong(0),
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
                  late: Callable[[], bool] = lambda: False) -> int:
    """``python ARGS`` in ``cwd``, SIGKILLed at its K-th syscall exit after its trial exec'd.

    ``late()``: the kill point is past the window (its line is in the journal); once it says so,
    the test SIGKILLs the orchestrator itself (an idle orchestrator makes few syscalls)."""
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(r), *args], pass_fds=(r,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(r)
    _register(proc.pid, k)
    os.write(w, b"x")
    os.close(w)
    try:
        end = time.monotonic() + 120
        while proc.poll() is None:
            assert time.monotonic() < end, "the orchestrator neither ended nor was killed"
            if late():
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
        assert hi < 10_000, "no end of the window"
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
        problems: list[str] = []
        if not orphans:
            problems.append("the trial was not running after the kill")
        res = _cli(["sweep", "run", "--resume", str(run_dir.relative_to(case)), "--no-snapshot",
                    "--json"], case)
        if res.returncode != 0 or "Traceback" in res.stderr:
            problems.append(f"resume: exit {res.returncode}: {res.stderr[-400:]}")
        alive = orphans & marked(case)
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
                        promise=f"the resume ends the old attempt first (window: {window} syscalls)")
    assert points >= 4, f"only {points} kill points: the hook did not see the window"
    assert not failures, failures
