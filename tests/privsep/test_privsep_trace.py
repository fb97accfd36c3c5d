"""Issue 33 item 2: a real bpftrace trace through the privileged helper, as the dropped user.

The CLI starts as sudo starts it for ``aorta-usr``; it runs as that user and asks the helper
(root) for the ``ioctl`` set's program, which the helper renders from its own catalogue and
runs. The traced command is the user's; the records come back through the pipe the helper
passed over. A ``--pid`` of another user's process stays the helper's to attach, and the tool
says so. Killing the tool (SIGKILL) takes the helper and its bpftrace with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sudo_support import PYTHON, SudoUser, children, cli_argv, descendants, run_sudo, status_ids

from tests.engine_support import process_alive

pytestmark = [pytest.mark.bpftrace, pytest.mark.slow]

IOCTLS = """
import fcntl, os, termios
fd = os.open("/dev/null", os.O_RDONLY)
for _ in range(200):
    try:
        fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\\0" * 8)
    except OSError:
        pass
print("traced-uid", os.getuid())
"""


@pytest.fixture(scope="module")
def bpftrace() -> str:
    exe = shutil.which("bpftrace")
    if exe is None:
        pytest.skip("bpftrace is not installed (apt-get install bpftrace)")
    if not Path("/sys/kernel/tracing/events").is_dir():
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
    r = subprocess.run([exe, "-e", "BEGIN { exit(); }"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"bpftrace cannot load a program here: {r.stderr.strip()[-200:]}")
    return exe


def _document(stdout: str) -> dict:
    """The result document of a `trace queue --json` event stream: its last event's."""
    last = json.loads(stdout.splitlines()[-1])
    assert last["event"] == "run_finished", last
    return last["summary"]["result"]


def test_a_trace_through_the_helper_sees_the_users_command(bpftrace: str, sudo_user: SudoUser,
                                                          user_dir: Path) -> None:
    r = run_sudo(sudo_user, ["trace", "queue", "--probes", "ioctl", "--no-calibrate", "--json", "--",
                             str(PYTHON), "-c", IOCTLS], user_dir)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"traced-uid {sudo_user.uid}" in r.stderr  # with --json the command's output is on stderr
    result = _document(r.stdout)
    metric = result["probe_sets"]["ioctl"]["metrics"]["ioctl"]
    assert metric["records_received"] >= 200
    assert metric["records_received"] == metric["records_sent_by_kernel"]
    assert result["drained_before_stop"] is True


def test_another_users_pid_is_attached_by_the_helper_and_the_tool_says_why(
        bpftrace: str, sudo_user: SudoUser, user_dir: Path) -> None:
    target = subprocess.Popen(["sleep", "60"])  # root's: the user's tool cannot read its maps
    try:
        r = run_sudo(sudo_user, ["trace", "queue", "--probes", "ioctl", "--no-calibrate", "--json",
                                 "--pid", str(target.pid), "--duration", "1"], user_dir)
    finally:
        target.kill()
        target.wait()
    assert r.returncode == 0, r.stderr[-2000:]
    warnings = _document(r.stdout)["warnings"]
    assert any(f"pid {target.pid} belongs to root" in w and "privileged helper" in w for w in warnings), warnings



def _poll(check, timeout: float):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    return check()


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_the_helper_and_its_bpftrace_die_with_a_killed_tool(bpftrace: str, sudo_user: SudoUser,
                                                           user_dir: Path) -> None:
    # TMPDIR: the killed tool cannot remove its temporary folder (aorta-trace-*): it is left in
    # user_dir, which the fixture removes, not in /tmp
    tool = subprocess.Popen(cli_argv("trace", "queue", "--probes", "ioctl", "--no-calibrate", "--", "sleep", "120"),
                            cwd=user_dir, env=sudo_user.env(TMPDIR=str(user_dir)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    traced: list[int] = []
    try:
        found = _poll(lambda: [p for p in descendants(tool.pid) if _comm(p) == "bpftrace"], timeout=120)
        assert found, "bpftrace never started"
        (bpf,) = found
        (helper,) = [c for c in children(tool.pid) if bpf in descendants(c)]
        assert status_ids(helper)["Uid"] == [0] * 4 and status_ids(bpf)["Uid"] == [0] * 4
        assert status_ids(tool.pid)["Uid"] == [sudo_user.uid] * 4
        traced = [p for p in descendants(tool.pid) if _comm(p) == "sleep"]
        os.kill(tool.pid, signal.SIGKILL)
        tool.wait()
        gone = _poll(lambda: not process_alive(helper) and not process_alive(bpf), timeout=60)
        assert gone, f"still running after the tool was killed: helper {process_alive(helper)}, bpftrace {process_alive(bpf)}"
    finally:
        for pid in [tool.pid, *traced]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


FAKELIB = Path(__file__).resolve().parents[1] / "trace" / "fakelib"


def _build_fake_cuda(into: Path) -> tuple[Path, Path]:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (apt-get install gcc libc6-dev)")
    lib, driver = into / "libcuda.so.1", into / "driver"
    subprocess.run([gcc, "-O1", "-shared", "-fPIC", "-o", str(lib), str(FAKELIB / "fakecuda.c")], check=True)
    subprocess.run([gcc, "-O1", "-o", str(driver), str(FAKELIB / "driver.c"), "-ldl"], check=True)
    return lib, driver


def test_uprobes_through_the_helper_on_the_users_process_with_calibration(
        bpftrace: str, sudo_user: SudoUser, user_dir: Path) -> None:
    """The CPU-box stand-in for `sudo aorta-tui trace queue --probes cuda` on a GPU machine: the
    helper finds libcuda in the traced process's maps and attaches the cuda set's uprobes, and
    calibrates them (the calibration program is the helper's too)."""
    lib, driver = _build_fake_cuda(user_dir)
    launches = subprocess.Popen(["setpriv", f"--reuid={sudo_user.uid}", f"--regid={sudo_user.gid}", "--init-groups",
                                 "--", str(driver), "cuda", str(lib), "1000000", "500", "0x10", "0x20"],
                                stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        assert _poll(lambda: str(lib) in Path(f"/proc/{launches.pid}/maps").read_text(), timeout=30)
        r = run_sudo(sudo_user, ["trace", "queue", "--probes", "cuda", "--json", "--pid", str(launches.pid),
                                 "--duration", "2"], user_dir, XDG_CACHE_HOME=str(user_dir / "cache"))
    finally:
        launches.kill()
        launches.wait()
    assert r.returncode == 0, r.stderr[-3000:]
    result = _document(r.stdout)
    cuda = result["probe_sets"]["cuda"]
    assert cuda["detection"]["library"] == str(lib)
    received = {name: m["records_received"] for name, m in cuda["metrics"].items()}
    assert sum(received.values()) > 0, received
    assert result["calibration"]["functions"]["cuda"] == f"{lib}:cuDriverGetVersion"  # measured, not cached
    reasons = (result["calibration"] or {}).get("reasons", {})
    assert not any("calibration failed" in why for why in reasons.values()), reasons


def test_a_library_path_is_refused_under_sudo_with_the_reason(bpftrace: str, sudo_user: SudoUser,
                                                              user_dir: Path) -> None:
    lib, _driver = _build_fake_cuda(user_dir)
    r = run_sudo(sudo_user, ["trace", "queue", "--probes", "cuda", "--lib", f"cuda={lib}", "--no-calibrate",
                             "--", "true"], user_dir)
    assert r.returncode == 3, r.stderr[-2000:]
    assert "--lib cuda=PATH cannot be used under sudo" in r.stderr and "--pid" in r.stderr
    assert "Traceback" not in r.stderr
    # the hint's way out for --lib works: root without sudo's variables is not refused
    hint = "sudo env -u SUDO_UID -u SUDO_GID -u SUDO_USER aorta-tui trace queue ... --lib"
    assert hint in " ".join(r.stderr.split()), r.stderr
    env = {k: v for k, v in sudo_user.env().items() if not k.startswith("SUDO_")}
    as_root = subprocess.run(cli_argv("trace", "queue", "--probes", "cuda", "--lib", f"cuda={lib}",
                                      "--no-calibrate", "--", "true"), cwd=user_dir, env=env,
                             capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert "cannot be used under sudo" not in as_root.stderr, as_root.stderr[-2000:]
    assert as_root.returncode == 0, as_root.stderr[-2000:]


ENGINE_CHILD = """
from aorta_tui.cli.privileged import load_verbs
from aorta_tui.privsep.boot import drop_if_sudo
drop_if_sudo(load_verbs)
import os
from aorta_tui.relay.engine_run import EngineRun
run = EngineRun(["trace", "queue", "--probes", "ioctl", "--no-calibrate", "--json", "--", "true"],
                stderr_path="engine.log").start()  # in the user's directory: the test removes it
events = [type(e).__name__ for e in run.events()]
print("uid", os.getuid(), "rc", run.wait(), "last", events[-1], "fd-var", "AORTA_TUI_PRIVSEP_FD" in os.environ)
print(run.stderr_tail())
"""


def test_an_engine_command_of_the_dropped_tool_traces_through_a_connection_of_its_own(
        bpftrace: str, sudo_user: SudoUser, user_dir: Path) -> None:
    """The TUI's trace monitor runs `aorta-tui trace queue --json` as a child (EngineRun):
    as the user too, it gets a helper connection of its own, by descriptor."""
    r = subprocess.run([str(PYTHON), "-c", ENGINE_CHILD], cwd=user_dir, env=sudo_user.env(), capture_output=True,
                       text=True, timeout=180)
    assert f"uid {sudo_user.uid} rc 0 last RunFinished fd-var False" in r.stdout, r.stdout + r.stderr[-2000:]


def test_an_output_in_a_folder_only_root_can_write_is_refused_before_tracing(
        bpftrace: str, sudo_user: SudoUser, user_dir: Path) -> None:
    # On the H200 (2026-12-04) `sudo aorta-tui trace queue -o /root/out/trace.json -- python
    # train.py` traced the whole run, then exited 70 (PermissionError) with no document: the tool
    # writes as the user, who cannot write there.
    root_only = user_dir / "root-owned"  # the user can look in, not write (as /root/out was)
    root_only.mkdir(mode=0o755)  # made by root: the tests run as root
    marker = user_dir / "traced-ran"
    r = run_sudo(sudo_user, ["trace", "queue", "--probes", "ioctl", "--no-calibrate",
                             "-o", str(root_only / "sub" / "q.json"), "--",
                             str(PYTHON), "-c", f"open({str(marker)!r}, 'w')"], user_dir)
    assert r.returncode == 3, r.stderr[-2000:]
    assert "permission denied" in r.stderr and f"{root_only} belongs to root, mode 0755" in r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert not marker.exists()  # refused before the command started
    assert list(root_only.iterdir()) == []  # and nothing made there


def test_an_output_under_a_folder_the_user_cannot_search_is_refused_naming_it(
        bpftrace: str, sudo_user: SudoUser, user_dir: Path) -> None:
    # the H200's case exactly: -o /root/out/trace.json, /root being root's alone (mode 0700)
    locked = user_dir / "locked"
    locked.mkdir(mode=0o700)
    (locked / "out").mkdir()
    r = run_sudo(sudo_user, ["trace", "queue", "--probes", "ioctl", "--no-calibrate",
                             "-o", str(locked / "out" / "trace.json"), "--", "true"], user_dir)
    assert r.returncode == 3, r.stderr[-2000:]
    assert f"{locked} belongs to root, mode 0700" in r.stderr, r.stderr[-2000:]  # the folder in the way
    assert "Traceback" not in r.stderr and "tracing" not in r.stderr
