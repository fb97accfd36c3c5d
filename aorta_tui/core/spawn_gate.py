"""Every process this package starts is created through here, one creation at a time.

Why: a trial in a cgroup is born inside it because the orchestrator steps its whole process
into the trial's cgroup for the one vfork+exec and back out (``containment.CgroupScope.
step_in``). Writing a pid to ``cgroup.procs`` moves every thread of the process, so a child that
another thread creates in that window (a snapshot's probe, the warm zygote, an atomic write's
watcher) would be born in the trial's cgroup and killed with the trial; a thread that read
``/proc/self/cgroup`` then would take the trial's cgroup for the orchestrator's home, nest the
next trial inside it, and step back out into it - where the first trial's end killed the
orchestrator itself (seen in CI: SIGTERM to the test process). ``GATE`` is held for the whole
step and for every other creation, so none of them overlaps a step. It covers only the
``fork``/``exec`` (about a millisecond), never the wait for a child: ``run`` waits outside it.

Use ``popen`` and ``run`` exactly as ``subprocess.Popen`` and ``subprocess.run``;
``tests/reliability/test_rel_spawn_gate.py`` finds any creation that does not.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Any

GATE = threading.Lock()


def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen``, created while no trial's cgroup holds this process."""
    with GATE:
        return subprocess.Popen(*args, **kwargs)


def run(*popenargs: Any, input: str | bytes | None = None, capture_output: bool = False,  # noqa: A002 - run()'s name
        timeout: float | None = None, check: bool = False, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` with the same arguments, results and exceptions; only the creation
    is inside the gate."""
    if input is not None:
        if kwargs.get("stdin") is not None:
            raise ValueError("stdin and input arguments may not both be used.")
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output.")
        kwargs["stdout"] = subprocess.PIPE
        kwargs["stderr"] = subprocess.PIPE
    with popen(*popenargs, **kwargs) as proc:
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            exc.stdout, exc.stderr = proc.communicate()
            raise
        except BaseException:
            proc.kill()  # Popen.__exit__ then waits for it
            raise
        code = proc.poll()
        assert code is not None  # communicate() returned: the child was reaped
    if check and code:
        raise subprocess.CalledProcessError(code, proc.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(proc.args, code, stdout, stderr)
