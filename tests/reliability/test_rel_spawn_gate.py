"""The spawn gate (core/spawn_gate.py): while a trial's spawn has stepped this process into the
trial's cgroup, no other thread creates a process, nor reads this process's cgroup, and the
trial's end never signals this process.

The defect it fixes: a thread that read /proc/self/cgroup while another thread's trial spawn
had the process inside that trial's cgroup created its own trial's cgroup inside the first, and
stepped back out into it; the first trial's end then sent SIGTERM to every pid its cgroup listed,
the orchestrator among them (CI: the test process "Terminated" at 35%). Real threads, real
cgroups, real processes; the tests that could kill their runner run in a child Python.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.core import spawn_gate
from aorta_tui.trial import containment
from aorta_tui.trial.supervisor import ProcessSpec, run_process

PACKAGE = Path(__file__).resolve().parents[2] / "aorta_tui"


def _cgroup_or_skip() -> None:
    scope, why = containment._try_cgroup()
    if scope is None:
        pytest.skip(f"no cgroup v2 here: {why}")
    scope.close()


def _cgroup_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("0::"))


def _own_cgroup() -> str:
    return _cgroup_line(Path("/proc/self/cgroup").read_text())


# -- every creation goes through the gate -------------------------------------------------------

# (module, call) pairs allowed to create a process directly, and why.
ALLOWED = {
    ("core/spawn_gate.py", "subprocess.Popen"): "the gate itself",
    ("trial/supervisor.py", "subprocess.Popen"): "the trial spawn: inside step_in, or under GATE",
    ("trial/warm_zygote.py", "os.fork"): "runs in the zygote, a process that steps nowhere",
    ("privsep/boot.py", "os.fork"): "the privileged helper's fork under sudo, as the tool starts: "
                                    "before any thread, trial or cgroup step exists",
}
CREATORS = {"subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call",
            "subprocess.check_output", "subprocess.getoutput", "subprocess.getstatusoutput",
            "os.system", "os.popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp",
            "pty.spawn", "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell"}


def _calls(tree: ast.AST) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name):
            name = f"{node.func.value.id}.{node.func.attr}"
            if name in CREATORS:
                found.append((name, node.lineno))
        if isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "os", "pty", "asyncio"):
            for alias in node.names:
                if f"{node.module}.{alias.name}" in CREATORS:
                    found.append((f"from {node.module} import {alias.name}", node.lineno))
    return found


def test_no_module_creates_a_process_except_through_the_gate() -> None:
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for name, line in _calls(ast.parse(path.read_text(), str(path))):
            if (rel, name) not in ALLOWED:
                stray.append(f"aorta_tui/{rel}:{line}: {name} (use spawn_gate.popen/run)")
    assert stray == []


def test_the_rule_finds_a_direct_creation() -> None:
    src = "import subprocess, os\nsubprocess.run(['true'])\nos.fork()\nfrom subprocess import Popen\n"
    assert sorted(n for n, _ in _calls(ast.parse(src))) == ["from subprocess import Popen", "os.fork", "subprocess.run"]


# -- run() is subprocess.run --------------------------------------------------------------------

@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=25, deadline=None)
@given(data=st.binary(max_size=2048), code=st.integers(0, 255), text=st.booleans())
def test_run_returns_what_subprocess_run_returns(data: bytes, code: int, text: bool) -> None:
    argv = [sys.executable, "-c",
            "import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(d[::-1]); "
            f"sys.stderr.buffer.write(d[:7]); sys.exit({code})"]
    payload: bytes | str = data.decode("latin-1") if text else data
    kw = {"encoding": "latin-1"} if text else {}
    ours = spawn_gate.run(argv, input=payload, capture_output=True, timeout=30, **kw)
    theirs = subprocess.run(argv, input=payload, capture_output=True, timeout=30, **kw)
    assert (ours.args, ours.returncode, ours.stdout, ours.stderr) == \
        (theirs.args, theirs.returncode, theirs.stdout, theirs.stderr)


def test_run_check_and_timeout_raise_as_subprocess_run_does() -> None:
    with pytest.raises(subprocess.CalledProcessError) as err:
        spawn_gate.run(["sh", "-c", "echo out; exit 3"], capture_output=True, text=True, check=True)
    assert err.value.returncode == 3 and err.value.stdout == "out\n"
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as late:
        spawn_gate.run(["sh", "-c", "echo early; exec sleep 30"], stdout=subprocess.PIPE, timeout=0.5)
    assert time.monotonic() - t0 < 20  # killed, not waited for
    assert late.value.stdout == b"early\n"
    with pytest.raises(ValueError, match="capture_output"):
        spawn_gate.run(["true"], capture_output=True, stdout=subprocess.PIPE)
    assert not spawn_gate.GATE.locked()


# -- the race, made deterministic ---------------------------------------------------------------

def test_a_scope_opened_while_another_spawn_is_stepped_in_is_made_under_home() -> None:
    """Thread A holds the process inside trial X's cgroup; thread B opens a scope meanwhile.
    B must wait, and make its cgroup beside X (under home), never inside X."""
    _cgroup_or_skip()
    home, _why = containment.own_cgroup_dir()
    x = containment.open_scope({})
    assert isinstance(x, containment.CgroupScope)
    got: list[containment.Scope] = []
    try:
        assert x.step_in()
        assert x.path.name in _own_cgroup()  # inside X now
        b = threading.Thread(target=lambda: got.append(containment.open_scope({})))
        b.start()
        b.join(0.3)
        assert b.is_alive()  # waits for the gate
    finally:
        x.step_out()
    b.join(10)
    assert got and isinstance(got[0], containment.CgroupScope)
    assert got[0].path.parent == home != x.path
    assert _own_cgroup() != "" and x.path.name not in _own_cgroup()
    got[0].close()
    x.close()


def test_a_process_created_while_a_spawn_is_stepped_in_is_born_at_home() -> None:
    _cgroup_or_skip()
    x = containment.open_scope({})
    assert isinstance(x, containment.CgroupScope)
    out: list[str] = []
    try:
        assert x.step_in()
        t = threading.Thread(target=lambda: out.append(
            spawn_gate.run(["cat", "/proc/self/cgroup"], capture_output=True, text=True).stdout))
        t.start()
        t.join(0.3)
        assert t.is_alive()
    finally:
        x.step_out()
    t.join(10)
    assert out and x.path.name not in _cgroup_line(out[0]) and "/aorta-trial-" not in _cgroup_line(out[0])
    x.close()


# Run in a child: were the guard gone, the signals would end the process that sends them.
SELF_KILL = textwrap.dedent("""
    import os, signal, sys
    from aorta_tui.trial import containment
    x = containment.open_scope({})
    assert isinstance(x, containment.CgroupScope), x.reason
    x.leave_reason = None  # only what cgroup.procs lists
    signal.signal(signal.SIGTERM, lambda *a: (print("got SIGTERM", flush=True), os._exit(9)))
    assert x.step_in()
    try:
        x.signal(signal.SIGTERM, [])
        x.kill_all([])
        print("members", sorted(x.members()), flush=True)
    finally:
        x.step_out()
    x.close()
    print("alive", flush=True)
""")


def test_a_trials_end_never_signals_the_orchestrator_even_inside_its_cgroup() -> None:
    _cgroup_or_skip()
    proc = subprocess.run([sys.executable, "-c", SELF_KILL], capture_output=True, text=True, timeout=60,
                          cwd=PACKAGE.parent)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout.splitlines() == ["members []", "alive"]


def test_trials_from_many_threads_and_other_spawns_meanwhile_all_land_where_they_belong(tmp_path: Path) -> None:
    """Eight threads run 24 trials while a ninth creates short processes without pause: every
    trial is born in a cgroup of its own, no other process in a trial's cgroup, and this
    process ends where it began - and alive."""
    import concurrent.futures

    _cgroup_or_skip()
    before = _own_cgroup()
    stop = threading.Event()
    foreign: list[str] = []

    def churn() -> None:
        while not stop.is_set():
            foreign.append(_cgroup_line(spawn_gate.run(["cat", "/proc/self/cgroup"],
                                                       capture_output=True, text=True).stdout))

    script = "import sys\nopen(sys.argv[1], 'w').write(open('/proc/self/cgroup').read())\n"

    def one(i: int) -> tuple[int, str, str]:
        mark = tmp_path / f"cg{i}"
        spec = ProcessSpec(argv=[sys.executable, "-I", "-S", "-c", script, str(mark)],
                           env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, stdout_path=tmp_path / f"o{i}.log",
                           stderr_path=tmp_path / f"e{i}.log", timeout_s=60, sample_gpu=False)
        out = run_process(spec)
        return out.exit_code, out.containment, _cgroup_line(mark.read_text())

    churner = threading.Thread(target=churn)
    churner.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            got = list(ex.map(one, range(24)))
    finally:
        stop.set()
        churner.join(30)
    assert [(code, kind) for code, kind, _ in got] == [(0, "cgroup")] * 24, got
    assert len({line for _, _, line in got}) == 24
    assert all(line.count("/aorta-trial-") == 1 for _, _, line in got)  # none nested in another
    assert foreign and not [line for line in foreign if "/aorta-trial-" in line]
    assert _own_cgroup() == before
