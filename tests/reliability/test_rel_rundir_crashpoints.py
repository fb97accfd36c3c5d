"""Issue 12, item 1 and the crash-point harness: SIGKILL the orchestrator after every durable
write of a small real sweep, resume, and check the run holds exactly the planned trials.

A real bpftrace program watches the orchestrator's pid and sends it SIGKILL from inside the
kernel on the exit of its K-th ``rename``/``renameat``/``renameat2`` (every atomic file write,
the run directory's own creation, a retired trial) or its K-th ``fsync``/``fdatasync`` (every
journal line a resume trusts, every atomic write), for every K until a run completes unkilled.
Random kills never hit the window between a trial's ``result.json`` rename and its journal line;
this does, for each trial.

One bpftrace serves every case: the test registers each orchestrator's pid, the K and the kind
of write with a ``prctl`` call of an option no kernel knows (EINVAL, no effect), which the
program's ``sys_enter_prctl`` probe turns into map entries. The orchestrator is held before
``exec`` until its pid is registered, so the count starts at its first syscall.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.trace.conftest import _bpftrace_problem

pytestmark = [pytest.mark.bpftrace, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
MAGIC = 0x41435254  # "ACRT": no prctl option has this number
RENAME, FSYNC = 1, 2

PROGRAM = """
tracepoint:syscalls:sys_enter_prctl /args->option == MAGIC/ {
  $p = (uint64)args->arg2;
  @want[$p] = (uint64)args->arg3;
  @mode[$p] = (uint64)args->arg4;
  @hits[$p] = (uint64)0;
}
tracepoint:syscalls:sys_exit_rename, tracepoint:syscalls:sys_exit_renameat,
tracepoint:syscalls:sys_exit_renameat2 /@mode[(uint64)pid] == RENAME/ {
  @hits[(uint64)pid] = @hits[(uint64)pid] + (uint64)1;
  if (@hits[(uint64)pid] == @want[(uint64)pid]) { signal("SIGKILL"); }
}
tracepoint:syscalls:sys_exit_fsync, tracepoint:syscalls:sys_exit_fdatasync
/@mode[(uint64)pid] == FSYNC/ {
  @hits[(uint64)pid] = @hits[(uint64)pid] + (uint64)1;
  if (@hits[(uint64)pid] == @want[(uint64)pid]) { signal("SIGKILL"); }
}
BEGIN { printf("ready\\n"); }
END { clear(@want); clear(@mode); clear(@hits); }
""".replace("MAGIC", str(MAGIC)).replace("RENAME", str(RENAME)).replace("FSYNC", str(FSYNC))

RECIPE = """\
schema_version: 1
mode: probe
ticket: CRASH
trials: 2
mitigation_axis: [none, xnack]
diagnostic_axis: [none]
"""
PLANNED = {f"{cell}/trial-{n:03d}" for cell in ("none-none", "xnack-none") for n in range(2)}
COMMAND = ["sh", "-c", "echo step_time 0.01"]
# Held before exec until its pid is registered; the pid survives the exec.
HOLD = ("import os, sys; fd = int(sys.argv[1]); os.read(fd, 1); os.close(fd); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])")

_libc = ctypes.CDLL(None, use_errno=True)


def _register(pid: int, k: int, mode: int) -> None:
    _libc.prctl(ctypes.c_int(MAGIC), ctypes.c_ulong(pid), ctypes.c_ulong(k), ctypes.c_ulong(mode),
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
        for line in proc.stdout:  # "Attaching N probes...", then the program's own line
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


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aorta_tui", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO)


def _run_killed_at(recipe: Path, out: Path, k: int, mode: int) -> int:
    """Run the sweep once with SIGKILL due at its K-th write of ``mode``; its exit status."""
    return run_python_killed_at(["-m", "aorta_tui", "--batch", str(recipe), "--output", str(out),
                                 "--no-snapshot", "--json", "--", *COMMAND], k, mode)


def run_python_killed_at(args: list[str], k: int, mode: int) -> int:
    """``python ARGS`` with SIGKILL due at its K-th write of ``mode``; its exit status."""
    r, w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(r), *args],
        pass_fds=(r,), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, cwd=REPO,
    )
    os.close(r)
    _register(proc.pid, k, mode)
    os.write(w, b"x")
    os.close(w)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        _register(proc.pid, 0, 0)  # a reused pid is never killed by a stale entry
    assert proc.returncode in (0, -9), err.decode(errors="replace")[-2000:]
    return proc.returncode


def _problems(run_dir: Path) -> list[str]:
    """What is wrong with a finished run: anything but each planned trial exactly once."""
    problems = []
    matrix = json.loads((run_dir / "matrix.json").read_text())
    if matrix["status"] != "completed" or matrix["trials_finished"] != len(PLANNED):
        problems.append(f"matrix: {matrix['status']}, {matrix['trials_finished']} of {len(PLANNED)}")
    rows = Counter(t["trial_id"] for t in matrix["trials"])
    if set(rows) != PLANNED or set(rows.values()) != {1}:
        problems.append(f"matrix rows {dict(rows)}")
    cell_total = sum(c["passed"] + c["failed"] + c["errored"] for c in matrix["cells"])
    if cell_total != len(PLANNED):
        problems.append(f"cells count {cell_total} trials")
    events = [json.loads(x) for x in (run_dir / "journal.jsonl").read_text().splitlines() if x.strip()]
    finished = Counter(e["trial_id"] for e in events if e.get("event") == "trial_finished")
    if set(finished) != PLANNED or set(finished.values()) != {1}:
        problems.append(f"journal trial_finished {dict(finished)}")
    return problems


def _check_case(tmp: Path, k: int, mode: int) -> tuple[bool, list[str]]:
    """One crash point: run, kill, resume, check. Returns (was it killed, problems)."""
    case = tmp / f"m{mode}-k{k}"
    recipe = case / "probe.yaml"
    case.mkdir()
    recipe.write_text(RECIPE)
    out = case / "out"
    code = _run_killed_at(recipe, out, k, mode)
    runs = [p for p in out.glob("CRASH/*") if not p.name.startswith(".")]
    problems: list[str] = []
    if code == 0:
        assert len(runs) == 1
        return False, _problems(runs[0])
    if not runs:
        # Killed while the run directory was being created: nothing under a run's name, and the
        # half-made one says what it is when someone tries to resume it.
        staging = list(out.glob("CRASH/.*.creating"))
        for s in staging:
            res = _cli("sweep", "run", "--resume", str(s), "--no-snapshot")
            if res.returncode != 2 or "never fully created" not in res.stderr:
                problems.append(f"resume of {s.name}: exit {res.returncode}: {res.stderr[-300:]}")
        res = _cli("--batch", str(recipe), "--output", str(out), "--no-snapshot", "--", *COMMAND)
        if res.returncode != 0:
            return True, [*problems, f"fresh run after the kill: exit {res.returncode}: {res.stderr[-300:]}"]
        runs = [p for p in out.glob("CRASH/*") if not p.name.startswith(".")]
        return True, problems + _problems(runs[0])
    (run_dir,) = runs
    res = _cli("sweep", "run", "--resume", str(run_dir), "--no-snapshot")
    if res.returncode != 0 or "Traceback" in res.stderr:
        return True, [f"resume: exit {res.returncode}: {res.stderr[-500:]}"]
    return True, _problems(run_dir)


def _sweep_points(tmp: Path, mode: int, workers: int,
                  check: Callable[[Path, int, int], tuple[bool, list[str]]] | None = None,
                  ) -> tuple[int, dict[str, list[str]]]:
    """Every K of ``mode``, ``workers`` cases at a time, until a run completes unkilled
    (``check``: one case, default ``_check_case``; tests/policy/ passes its own)."""
    check = check or _check_case
    name = {RENAME: "rename", FSYNC: "fsync"}[mode]
    failures: dict[str, list[str]] = {}
    cases, k, done = 0, 0, False
    with ThreadPoolExecutor(workers) as pool:
        while not done:
            assert k < 200, f"the sweep never completed unkilled at {name} {k}"
            batch = list(range(k + 1, k + 1 + workers))
            for kk, (killed, problems) in zip(batch, pool.map(lambda kk: check(tmp, kk, mode), batch), strict=True):
                cases += 1
                if problems:
                    failures[f"{name} #{kk}"] = problems
                done = done or not killed
            k = batch[-1]
    assert k > 4, f"fewer than 4 {name} points: the hook did not see the orchestrator"
    return cases, failures


def test_sigkill_after_every_rename_and_fsync_then_resume_yields_the_planned_trials(
        killer, tmp_path: Path, attack_tally) -> None:
    # Cases are independent (own directories, own pid entries): run a few at once.
    workers = max(1, min(4, (os.cpu_count() or 1)))
    cases, failures = 0, {}
    for mode in (RENAME, FSYNC):
        n, f = _sweep_points(tmp_path, mode, workers)
        cases += n
        failures.update(f)
    attack_tally.record("crash points (SIGKILL after each rename/fsync)", cases=cases,
                        failures=len(failures), promise="resume yields exactly the planned trials")
    assert not failures, failures
