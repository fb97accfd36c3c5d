"""io_idle counts the workers' I/O, not a launcher's: launcher recognition from argv, and the
HangMonitor on real process trees whose root is named like a launcher and polls like one.

The stand-in launcher is a real Python process that does what torchrun's agent does while its
ranks wait - a small read/write every few milliseconds (torchrun: its rendezvous store, about
once a second) - while its child, the worker, sleeps. tests/trial/test_worker_torchrun_hang.py
runs the real torchrun.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.trial import proctree
from aorta_tui.trial.gpu_probe import UtilReading
from aorta_tui.trial.hang import HangMonitor, HangPolicy

PY = sys.executable

POLLING_LAUNCHER = r"""
import os, subprocess, sys, time
worker = subprocess.Popen(["sleep", "100"] if sys.argv[1] == "worker-sleeps" else ["true"])
if sys.argv[1] != "worker-sleeps":
    worker.wait()
open(sys.argv[2], "w").write(str(worker.pid))
log = open(sys.argv[2] + ".poll", "w")
while True:                       # the store poll: a little I/O, all the time
    log.write("x" * 64); log.flush()
    os.stat(sys.argv[2])
    time.sleep(0.01)
"""


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["torchrun", "--nproc_per_node=2", "train.py"], "torchrun"),
        (["/venv/bin/python3", "/venv/bin/torchrun", "--standalone", "x.py"], "torchrun"),
        (["python3", "-m", "torch.distributed.run", "--standalone", "x.py"], "torch.distributed.run"),
        (["python3.11", "-u", "-X", "faulthandler", "-m", "torch.distributed.launch", "x.py"],
         "torch.distributed.launch"),
        (["python", "-mtorch.distributed.run", "x.py"], "torch.distributed.run"),
        (["/usr/bin/mpirun", "-np", "4", "python", "x.py"], "mpirun"),
        (["mpiexec.hydra", "-n", "2", "a.out"], "mpiexec.hydra"),
        (["/opt/ompi/bin/orted", "-mca", "ess", "env"], "orted"),
        (["/venv/bin/python", "/venv/bin/accelerate", "launch", "train.py"], "accelerate launch"),
        # not launchers: the ranks themselves, other modules, a -c program, accelerate's other commands
        (["python3", "scripts/rank_hang.py", "--hang-rank", "1"], None),
        (["python3", "-m", "aorta_tui", "queue", "run", "x"], None),
        (["python3", "-c", "import torchrun"], None),
        (["python3", "-m", "torch.distributed.elastic.agent"], None),
        (["/venv/bin/python", "/venv/bin/accelerate", "config"], None),
        (["python3"], None),
        ([], None),
        (None, None),
    ],
)
def test_launcher_names(argv: list[str] | None, name: str | None) -> None:
    assert proctree.launcher_name(argv) == name


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\0"), max_size=12), max_size=8))
def test_launcher_name_never_raises_and_only_names_known_launchers(argv: list[str]) -> None:
    name = proctree.launcher_name(argv)
    known = proctree.LAUNCHER_PROGRAMS | proctree.LAUNCHER_MODULES | {"accelerate launch"}
    assert name is None or name in known


def test_cmdline_of_a_real_process() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        end = time.monotonic() + 10
        while proctree.cmdline(proc.pid) != ["sleep", "30"] and time.monotonic() < end:
            time.sleep(0.01)  # between fork and exec the argv is not there yet
        assert proctree.cmdline(proc.pid) == ["sleep", "30"]
    finally:
        proc.kill()
        proc.wait()
    assert proctree.cmdline(proc.pid) is None


def _start(tmp_path: Path, script_name: str, mode: str, wrap_in_shell: bool = False) -> tuple[subprocess.Popen, int]:
    script = tmp_path / script_name
    script.write_text(POLLING_LAUNCHER)
    marker = tmp_path / f"{script_name}.{mode}.pid"
    argv = [PY, str(script), mode, str(marker)]
    if wrap_in_shell:  # a shell that started the launcher and waits for it (no exec: two commands)
        argv = ["sh", "-c", " ".join(argv) + "; true"]
    proc = subprocess.Popen(argv, start_new_session=True)
    end = time.monotonic() + 20
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < end and proc.poll() is None, "the stand-in launcher did not start"
        time.sleep(0.02)
    worker = int(marker.read_text())
    if mode == "worker-sleeps":
        _wait_settled(worker, end)
    return proc, worker


def _wait_settled(worker: int, end: float) -> None:
    """Until the worker is ``sleep`` and its I/O counters hold still: the launcher writes the
    pid right after fork, and on a loaded box the exec and the loader's reads of libc could
    land between the monitor's two checks (CI saw io_idle not hold once)."""
    def io() -> str:
        return Path(f"/proc/{worker}/io").read_text()

    while True:
        assert time.monotonic() < end, "the stand-in worker did not settle"
        if proctree.cmdline(worker) == ["sleep", "100"]:
            before = io()
            time.sleep(0.1)
            if io() == before:
                return
        time.sleep(0.02)


@pytest.fixture
def started(tmp_path: Path) -> Iterator:
    procs: list[subprocess.Popen] = []

    def start(script_name: str, mode: str, wrap_in_shell: bool = False) -> tuple[int, int]:
        proc, worker = _start(tmp_path, script_name, mode, wrap_in_shell)
        procs.append(proc)
        return proc.pid, worker

    yield start
    for proc in procs:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _two_checks(root: int) -> tuple[HangMonitor, object]:
    """A baseline, 0.4 s of real time (the launcher polls ~40 times), then a check 5 s later
    on the monitor's clock: io_idle holds only if the I/O it counts did not change."""
    mon = HangMonitor(HangPolicy(window_s=1.0, grace_s=0.0), root, started=0.0)
    assert mon.check(0.0) is None
    time.sleep(0.4)
    return mon, mon.check(5.0)


def test_a_polling_launcher_does_not_hide_its_idle_worker(started) -> None:
    root, worker = started("torchrun", "worker-sleeps")
    _mon, report = _two_checks(root)
    assert report is not None, "the worker was idle; the launcher's polling must not count"
    assert set(report.held()) == {"output_silence", "io_idle"}
    assert report.io_scope == f"1 worker process(es), not the launcher (torchrun pid {root})"
    assert "io counted over 1 worker process(es)" in report.summary()


def test_the_same_polling_process_counts_when_it_is_not_a_launcher(started) -> None:
    root, _worker = started("supervisor.py", "worker-sleeps")
    _mon, report = _two_checks(root)
    assert report is None  # its own I/O is activity: only output_silence held


def test_a_shell_above_the_launcher_is_a_supervisor_too(started) -> None:
    root, _worker = started("torchrun", "worker-sleeps", wrap_in_shell=True)
    _mon, report = _two_checks(root)
    assert report is not None and report.io_scope is not None
    assert report.io_scope.startswith("1 worker process(es), not the launcher (torchrun pid ")
    assert report.io_scope.endswith(" and 1 process(es) above it)")


def test_a_launcher_without_workers_makes_io_idle_unavailable(started) -> None:
    root, _worker = started("torchrun", "no-worker")
    _mon, report = _two_checks(root)
    # only output silence is left: one signal cannot make a hang (rendezvous, restart, teardown)
    assert report is None
    # with an idle GPU as the second signal the report shows why io_idle was left out
    gpu = GpuStandIn(UtilReading(5.0, True, None, idle_since=0.0))
    mon = HangMonitor(HangPolicy(window_s=1.0, grace_s=0.0), root, started=0.0, gpu=gpu)  # type: ignore[arg-type]
    mon.check(0.0)
    report = mon.check(5.0)
    assert report is not None and set(report.held()) == {"output_silence", "gpu_idle"}
    assert report.unavailable == {"io_idle": f"only the launcher runs (torchrun (pid {root})): "
                                             "no worker process to watch (rendezvous, restart or teardown)"}


@dataclass
class GpuStandIn:  # there is no GPU here; the real sampler runs in the gpu-marked tests
    reading: UtilReading
    interval_s: float = 1.0

    def latest_utilisation(self) -> UtilReading:
        return self.reading


# -- the TCPStore server thread inside a worker --------------------------------------------------

NAMED_WRITER = r"""
import ctypes, sys, threading, time
def serve():
    ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)   # PR_SET_NAME: the thread's comm
    log = open(sys.argv[2] + ".io", "w")
    while True:
        log.write("x" * 64); log.flush(); time.sleep(0.01)
threading.Thread(target=serve, daemon=True).start()
open(sys.argv[2], "w").write("ready")
time.sleep(100)                                                   # the process's own work: none
"""


@pytest.mark.parametrize(("thread_name", "hangs"), [("pt_tcpstore_uv", True), ("writer", False)])
def test_a_store_server_thread_is_not_the_workers_activity(tmp_path: Path, thread_name: str, hangs: bool) -> None:
    (tmp_path / "w.py").write_text(NAMED_WRITER)
    marker = tmp_path / "ready"
    proc = subprocess.Popen([PY, str(tmp_path / "w.py"), thread_name, str(marker)], start_new_session=True)
    try:
        end = time.monotonic() + 20
        while not marker.exists():
            assert time.monotonic() < end and proc.poll() is None
            time.sleep(0.02)
        _mon, report = _two_checks(proc.pid)
        assert (report is not None) is hangs
        if hangs:
            assert set(report.held()) == {"output_silence", "io_idle"} and report.io_scope is None
    finally:
        proc.kill()
        proc.wait()


STORE_SERVER = r"""
import sys, time
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, world_size=2, is_master=True, wait_for_workers=False)
open(sys.argv[1], "w").write(str(store.port))
time.sleep(100)
"""
STORE_CLIENT = r"""
import sys, time
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), world_size=2, is_master=False)
while True:                       # what ProcessGroupNCCL's monitor thread does once a second
    store.check(["dump_signal"]); time.sleep(0.01)
"""


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_real_tcpstore_servers_io_is_left_out(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    for name, text in (("server.py", STORE_SERVER), ("client.py", STORE_CLIENT)):
        (tmp_path / name).write_text(text)
    port_file = tmp_path / "port"
    server = subprocess.Popen([PY, str(tmp_path / "server.py"), str(port_file)], start_new_session=True)
    client = None
    try:
        end = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text():
            assert time.monotonic() < end and server.poll() is None, "the store server did not start"
            time.sleep(0.05)
        client = subprocess.Popen([PY, str(tmp_path / "client.py"), port_file.read_text()], start_new_session=True)
        excluded = proctree.STORE_SERVER_THREADS

        def both() -> tuple[int | None, int | None]:
            return proctree.io_bytes(server.pid), proctree.io_bytes(server.pid, exclude_threads=excluded)

        # wait until the client's polls reach the server (its import takes seconds)
        first = both()
        while both()[0] == first[0]:
            assert time.monotonic() < end and client.poll() is None, "the client never polled"
            time.sleep(0.05)
        a, client_a = both(), proctree.io_bytes(client.pid)
        time.sleep(0.5)
        b, client_b = both(), proctree.io_bytes(client.pid)
        assert a[0] is not None and b[0] is not None and a[1] is not None
        assert b[0] > a[0]  # the whole process: the server thread's read()/write() of every poll
        assert b[1] == a[1]  # without the pt_tcpstore* thread: nothing
        # the polling client itself uses send()/recv(), which /proc/<pid>/io does not count
        assert client_a is not None and client_b == client_a
        names = {Path(f"/proc/{server.pid}/task/{t}/comm").read_text().strip()
                 for t in os.listdir(f"/proc/{server.pid}/task")}
        assert any(n.startswith("pt_tcpstore") for n in names), names
    finally:
        for proc in (client, server):
            if proc is not None:
                proc.kill()
                proc.wait()
