"""A trial in a cgroup scope is started without a preexec_fn (so subprocess can vfork): the
orchestrator steps into the trial's cgroup for the one spawn and back out. Real processes and
a real cgroup v2 (skipped, with the reason, where this process cannot make one)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from aorta_tui.trial import containment
from aorta_tui.trial.supervisor import ProcessSpec, run_process


def _cgroup_or_skip() -> None:
    scope, why = containment._try_cgroup()
    if scope is None:
        pytest.skip(f"no cgroup v2 here: {why}")
    scope.close()


def _own_cgroup() -> str:
    return next(line for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))


def test_a_cgroup_trial_is_spawned_without_preexec_born_inside_and_the_orchestrator_returns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _cgroup_or_skip()
    seen: list[object] = []
    real = subprocess.Popen

    def spy(*args: object, **kw: object) -> subprocess.Popen[bytes]:
        seen.append(kw.get("preexec_fn"))
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(subprocess, "Popen", spy)
    before = _own_cgroup()
    # the trial forks a child at once and records both cgroups: each must be the trial's
    script = ("import os, sys, time\n"
              "pid = os.fork()\n"
              "if pid == 0:\n"
              "    open(sys.argv[1] + '.child', 'w').write(open('/proc/self/cgroup').read()); os._exit(0)\n"
              "os.waitpid(pid, 0)\n"
              "open(sys.argv[1], 'w').write(open('/proc/self/cgroup').read())\n")
    mark = tmp_path / "cg"
    spec = ProcessSpec(argv=[sys.executable, "-c", script, str(mark)], env={"PATH": "/usr/bin:/bin"},
                       cwd=tmp_path, stdout_path=tmp_path / "o.log", stderr_path=tmp_path / "e.log",
                       timeout_s=30, sample_gpu=False)
    out = run_process(spec)
    assert out.exit_code == 0 and out.containment == "cgroup", out
    assert seen == [None]  # no preexec_fn: vfork stays possible
    assert _own_cgroup() == before  # the orchestrator is back home
    for f in (mark, Path(str(mark) + ".child")):
        line = next(x for x in f.read_text().splitlines() if x.startswith("0::"))
        assert "/aorta-trial-" in line and line != before


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_cgroup_kill_of_a_finished_trial_never_reaches_the_orchestrator(tmp_path: Path) -> None:
    _cgroup_or_skip()
    for i in range(5):  # the scope's end kills its cgroup (cgroup.kill): we must be outside it
        spec = ProcessSpec(argv=["sleep", "30"], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                           stdout_path=tmp_path / f"o{i}.log", stderr_path=tmp_path / f"e{i}.log",
                           timeout_s=0.3, sample_gpu=False, kill_grace_s=0.2)
        t0 = time.monotonic()
        out = run_process(spec)
        assert out.timed_out and time.monotonic() - t0 < 20
    assert "/aorta-trial-" not in _own_cgroup()


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_trials_started_from_many_threads_at_once_are_each_born_in_their_own_cgroup(tmp_path: Path) -> None:
    """Eight threads start trials at once (as scripts/gpu_warm_check.py does): none is born in
    another's cgroup, so none is killed with another, and the orchestrator ends at home."""
    import concurrent.futures

    _cgroup_or_skip()
    before = _own_cgroup()
    script = ("import sys, time\n"
              "open(sys.argv[1], 'w').write(open('/proc/self/cgroup').read())\n"
              "time.sleep(0.3)\n")

    def one(i: int) -> tuple[int, str, str]:
        mark = tmp_path / f"cg{i}"
        spec = ProcessSpec(argv=[sys.executable, "-c", script, str(mark)], env={"PATH": "/usr/bin:/bin"},
                           cwd=tmp_path, stdout_path=tmp_path / f"o{i}.log", stderr_path=tmp_path / f"e{i}.log",
                           timeout_s=60, sample_gpu=False)
        out = run_process(spec)
        line = next(x for x in mark.read_text().splitlines() if x.startswith("0::"))
        return out.exit_code, out.containment, line

    for _ in range(3):
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            got = list(ex.map(one, range(8)))
        assert [code for code, _, _ in got] == [0] * 8, got
        assert all(kind == "cgroup" for _, kind, _ in got), got
        assert len({line for _, _, line in got}) == 8  # eight trials, eight cgroups
    assert _own_cgroup() == before
