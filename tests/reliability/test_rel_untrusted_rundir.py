"""Issue 33, items 3 and 4: a run directory is untrusted input, and root without sudo refuses
one that another user controls. Each attack is run for real: the tool runs as root (no sudo),
the attacker is a real second Unix user (``aorta-atk``, made here when missing, as CI runs as
root on a fresh machine) running its own processes, and the run directory is the attacker's.

Every test checks that nothing outside the run directory was written or chmodded (a root-only
file and a root-only directory beside it, and the listing of everything around the run), and
that the refusal names what it refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.engine_support import REPO, journal, only_run_dir

pytestmark = pytest.mark.slow

ATTACKER = "aorta-atk"
SECRET = b"root only: never to be overwritten, read or chmodded\n"
RECIPE = """\
schema_version: 1
mode: probe
ticket: ATK
trials: 2
mitigation_axis: [none]
diagnostic_axis: [none]
step_time_regex: 'step_time=(?P<s>[0-9.]+)'
"""
# The trial's command: in the attacked session (H/armed exists), trial 0 says it started and
# waits (at most 20 s) for the attacker's "go", so the attack lands while a resume is past its
# layout check and between two trials, every time.
COMMAND = ("if [ -e \"$H/traceback\" ]; then printf 'Traceback (most recent call last):\\nValueError: x\\n' >&2; fi; "
           "if [ -e \"$H/armed\" ] && [ \"$AORTA_TRIAL\" = 0 ]; then : > \"$H/started\"; i=0; "
           "while [ ! -e \"$H/go\" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; fi; "
           "echo trial-out; echo trial-err >&2")


@dataclass
class Attacker:
    name: str
    uid: int
    gid: int
    python: str
    env: dict[str, str]

    def run(self, *argv: str, wait: bool = True, **kw: object) -> subprocess.Popen[str] | subprocess.CompletedProcess[str]:
        """A process of the attacker's own (its uid, gid and no supplementary group)."""
        opts = dict(user=self.uid, group=self.gid, extra_groups=[], env=self.env, text=True,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        opts.update(kw)
        if wait:
            return subprocess.run(list(argv), timeout=120, **opts)  # type: ignore[call-overload]
        return subprocess.Popen(list(argv), **opts)  # type: ignore[call-overload]

    def py(self, code: str, *args: str, wait: bool = True) -> object:
        return self.run(self.python, "-c", textwrap.dedent(code), *args, wait=wait)


@pytest.fixture(scope="module")
def attacker() -> Attacker:
    if os.geteuid() != 0:
        pytest.skip("the attacks need root and a second user (CI runs as root)")
    try:
        pw = pwd.getpwnam(ATTACKER)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                               "/usr/sbin/nologin", ATTACKER], capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        pw = pwd.getpwnam(ATTACKER)
    # root's interpreter lives under /root (0700): the attacker runs the system python 3.11
    # (same ABI) on this checkout and the venv's packages, readable by everyone
    python = shutil.which("python3.11", path="/usr/bin") or "/usr/bin/python3"
    site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8",
           "PYTHONPATH": f"{REPO}:{site}", "PYTHONDONTWRITEBYTECODE": "1"}
    probe = subprocess.run([python, "-c", "import aorta_tui.cli.main"], user=pw.pw_uid,
                           group=pw.pw_gid, extra_groups=[], env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"{ATTACKER} cannot run aorta-tui from {REPO}: {probe.stderr[-300:]}")
    return Attacker(ATTACKER, pw.pw_uid, pw.pw_gid, python, env)


@dataclass
class Scene:
    base: Path  # root's, 0755: the attacker can reach the run, nothing else of it
    secret: Path  # root-only file
    rootdir: Path  # root-only directory
    hand: Path  # the attacker's and the trial's handshake directory (0777)
    run_dir: Path
    watch_reads: bool  # this file system records reads (relatime): the secret's atime says

    def outside(self) -> dict[str, tuple[int, int, int, int]]:
        """Everything around the run: mode, owner, size and mtime of each path (never read:
        the root-only file's access time is part of the evidence)."""
        seen: dict[str, tuple[int, int, int, int]] = {}
        for root, dirs, files in os.walk(self.base):
            here = Path(root)
            if here in (self.run_dir, self.hand) or self.run_dir in here.parents \
                    or self.hand in here.parents:
                dirs[:] = []
                continue
            for name in (*dirs, *files):
                p = here / name
                if p in (self.run_dir, self.hand):
                    continue
                st = p.lstat()
                seen[str(p)] = (st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns)
        return seen


OLD_ATIME = 1_000_000_000  # 2001: relatime updates an access time this old on the next read


def _reads_update_atime(base: Path) -> bool:
    probe = base / "atime-probe"
    probe.write_bytes(b"x")
    os.utime(probe, (OLD_ATIME, probe.stat().st_mtime))
    probe.read_bytes()
    updated = probe.stat().st_atime != OLD_ATIME
    probe.unlink()
    return updated


def _env_without_sudo() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SUDO_")}


def _root_cli(*args: str, hand: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real CLI as root without sudo (no SUDO_* variable)."""
    env = _env_without_sudo()
    if hand is not None:
        env["H"] = str(hand)
    return subprocess.run([sys.executable, "-m", "aorta_tui", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture
def scene(attacker: Attacker) -> Iterator[Scene]:
    base = Path(tempfile.mkdtemp(prefix="aorta-untrusted-", dir="/tmp"))
    try:
        base.chmod(0o755)
        secret = base / "secret"
        secret.write_bytes(SECRET)
        secret.chmod(0o600)
        watch_reads = _reads_update_atime(base)
        rootdir = base / "rootdir"
        rootdir.mkdir(mode=0o700)
        hand = base / "hand"
        hand.mkdir()
        hand.chmod(0o777)
        (base / "probe.yaml").write_text(RECIPE)
        res = _root_cli("--batch", str(base / "probe.yaml"), "--output", str(base / "out"),
                        "--no-snapshot", "--", "sh", "-c", COMMAND, hand=hand)
        assert res.returncode == 0, res.stdout + res.stderr
        run_dir = only_run_dir(base / "out")
        _forget_trials(run_dir)  # both trials run again on the resume
        subprocess.run(["chown", "-R", f"{attacker.uid}:{attacker.gid}", str(run_dir)], check=True)
        os.utime(secret, (OLD_ATIME, secret.stat().st_mtime))  # a read of it would show
        yield Scene(base, secret, rootdir, hand, run_dir, watch_reads)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _forget_trials(run_dir: Path) -> None:
    """The journal as a kill before the first trial leaves it: a resume runs every trial
    again, in the directories the first session left."""
    lines = (run_dir / "journal.jsonl").read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if not any(f'"{k}"' in ln for k in (
        "trial_launch", "trial_started", "trial_finished", "cell_aggregated", "run_finished"))]
    (run_dir / "journal.jsonl").write_text("".join(kept))
    for name in ("matrix.json", "matrix.md"):
        (run_dir / name).unlink(missing_ok=True)


def _assert_untouched(scene: Scene, before: dict[str, tuple[int, int, int, int]],
                      around: Callable[[], dict[str, tuple[int, int, int, int]]] | None = None) -> None:
    """Nothing outside the run was written, chmodded, chowned, made or (where the file system
    records reads) read."""
    assert (around or scene.outside)() == before
    assert list(scene.rootdir.iterdir()) == []
    st = scene.secret.stat()
    if scene.watch_reads:
        assert st.st_atime == OLD_ATIME, "the root-only file was read"
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0
    assert scene.secret.read_bytes() == SECRET
    os.utime(scene.secret, (OLD_ATIME, st.st_mtime))  # our own read, undone for a later check


def _resume(scene: Scene, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return _root_cli("sweep", "run", "--resume", str(scene.run_dir), *extra, hand=scene.hand,
                     timeout=timeout)


def _refused(res: subprocess.CompletedProcess[str], path: Path, what: str) -> None:
    text = res.stdout + res.stderr
    assert res.returncode == 3, text
    assert f"{path} is {what}: refused" in text, text
    assert "Traceback" not in text and "internal error" not in text


# -- item 3: links planted after the layout check --------------------------------------------

def test_trial_logs_planted_as_links_are_refused_not_followed(scene: Scene, attacker: Attacker) -> None:
    """While trial 0 runs, the attacker makes trial 1's stdout.log a link to a root-only file
    (it was overwritten with the trial's output) and its stderr.log a link to a new path
    outside (root made the file there)."""
    trial = scene.run_dir / "trials" / "none-none" / "trial-001"
    before = scene.outside()
    res = _attack_during_resume(scene, attacker, "logs", trial,
                                f"{scene.secret}:{scene.rootdir / 'made-by-root'}")
    _refused(res, trial / "stdout.log", "a symlink")
    _assert_untouched(scene, before)


_DURING = """
    import os, sys, time
    hand, mode, victim, target = sys.argv[1:]
    end = time.time() + 60
    while not os.path.exists(os.path.join(hand, "started")) and time.time() < end:
        time.sleep(0.02)
    if mode in ("fifo", "file-link"):  # the running trial's directory (root's) moved away for
        # one of the attacker's, whose stdout.log is a FIFO or a link
        os.rename(victim, victim + ".moved")
        os.mkdir(victim)
        log = os.path.join(victim, "stdout.log")
        os.mkfifo(log) if mode == "fifo" else os.symlink(target, log)
    elif mode == "link":  # the directory (or file) swapped for a link
        if os.path.lexists(victim):
            os.rename(victim, victim + ".moved")
        os.symlink(target, victim)
    else:  # the logs of a trial not yet started, as links
        os.makedirs(victim, exist_ok=True)
        for name, to in zip(("stdout.log", "stderr.log"), target.split(":")):
            if os.path.lexists(os.path.join(victim, name)):
                os.unlink(os.path.join(victim, name))
            os.symlink(to, os.path.join(victim, name))
    open(os.path.join(hand, "go"), "w").close()
    """


def _attack_during_resume(scene: Scene, attacker: Attacker, mode: str, victim: Path,
                          target: str, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Resume; while trial 0 runs (past the layout check, the pending trials' old directories
    retired), the attacker plants its links, then lets the trial end."""
    (scene.hand / "armed").touch()
    swapper = attacker.py(_DURING, str(scene.hand), mode, str(victim), target, wait=False)
    try:
        res = _resume(scene, "--no-snapshot", "--i-trust-this-directory", *extra, timeout=timeout)
    finally:
        assert swapper.wait(timeout=90) == 0, swapper.stderr.read()  # type: ignore[attr-defined]
    assert (scene.hand / "started").exists()  # the attack landed while the resume ran
    return res


def test_a_trial_directory_swapped_for_a_link_during_the_resume(scene: Scene, attacker: Attacker) -> None:
    victim = scene.run_dir / "trials" / "none-none" / "trial-001"
    before = scene.outside()
    res = _attack_during_resume(scene, attacker, "link", victim, str(scene.rootdir))
    _refused(res, victim, "a symlink")
    _assert_untouched(scene, before)


def test_a_cell_directory_swapped_for_a_link_during_the_resume(scene: Scene, attacker: Attacker) -> None:
    victim = scene.run_dir / "trials" / "none-none"
    before = scene.outside()
    res = _attack_during_resume(scene, attacker, "link", victim, str(scene.rootdir))
    _refused(res, victim, "a symlink")
    _assert_untouched(scene, before)


def test_env_swapped_for_a_link_gets_no_snapshot(scene: Scene, attacker: Attacker) -> None:
    """The resume's snapshot of the environment went into the link's target."""
    env = scene.run_dir / "env"
    planted = attacker.py("import os, sys; os.symlink(sys.argv[2], sys.argv[1])",
                          str(env), str(scene.rootdir))
    assert planted.returncode == 0, planted.stderr  # type: ignore[attr-defined]
    before = scene.outside()
    res = _resume(scene, "--i-trust-this-directory")
    _refused(res, env, "a symlink")
    _assert_untouched(scene, before)


def test_a_finished_trials_stdout_swapped_for_a_fifo_is_not_read(scene: Scene, attacker: Attacker) -> None:
    """While trial 0 runs (its log already open), the attacker moves its directory away for one
    of its own whose stdout.log is a FIFO: root's read of the log for step times (``step_time_regex``) waited on the FIFO for a
    writer that never came. The trial's log is refused, the run goes on and ends."""
    victim = scene.run_dir / "trials" / "none-none" / "trial-000"
    before = scene.outside()
    try:
        res = _attack_during_resume(scene, attacker, "fifo", victim, "-", timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("root hung reading a FIFO planted as a trial's stdout.log")
    assert res.returncode == 0, res.stdout + res.stderr
    assert stat.S_ISFIFO((victim / "stdout.log").lstat().st_mode)  # never opened to wait
    _assert_untouched(scene, before)


def test_a_finished_trials_stdout_swapped_for_a_link_is_not_followed(scene: Scene, attacker: Attacker) -> None:
    """As above with a link to a root-only file: root read it for step times."""
    victim = scene.run_dir / "trials" / "none-none" / "trial-000"
    if not scene.watch_reads:
        pytest.skip("this file system does not record reads: a read of the secret would not show")
    before = scene.outside()
    res = _attack_during_resume(scene, attacker, "file-link", victim, str(scene.secret))
    assert res.returncode == 0, res.stdout + res.stderr
    _assert_untouched(scene, before)


def test_a_cell_directory_linked_to_root_logs_after_a_traceback_is_not_read(
        scene: Scene, attacker: Attacker) -> None:
    """Trial 0 prints a traceback; while it runs, the attacker swaps its cell directory for a
    link to a root-only directory holding a trial directory with logs of the same names (another
    root run's, say). Root read the linked stderr.log by path to find the exception line
    (classify's log reads); they go through the run's file layer now, which refuses the link."""
    if not scene.watch_reads:
        pytest.skip("this file system does not record reads: a read of the logs would not show")
    other = scene.base / "root-run"
    other.mkdir(mode=0o700)
    (other / "trial-000").mkdir(mode=0o700)
    logs = [other / "trial-000" / "stderr.log", other / "trial-000" / "stdout.log"]
    for log in logs:
        log.write_bytes(b"Traceback (most recent call last):\nValueError: root's secret\n" * 2)
        os.utime(log, (OLD_ATIME, log.stat().st_mtime))
    (scene.hand / "traceback").touch()
    victim = scene.run_dir / "trials" / "none-none"
    res = _attack_during_resume(scene, attacker, "link", victim, str(other))
    _refused(res, victim, "a symlink")
    assert [log.stat().st_atime for log in logs] == [OLD_ATIME] * 2, "root read the linked logs"
    assert "root's secret" not in res.stdout + res.stderr


_LOCK_SWAP = """
    import os, sys
    run, secret = sys.argv[1:]
    os.rename(run, run + ".moved")
    os.mkdir(run)
    open(os.path.join(run, "journal.jsonl"), "w").close()
    open(os.path.join(run, ".lock"), "w").close()
    os.mkfifo(os.path.join(run + ".moved", ".lock.fifo"))
    os.symlink(secret, os.path.join(run + ".moved", ".lock.link"))
    """


@pytest.fixture
def open_base() -> Iterator[Path]:
    """A root-owned directory everyone may enter (pytest's own tmp_path is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="aorta-untrusted-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_lock_is_taken_in_the_run_the_store_holds(attacker: Attacker, open_base: Path) -> None:
    """Root opens a run (its store holds the directory's descriptor); the attacker, who owns
    the directory above it, moves the run away and puts a directory of its own at its path.
    ``.lock`` was opened by path: root locked the attacker's directory, and the run it was
    about to write was unlocked (a second orchestrator could run it at once)."""
    from aorta_tui.core.errors import RunDirError, RunDirRefused
    from aorta_tui.core.rundir_fs import RunDirFS
    from aorta_tui.store.lock import RunLock
    from aorta_tui.store.run_store import RunStore

    tmp_path = open_base
    parent = tmp_path / "atk"
    parent.mkdir()
    os.chown(parent, attacker.uid, attacker.gid)
    run = parent / "run"
    run.mkdir()
    (run / "journal.jsonl").touch()
    os.chown(run, attacker.uid, attacker.gid)
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    store = RunStore(run)
    store.fs  # noqa: B018 (the store opens the run: its descriptor is held from here on)
    swapped = attacker.py(_LOCK_SWAP, str(run), str(secret))
    assert swapped.returncode == 0, swapped.stderr  # type: ignore[attr-defined]
    store.acquire()
    try:
        assert f'"pid": {os.getpid()}' in (parent / "run.moved" / ".lock").read_text()
        assert (run / ".lock").read_bytes() == b""  # the attacker's, never touched
    finally:
        store.release()
    # and a lock file that is a FIFO or a link is refused, without waiting or following: a link
    # is the file layer's refusal (exit 3), a FIFO the located damage every reader reports (exit 2)
    held = RunDirFS(parent / "run.moved")
    for name, error, what in ((".lock.fifo", RunDirError, "a FIFO"), (".lock.link", RunDirRefused, "a symlink")):
        os.replace(parent / "run.moved" / name, parent / "run.moved" / ".lock")
        with pytest.raises(error, match=f"is {what}"):
            RunLock(parent / "run.moved").acquire(held)
    held.close()
    assert secret.read_bytes() == SECRET and stat.S_IMODE(secret.stat().st_mode) == 0o600


# -- item 3: the Slurm job on a compute node ---------------------------------------------------

_SLURM_PLANT = """
    import json, os, sys
    run, mode, target = sys.argv[1:]
    os.makedirs(os.path.join(run, "slurm"))
    trial = os.path.join(run, "trials", "c", "trial-000")
    spec = os.path.join(run, "slurm", "spec.json")
    if mode == "fifo":  # the job spec root's job reads first
        os.makedirs(trial)
        os.mkfifo(spec)
    else:  # the cell directory a link to a root-only directory
        os.makedirs(os.path.join(run, "trials"))
        os.symlink(target, os.path.join(run, "trials", "c"))
        json.dump({"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cell_keys": [], "cwd": run,
                   "stdout_path": os.path.join(trial, "stdout.log"),
                   "stderr_path": os.path.join(trial, "stderr.log"), "timeout_s": 30,
                   "kill_grace_s": 1.0, "trial_dir": trial, "hang": None}, open(spec, "w"))
    json.dump({"specs": [spec]}, open(os.path.join(run, "slurm", "b.json"), "w"))
    """


@pytest.mark.parametrize("mode", ["fifo", "link"])
def test_a_slurm_job_on_a_run_another_user_writes(attacker: Attacker, open_base: Path, mode: str) -> None:
    """What a Slurm job submitted as root runs on its node (``slurm_job MANIFEST``), over a run
    directory the attacker writes: its job spec a FIFO (root's job waited for a writer for
    ever), or the trial's cell directory a link to a root-only directory (root wrote the
    trial's logs and ``slurm-outcome.json`` there). Each is refused, exit 3, naming it."""
    run = open_base / "run"
    run.mkdir()
    os.chown(run, attacker.uid, attacker.gid)
    rootdir = open_base / "rootdir"
    rootdir.mkdir(mode=0o700)
    planted = attacker.py(_SLURM_PLANT, str(run), mode, str(rootdir))
    assert planted.returncode == 0, planted.stderr  # type: ignore[attr-defined]
    try:
        res = subprocess.run([sys.executable, "-m", "aorta_tui.executor.slurm_job",
                              str(run / "slurm" / "b.json")], cwd=run, env=_env_without_sudo(),
                             capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("root's Slurm job hung on a FIFO planted as its job spec")
    victim = run / "slurm" / "spec.json" if mode == "fifo" else run / "trials" / "c"
    _refused(res, victim, "a FIFO (named pipe)" if mode == "fifo" else "a symlink")
    assert list(rootdir.iterdir()) == []


# -- item 3: the collectors' reads after a trial ---------------------------------------------

def test_collectors_read_nothing_through_a_linked_cell_directory(attacker: Attacker, open_base: Path) -> None:
    """After a trial, root summarises what its collectors left (torch_profiler's summary,
    rocprof's CSVs). The attacker's cell directory became a link to a root-only directory
    holding a trial directory of the same name (another root run's, say): the summaries were
    read through it, and its numbers went into the attacker's run as this trial's."""
    from aorta_tui.collect.collectors import ROCPROF_DIR, finish_trial
    from aorta_tui.collect.torch_profiler import OUTPUT_SUBDIR
    from aorta_tui.core.rundir_fs import RunDirFS

    run = open_base / "run"
    run.mkdir()
    os.chown(run, attacker.uid, attacker.gid)
    other = open_base / "root-run"
    (other / "trial-000" / OUTPUT_SUBDIR).mkdir(parents=True)
    (other / "trial-000" / ROCPROF_DIR).mkdir()
    other.chmod(0o700)
    (other / "trial-000" / OUTPUT_SUBDIR / "summary_rank0.json").write_text(
        json.dumps({"metrics": {"root_secret": 1}}))
    (other / "trial-000" / ROCPROF_DIR / "x_kernel_stats.csv").write_text(
        "Name,Calls,TotalDurationNs\nroot_secret_kernel,1,1000\n")
    planted = attacker.py("import os, sys; os.makedirs(sys.argv[1]); os.symlink(sys.argv[2], sys.argv[1] + '/c')",
                          str(run / "trials"), str(other))
    assert planted.returncode == 0, planted.stderr  # type: ignore[attr-defined]
    trial_dir = run / "trials" / "c" / "trial-000"
    argv = ["rocprofv3", "-d", str(trial_dir / ROCPROF_DIR), "--", "true"]
    with RunDirFS(run) as fs:
        rec = finish_trial({"torch_profiler": {}, "rocprof": {}}, argv, {}, trial_dir,
                           mode="triage", fs=fs)
    assert "root_secret" not in json.dumps(rec), rec
    assert rec["torch_profiler"]["status"] == "error"
    assert rec["rocprof"]["metrics"] == {} or not rec["rocprof"]["metrics"].get("rocprof_top_kernels")


# -- item 3: the temp-file swap against atomic_write -----------------------------------------

_SWAPPER = """
    import os, sys, time
    d, secret, stop, count = sys.argv[1:]
    n = 0
    while not os.path.exists(stop):
        for name in os.listdir(d):
            if name.startswith(".") and name.endswith(".tmp"):
                try:
                    os.rename(os.path.join(d, name), os.path.join(d, "stolen" + name))
                    os.symlink(secret, os.path.join(d, name))
                    n += 1
                except OSError:
                    pass
    open(count, "w").write(str(n))
    """


def test_temp_file_swapped_for_a_link_during_policy_report(scene: Scene, attacker: Attacker) -> None:
    """``policy report`` runs no user code; it only rewrites policy.json and policy.md. The
    attacker renames each new temp file away and plants a link to a root-only file in its
    place: the chmod by path made that file 0644. Run until the attacker has won the race at
    least once (else the test proved nothing)."""
    pol = scene.base / "policy-run"
    (pol / "trials" / "001-baseline-t1").mkdir(parents=True)
    (pol / "sweep.json").write_text(json.dumps({
        "kind": "aorta-tui/policy-sweep", "request": {"timeout_s": 900, "seed": 0},
        "policies": [{"name": "baseline"}], "notes": {}, "skipped": {},
        "order": [{"position": 0, "policy": "baseline", "trial": 1, "dir": "001-baseline-t1"}]}))
    subprocess.run(["chown", "-R", f"{attacker.uid}:{attacker.gid}", str(pol)], check=True)
    # and the one trial's outcome a link to the root-only file: root read it (load_json_input)
    planted = attacker.py("import os, sys; os.symlink(sys.argv[2], sys.argv[1])",
                          str(pol / "trials" / "001-baseline-t1" / "outcome.json"), str(scene.secret))
    assert planted.returncode == 0, planted.stderr  # type: ignore[attr-defined]
    refused = _root_cli("policy", "report", str(pol))
    assert refused.returncode == 3 and f"sudo -u {ATTACKER} aorta-tui policy report" in refused.stderr
    stop, count = scene.hand / "stop", scene.hand / "count"

    def around() -> dict[str, tuple[int, int, int, int]]:
        return {k: v for k, v in scene.outside().items() if not k.startswith(str(pol))}

    before = around()
    swapper = attacker.py(_SWAPPER, str(pol), str(scene.secret), str(stop), str(count), wait=False)
    swaps = 0
    try:
        for _ in range(60):
            res = _root_cli("policy", "report", str(pol), "--i-trust-this-directory")
            assert res.returncode in (0, 3), res.stdout + res.stderr
            assert "Traceback" not in res.stderr
            assert stat.S_IMODE(scene.secret.stat().st_mode) == 0o600, "the root-only file was chmodded"
            if any(p.name.startswith("stolen") for p in pol.iterdir()):
                swaps += 1
                if swaps >= 3:
                    break
    finally:
        stop.touch()
        swapper.wait(timeout=30)  # type: ignore[attr-defined]
    assert swaps >= 1, "the attacker never won the race: the test proved nothing"
    _assert_untouched(scene, before, around)


# -- item 4: root without sudo over another user's run directory ------------------------------

def _edit_recipe(scene: Scene, attacker: Attacker, marker: Path) -> None:
    """As the attacker: the command in recipe.resolved.yaml becomes `id -u > marker`, its hash
    recomputed with `aorta-tui recipe resolve` and written into run.json."""
    res = attacker.py("""
        import json, os, subprocess, sys
        run, marker, python = sys.argv[1:]
        path = os.path.join(run, "recipe.resolved.yaml")
        text = open(path).read()
        start = text.index("command:\\n")
        end = text.index("env_passthrough_mode:")
        text = text[:start] + "command: [sh, -c, 'id -u > %s']\\n" % marker + text[end:]
        open(path + ".new", "w").write(text)
        out = subprocess.run([python, "-m", "aorta_tui", "recipe", "resolve", path + ".new"],
                             capture_output=True, text=True, check=True).stdout
        os.unlink(path + ".new")
        open(path, "w").write(out)
        digest = next(ln.split(": ")[1] for ln in out.splitlines() if ln.startswith("# recipe hash:"))
        meta = json.load(open(os.path.join(run, "run.json")))
        meta["recipe_hash"] = digest.strip()
        json.dump(meta, open(os.path.join(run, "run.json"), "w"))
        """, str(scene.run_dir), str(marker), attacker.python)
    assert res.returncode == 0, res.stderr  # type: ignore[attr-defined]


def test_edited_resolved_recipe_is_refused_as_root_without_sudo(scene: Scene, attacker: Attacker) -> None:
    marker = scene.hand / "ran-as"
    _edit_recipe(scene, attacker, marker)
    lines_before = (scene.run_dir / "journal.jsonl").read_bytes()
    before = scene.outside()
    res = _resume(scene, "--no-snapshot")
    assert res.returncode == 3, res.stdout + res.stderr
    assert f"{scene.run_dir} belongs to {ATTACKER}" in res.stderr
    assert f"sudo -u {ATTACKER} aorta-tui sweep run --resume {scene.run_dir}" in res.stderr
    assert "--i-trust-this-directory" in res.stderr and "Traceback" not in res.stderr
    assert not marker.exists(), "the edited command ran as root"
    assert (scene.run_dir / "journal.jsonl").read_bytes() == lines_before  # nothing written
    _assert_untouched(scene, before)

    # the explicit override goes on, and says so in the run's journal
    res = _resume(scene, "--no-snapshot", "--i-trust-this-directory")
    assert res.returncode == 0, res.stdout + res.stderr
    assert marker.read_text().strip() == "0"  # what was trusted ran, as root
    warnings = [e for e in journal(scene.run_dir)
                if e.get("event") == "warning" and e.get("code") == "untrusted_run_dir"]
    assert len(warnings) == 1 and f"belongs to {ATTACKER}" in warnings[0]["message"]
    _assert_untouched(scene, before)


def test_group_writable_run_directory_is_refused_too(scene: Scene) -> None:
    """Root's own run directory, but writable by its group: anyone in the group decides."""
    subprocess.run(["chown", "-R", "0:0", str(scene.run_dir)], check=True)
    target = scene.run_dir / "trials" / "none-none"
    target.chmod(0o775)
    res = _resume(scene, "--no-snapshot")
    assert res.returncode == 3, res.stdout + res.stderr
    assert f"{target} is writable by its group (mode 0775)" in res.stderr
    assert f"chmod go-w {target}" in res.stderr
    target.chmod(0o755)
    with contextlib.suppress(FileNotFoundError):
        (scene.hand / "armed").unlink()
    res = _resume(scene, "--no-snapshot")
    assert res.returncode == 0, res.stdout + res.stderr  # root's own, root-only: no question


def test_a_users_own_run_is_not_questioned(scene: Scene, attacker: Attacker) -> None:
    """The check is root's alone: the owner resuming its own run is never refused."""
    res = attacker.run(attacker.python, "-m", "aorta_tui", "sweep", "run", "--resume",
                       str(scene.run_dir), "--no-snapshot", env={**attacker.env, "H": str(scene.hand)})
    assert res.returncode == 0, res.stdout + res.stderr  # type: ignore[attr-defined]
    assert not any(e.get("code") == "untrusted_run_dir" for e in journal(scene.run_dir))


def test_a_directory_above_the_run_that_another_user_owns_is_refused(scene: Scene, attacker: Attacker) -> None:
    """Root's own run, but in a directory the attacker owns: the attacker can rename the run
    away and put one of its own in its place between two commands."""
    subprocess.run(["chown", "-R", "0:0", str(scene.run_dir)], check=True)
    parent = scene.run_dir.parent
    os.chown(parent, attacker.uid, attacker.gid)
    res = _resume(scene, "--no-snapshot")
    assert res.returncode == 3, res.stdout + res.stderr
    assert f"{parent} belongs to {ATTACKER}" in res.stderr
    assert f"sudo -u {ATTACKER} aorta-tui sweep run --resume" in res.stderr
    os.chown(parent, 0, 0)
    res = _resume(scene, "--no-snapshot")  # /tmp above it is sticky: root's own run goes on
    assert res.returncode == 0, res.stdout + res.stderr
