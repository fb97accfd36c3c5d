"""Issue 33 item 1: under sudo every process of the tool but the helper runs as the invoking user.

The real CLI starts as sudo starts it (root, ``SUDO_*`` of the real user ``aorta-usr``). A probe
sweep's trial walks up its own process tree and writes what ``/proc/PID/status`` says of each
ancestor up to the test (the trial, its zygote, the orchestrator) and of the orchestrator's
children (the helper among them); the test reads it from the trial's log.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from sudo_support import (
    SECURE_PATH,
    SudoUser,
    children,
    cli_argv,
    descendants,
    run_sudo,
    status_ids,
)

pytestmark = pytest.mark.slow

RECIPE = ("schema_version: 1\nmode: probe\nticket: T-33\ntrials: 2\ntimeout_per_trial: 60\n"
          "mitigation_axis: [none]\ndiagnostic_axis: [none]\n")

# Every line: "proc PID COMM | Uid: r e s f | Gid: ... | Groups: ..." from the trial up to the
# process whose parent is the test; then the orchestrator's children.
WALK = r"""
echo "id-u $(id -u) id-G $(id -G)"
echo "env HOME=$HOME USER=$USER LOGNAME=$LOGNAME PATH=$PATH MAIL=${MAIL-unset} VIRTUAL_ENV=$VIRTUAL_ENV"
show() { echo "$1 $2 $(tr -d '\n' < /proc/$2/comm) | $(grep -E '^(Uid|Gid|Groups):' /proc/$2/status | tr '\t' ' ' | paste -sd'|')"; }
p=$$
while [ -n "$p" ] && [ "$p" != "$STOP_PID" ] && [ "$p" != 1 ]; do
  show proc "$p"; last=$p
  p=$(awk '/^PPid:/{print $2}' /proc/$p/status)
done
for c in $(cat /proc/$last/task/*/children); do show child "$c"; done
"""


def _ids(line: str) -> dict[str, list[int]]:
    out = {}
    for part in line.split("|")[1:]:
        key, _, value = part.strip().partition(":")
        out[key] = [int(x) for x in value.split()]
    return out


def _walk_lines(user_dir: Path) -> list[str]:
    logs = sorted(user_dir.glob("aorta-out/**/stdout.log"))
    assert logs, f"no trial log under {user_dir}"
    return logs[0].read_text().splitlines()


def test_the_orchestrator_zygote_and_trial_run_as_the_user_and_only_the_helper_as_root(
        sudo_user: SudoUser, user_dir: Path) -> None:
    (user_dir / "probe.yaml").write_text(RECIPE)
    (user_dir / "walk.sh").write_text(WALK)
    r = run_sudo(sudo_user, ["--batch", "probe.yaml", "--no-snapshot", "--", "bash", "walk.sh"], user_dir,
                 STOP_PID=str(os.getpid()))
    assert r.returncode == 0, r.stderr[-2000:]
    lines = _walk_lines(user_dir)
    assert f"id-u {sudo_user.uid}" in lines[0]
    assert {int(g) for g in lines[0].split("id-G ")[1].split()} == set(sudo_user.groups)
    procs = [ln for ln in lines if ln.startswith("proc ")]
    assert len(procs) >= 2, lines  # the trial (a command's: exec'd by the orchestrator), the orchestrator
    for line in procs:
        ids = _ids(line)
        assert ids["Uid"] == [sudo_user.uid] * 4, line
        assert ids["Gid"] == [sudo_user.gid] * 4, line
        assert set(ids["Groups"]) == set(sudo_user.groups), line
    helpers = [ln for ln in lines if ln.startswith("child ") and _ids(ln)["Uid"] == [0] * 4]
    assert len(helpers) == 1, lines  # the helper, and nothing else of the orchestrator's, is root


WORKLOAD_RECIPE = """\
schema_version: 1
mode: triage
ticket: T-33
workload: gpu_smoke
trials: 2
steps: 400
workload_config: {size: 128}
cells:
  - {name: base, mitigations: [none], environment: local}
"""


def _sample_tree(proc: subprocess.Popen[str]) -> dict[int, tuple[str, int, dict[str, list[int]]]]:
    """pid -> (cmdline, ppid, ids) of every process below ``proc`` seen while it ran."""
    seen: dict[int, tuple[str, int, dict[str, list[int]]]] = {}
    while proc.poll() is None:
        for pid in descendants(proc.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                ppid = int(next(ln.split()[1] for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                                if ln.startswith("PPid:")))
                _saw(seen, pid, cmd, ppid)
            except (OSError, StopIteration):
                continue
        time.sleep(0.02)
    return seen


def _saw(seen: dict[int, tuple[str, int, dict[str, list[int]]]], pid: int, cmd: str, ppid: int) -> None:
    """Record one sight of ``pid``: its ids and parent as first seen (a process that was root
    at any sight stays root here), and every command line it had. A fork sampled before its
    exec shows its parent's command line (CI once saw a zygote only so, then missed what it
    became); what it became is what makes it a zygote or a trial."""
    first = seen.get(pid)
    if first is None:
        seen[pid] = (cmd, ppid, status_ids(pid))
    elif cmd not in first[0].split(" | "):
        seen[pid] = (f"{first[0]} | {cmd}", first[1], first[2])


def _forked_trials(user_dir: Path) -> dict[str, tuple[int, os.stat_result]]:
    """trial dir -> (the zygote that forked it, the stat of the file the trial wrote itself).

    The deterministic witness: ``workload_result.json`` is written by the trial process (its
    owner is the trial's fsuid and fsgid), and its timeline names the zygote it was forked from;
    sampling /proc alone missed the short-lived trials on a loaded CI box."""
    found = {}
    for path in user_dir.glob("aorta-out/*/*/trials/*/*/workload_result.json"):
        warm = json.loads(path.read_text())["timeline"]["info"].get("warm") or {}
        if warm.get("zygote") == "own":
            found[str(path.parent)] = (int(warm["zygote_pid"]), path.stat())
    return found


def test_prepared_zygotes_and_their_trials_run_as_the_user(sudo_user: SudoUser, user_dir: Path) -> None:
    (user_dir / "smoke.yaml").write_text(WORKLOAD_RECIPE)
    proc = subprocess.Popen(cli_argv("--batch", "smoke.yaml", "--no-snapshot"), cwd=user_dir,
                            env=sudo_user.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = _sample_tree(proc)
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    zygotes = {pid for pid, (cmd, _pp, _ids) in seen.items() if "aorta_tui.trial.warm_zygote" in cmd}
    assert zygotes, f"no prepared zygote seen: {[c for c, _p, _i in seen.values()]}"
    forked = _forked_trials(user_dir)
    assert len(forked) == 2, f"both trials forked by their own zygote: {forked}"  # trials: 2
    for zygote_pid, wrote in forked.values():
        assert (wrote.st_uid, wrote.st_gid) == (sudo_user.uid, sudo_user.gid)
        assert zygote_pid in zygotes  # a zygote lives seconds (its imports): the sampler sees it
    trials = {pid for pid, (_cmd, ppid, _ids) in seen.items() if ppid in zygotes}  # those it caught
    root = {pid: cmd for pid, (cmd, ppid, ids) in seen.items() if ids["Uid"] != [sudo_user.uid] * 4}
    # the helper is the orchestrator's child and the only process that kept root
    assert len(root) == 1 and next(iter(root)) in children_seen(seen, proc.pid), root
    for pid in zygotes | trials:
        assert seen[pid][2]["Uid"] == [sudo_user.uid] * 4 and seen[pid][2]["Gid"] == [sudo_user.gid] * 4
        assert set(seen[pid][2]["Groups"]) == set(sudo_user.groups)


def children_seen(seen: dict[int, tuple[str, int, dict[str, list[int]]]], parent: int) -> set[int]:
    return {pid for pid, (_cmd, ppid, _ids) in seen.items() if ppid == parent}


def test_the_environment_is_the_users_not_sudos(sudo_user: SudoUser, user_dir: Path) -> None:
    (user_dir / "probe.yaml").write_text(RECIPE.replace("trials: 2", "trials: 1"))
    (user_dir / "walk.sh").write_text(WALK)
    r = run_sudo(sudo_user, ["--batch", "probe.yaml", "--no-snapshot", "--", "bash", "walk.sh"], user_dir,
                 STOP_PID=str(os.getpid()), VIRTUAL_ENV="/opt/kept-venv")
    assert r.returncode == 0, r.stderr[-2000:]
    env_line = next(ln for ln in _walk_lines(user_dir) if ln.startswith("env "))
    assert f"HOME={sudo_user.home} " in env_line
    assert f"USER={sudo_user.name} LOGNAME={sudo_user.name} " in env_line
    assert "MAIL=unset" in env_line
    assert env_line.endswith("VIRTUAL_ENV=/opt/kept-venv")  # sudo kept it: so does the tool
    # the invoking shell here is the test: its PATH, not sudo's secure_path, is the user's
    assert f"PATH={os.environ['PATH']} " in env_line and f"PATH={SECURE_PATH} " not in env_line


def _tmux(*args: str) -> subprocess.CompletedProcess[str]:
    # a server of this test's own: other tests' and people's tmux sessions are not touched
    return subprocess.run(["tmux", "-L", f"aorta-privsep-{os.getpid()}", *args], capture_output=True,
                          text=True, timeout=30)


@pytest.mark.skipif(subprocess.run(["which", "tmux"], capture_output=True).returncode != 0,
                    reason="needs tmux to give the TUI a terminal")
def test_the_tui_runs_as_the_user(sudo_user: SudoUser, user_dir: Path) -> None:
    session = f"aorta-privsep-{os.getpid()}"
    env = sudo_user.env()
    # env execs the CLI: the pane's process is the TUI itself
    command = " ".join(f"{k}='{v}'" for k, v in env.items()) + " " + " ".join(cli_argv())
    r = _tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", "-c", str(user_dir),
              f"env -i {command}")
    assert r.returncode == 0, r.stderr
    try:
        pane_pid = int(_tmux("display-message", "-p", "-t", session, "#{pane_pid}").stdout.strip())
        helper = _wait_for(lambda: [c for c in children(pane_pid) if status_ids(c)["Uid"] == [0] * 4])
        assert helper, "the TUI started no helper"
        drawn = _wait_for(lambda: "trace monitor" in _tmux("capture-pane", "-p", "-t", session).stdout,
                          timeout=90)
        assert drawn, "the TUI drew no screen"
        ids = status_ids(pane_pid)
        assert ids["Uid"] == [sudo_user.uid] * 4 and ids["Gid"] == [sudo_user.gid] * 4
        assert set(ids["Groups"]) == set(sudo_user.groups)
        assert len(helper) == 1
    finally:
        _tmux("kill-server")


def _wait_for(check, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = check()
        except (OSError, ValueError):
            got = None
        if got:
            return got
        time.sleep(0.2)
    return None


def test_a_process_that_is_not_root_is_left_alone(sudo_user: SudoUser, user_dir: Path) -> None:
    """SUDO_* in the environment of an ordinary user's process changes nothing: no helper."""
    proc = subprocess.run(["setpriv", f"--reuid={sudo_user.uid}", f"--regid={sudo_user.gid}", "--init-groups",
                           "--", *cli_argv("trace", "info", "--json")], cwd=user_dir, env=sudo_user.env(),
                          capture_output=True, text=True, timeout=120)
    # no helper to read tracefs (mode 0700) for it: what an ordinary user gets
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "readable by root only" in proc.stderr
    as_sudo = run_sudo(sudo_user, ["trace", "info", "--json"], user_dir)  # the same, started by sudo
    assert as_sudo.returncode == 0, as_sudo.stderr
    privileges = json.loads(as_sudo.stdout)["privileges"]
    assert privileges["root"] is False and privileges["privileged_helper"] is True


def test_a_sudo_uid_of_nobody_known_stops_instead_of_running_as_root(sudo_user: SudoUser, user_dir: Path) -> None:
    r = run_sudo(sudo_user, ["--version"], user_dir, SUDO_UID="4242424", SUDO_USER="ghost")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "SUDO_UID=4242424 names no user" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""  # the command never ran
