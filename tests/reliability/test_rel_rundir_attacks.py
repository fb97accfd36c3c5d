"""Issue 12, items 1, 5, 6, 7 and 13: the run directory under attack, each attack reproduced.

Real processes, real files, a real (root-only) tmpfs for the full disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from aorta_tui.core.errors import EnvironmentProblem, RunDirError
from aorta_tui.store.lock import LockHolder, RunLock, lock_holder
from aorta_tui.store.naming import LOCK
from aorta_tui.store.run_create import create_run_dir
from aorta_tui.store.run_list import list_runs
from tests.engine_support import aorta, journal, only_run_dir

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RECIPE = """\
schema_version: 1
mode: probe
ticket: ATT
trials: 2
mitigation_axis: [none, xnack]
diagnostic_axis: [none]
"""
PLANNED = {f"{c}/trial-{n:03d}" for c in ("none-none", "xnack-none") for n in range(2)}


def _recipe(tmp_path: Path) -> Path:
    p = tmp_path / "probe.yaml"
    p.write_text(RECIPE)
    return p


def _sweep(tmp_path: Path, out: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    return aorta("--batch", str(_recipe(tmp_path)), "--output", str(out), "--no-snapshot", "--",
                 *(cmd or ("true",)))


def _assert_exactly_planned(run_dir: Path) -> None:
    matrix = json.loads((run_dir / "matrix.json").read_text())
    assert matrix["status"] == "completed"
    assert matrix["trials_finished"] == matrix["trials_planned"] == len(PLANNED)
    rows = Counter(t["trial_id"] for t in matrix["trials"])
    assert set(rows) == PLANNED and set(rows.values()) == {1}, rows


# -- item 1 ---------------------------------------------------------------------------------

def test_killed_between_result_and_journal_line_counts_the_trial_once(tmp_path: Path) -> None:
    """The state a SIGKILL right after a result.json rename leaves: the result is on disk, its
    trial_finished line is not. The resume re-runs it; the retired copy never counts."""
    res = _sweep(tmp_path, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    run_dir = only_run_dir(tmp_path / "out")
    lines = (run_dir / "journal.jsonl").read_text().splitlines(keepends=True)
    last_finished = max(i for i, ln in enumerate(lines) if '"trial_finished"' in ln)
    victim = json.loads(lines[last_finished])["trial_id"]
    (run_dir / "journal.jsonl").write_text("".join(lines[:last_finished]))
    (run_dir / "matrix.json").unlink()

    res = aorta("sweep", "run", "--resume", str(run_dir), "--no-snapshot")
    assert res.returncode == 0, res.stderr
    assert (run_dir / "trials" / f"{victim}.interrupted-1" / "result.json").is_file()
    _assert_exactly_planned(run_dir)
    finished = Counter(e["trial_id"] for e in journal(run_dir) if e["event"] == "trial_finished")
    assert finished[victim] == 1 and set(finished) == PLANNED


# -- item 5 ---------------------------------------------------------------------------------

@pytest.fixture
def small_tmpfs(tmp_path: Path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_disk_is_exit_3_with_the_fix_and_the_run_resumes(tmp_path: Path, small_tmpfs: Path) -> None:
    filler = small_tmpfs / "filler"
    with open(filler, "wb") as fh:  # leave room for the run's files and about one trial's logs
        fh.write(b"\0" * (1900 << 10))
    out = small_tmpfs / "out"
    res = _sweep(tmp_path, out, "sh", "-c", "head -c 30000 /dev/zero | tr '\\0' x")
    assert res.returncode == 3, res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert "No space left on device" in res.stderr and " free there" in res.stderr
    assert "--resume" in res.stderr
    run_dir = only_run_dir(out)
    assert f"--resume {run_dir}" in res.stderr

    filler.unlink()
    res = aorta("sweep", "run", "--resume", str(run_dir), "--no-snapshot")
    assert res.returncode == 0, res.stderr
    _assert_exactly_planned(run_dir)


def test_full_disk_while_creating_the_run_is_exit_3(tmp_path: Path, small_tmpfs: Path) -> None:
    with open(small_tmpfs / "filler", "wb") as fh, contextlib.suppress(OSError):
        fh.write(b"\0" * (4 << 20))  # fails once the filesystem is full to the last byte
    res = _sweep(tmp_path, small_tmpfs / "out")
    assert res.returncode == 3, res.stderr
    assert "No space left on device" in res.stderr and "Traceback" not in res.stderr
    assert not [p for p in (small_tmpfs / "out").glob("*/*") if not p.name.startswith(".")]


# -- item 7 ---------------------------------------------------------------------------------

def test_a_non_object_journal_line_is_reported_with_its_line_number(tmp_path: Path) -> None:
    res = _sweep(tmp_path, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    run_dir = only_run_dir(tmp_path / "out")
    lines = (run_dir / "journal.jsonl").read_text().splitlines(keepends=True)
    lines.insert(2, "[1, 2]\n")
    (run_dir / "journal.jsonl").write_text("".join(lines))

    res = aorta("sweep", "run", "--resume", str(run_dir), "--no-snapshot")
    assert res.returncode == 0, res.stderr
    assert "journal.jsonl:3: not an event (a JSON line holding an array" in res.stdout + res.stderr
    _assert_exactly_planned(run_dir)

    att = aorta("attach", "--plain", str(run_dir))
    assert att.returncode == 0, att.stderr
    assert "journal.jsonl:3: not an event" in att.stdout
    assert sum(ln.strip().startswith("pass") for ln in att.stdout.splitlines()) == len(PLANNED)
    assert "stopped without finishing" not in att.stdout
    (info,) = list_runs(tmp_path / "out")
    assert info.state == "finished" and info.done == info.total == len(PLANNED)


# -- item 13: early Ctrl-C, a kill while the run dir is created, the lock's holder ----------

MAIN = REPO / "aorta_tui" / "cli" / "main.py"
HANDLER_LINE = next(i for i, ln in enumerate(MAIN.read_text().splitlines(), 1)
                    if ln.strip().startswith("signal.signal(signal.SIGINT, _interrupted_while_starting)"))


ENTRY = REPO / "aorta_tui" / "cli" / "quiet_start.py"  # the program's first module (both ways in)
ENTRY_HANDLER_LINE = next(i for i, ln in enumerate(ENTRY.read_text().splitlines(), 1)
                          if ln.strip().startswith("_signal.signal(_signal.SIGINT, _interrupted_while_starting)"))
# The script's first module imports quiet_start: a Ctrl-C landing while Python's import machinery
# finds and loads quiet_start (a frame at that import line and none inside quiet_start) is before
# the handler exists, as a Ctrl-C inside quiet_start above its handler line is.
ENTRY_SCRIPT = REPO / "aorta_tui" / "cli" / "entry.py"
QUIET_START_IMPORT_LINE = next(i for i, ln in enumerate(ENTRY_SCRIPT.read_text().splitlines(), 1)
                               if ln.startswith("from aorta_tui.cli.quiet_start import"))


def _after_the_handler(frame: str) -> bool:
    """A traceback frame from code that runs once Ctrl-C should be quiet."""
    if "/typer/" in frame or "/click/" in frame:
        return True
    if f"{REPO}/aorta_tui/" not in frame or "__init__.py" in frame or "__main__.py" in frame:
        return False
    for path, handler_line in ((MAIN, HANDLER_LINE), (ENTRY, ENTRY_HANDLER_LINE),
                               (ENTRY_SCRIPT, QUIET_START_IMPORT_LINE)):
        if f'"{path}", line ' in frame:
            return int(frame.split(", line ")[1].split(",")[0]) > handler_line
    return True


def test_ctrl_c_while_the_cli_starts_never_prints_a_traceback(tmp_path: Path) -> None:
    """SIGINT at growing delays through start-up. Before the first line of aorta-tui runs it is
    Python's own start-up (not ours to change); from then on: one line, exit 130.

    The delays grow by 6% from 20 ms (not fixed 5 ms steps up to 220 ms): on a loaded machine
    start-up takes seconds, and fixed steps all landed inside Python's own start-up."""
    recipe = _recipe(tmp_path)
    ours = quiet = 0
    delay = 0.02
    while delay < 12.0 and not (ours >= 10 and quiet >= 3):
        delay *= 1.06
        proc = subprocess.Popen([sys.executable, "-m", "aorta_tui", "--batch", str(recipe), "--output",
                                 str(tmp_path / "out"), "--no-snapshot", "--", "sleep", "5"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        if "Traceback" in err or "Fatal Python error" in err:
            # Allowed only before the quiet handler is in place: the interpreter's and site's
            # start-up, the package __init__ files (they import nothing), main.py's first lines.
            frames = [ln for ln in err.splitlines() if ln.strip().startswith('File "')]
            assert not [f for f in frames if _after_the_handler(f)], err
            continue
        if proc.returncode == 1 and err.startswith("Could not import runpy module"):
            # Python's own start-up too: `-m` imports runpy before any module of ours, and a
            # SIGINT landing there is CPython's message and exit 1 (seen once in CI, 2026-12-05)
            continue
        assert proc.returncode in (130, -2, 0), err  # -2, 0: Python's start-up, before any handler
        if proc.returncode == 130:
            ours += 1
            quiet += err.strip() == "interrupted"  # stopped during start-up: the one line alone
    assert ours >= 10 and quiet >= 3, (ours, quiet)


def test_a_run_killed_while_being_created_is_not_a_run(tmp_path: Path) -> None:
    # The orchestrator SIGKILLs itself between recipe.resolved.yaml and run.json (the crash-point
    # harness does the same from bpftrace at every rename).
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from aorta_tui.store.run_create import create_run_dir
        def populate(staging):
            (staging / "recipe.resolved.yaml").write_text("x")
            os.kill(os.getpid(), signal.SIGKILL)
        create_run_dir(Path({str(tmp_path / "out")!r}), "T", populate)
    """)], cwd=REPO, check=False, timeout=60)
    (staging,) = (tmp_path / "out" / "T").iterdir()
    assert staging.name.endswith(".creating")
    assert list_runs(tmp_path / "out") == []
    res = aorta("sweep", "run", "--resume", str(staging), "--no-snapshot")
    assert res.returncode == 2 and "never fully created" in res.stderr, res.stderr


def test_a_failed_run_creation_leaves_nothing(tmp_path: Path) -> None:
    def fails(staging: Path) -> None:
        (staging / "recipe.resolved.yaml").write_text("x")
        raise OSError(28, "No space left on device")

    with pytest.raises(EnvironmentProblem, match="No space left on device") as exc:
        create_run_dir(tmp_path / "out", "T", fails)
    assert exc.value.exit_code == 3
    assert list((tmp_path / "out" / "T").iterdir()) == []


def test_a_run_dir_without_run_json_says_it_was_never_created(tmp_path: Path) -> None:
    """The state the old writer left when killed between recipe.resolved.yaml and run.json."""
    res = _sweep(tmp_path, tmp_path / "out")
    run_dir = only_run_dir(tmp_path / "out")
    (run_dir / "run.json").unlink()
    res = aorta("sweep", "run", "--resume", str(run_dir), "--no-snapshot")
    assert res.returncode == 2, res.stderr
    assert "never fully created" in res.stderr and "start the sweep again" in res.stderr


def _hold_lock_silently(run_dir: Path) -> subprocess.Popen[str]:
    """A process holding the flock that has not written its pid yet (the window after flock)."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, time
        fh = open({str(run_dir / LOCK)!r}, "a+")
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_lock_refusal_never_names_a_dead_pid(tmp_path: Path) -> None:
    dead = _dead_pid()
    (tmp_path / LOCK).write_text(json.dumps({"pid": dead, "host": os.uname().nodename,
                                                    "started_at": time.time() - 5}) + "\n")
    holder = _hold_lock_silently(tmp_path)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirError) as exc:
            RunLock(tmp_path).acquire()
        assert str(dead) not in exc.value.message
        assert "pid is not known" in exc.value.message
        assert lock_holder(tmp_path) == LockHolder()  # held, holder unknown: never the dead pid
    finally:
        holder.kill()
        holder.wait()


def test_lock_refusal_names_the_live_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from pathlib import Path
        from aorta_tui.store.lock import RunLock
        lock = RunLock(Path({str(tmp_path)!r}))
        lock.acquire()
        print("locked", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        for _ in range(5):  # a status probe (shared flock) never makes a holder look unknown
            with pytest.raises(RunDirError) as exc:
                RunLock(tmp_path).acquire()
            assert f"pid {holder.pid}" in exc.value.message
    finally:
        holder.kill()
        holder.wait()


# -- item 6 (part) ----------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["command", "output"])
def test_non_utf8_command_or_output_is_refused_before_anything_is_created(tmp_path: Path, where: str) -> None:
    out = tmp_path / "out"
    bad = os.fsdecode(b"\xff")
    args = [sys.executable, "-m", "aorta_tui", "--batch", str(_recipe(tmp_path)), "--no-snapshot",
            "--output", str(out / bad) if where == "output" else str(out), "--",
            *(["sh", "-c", f"echo {bad}"] if where == "command" else ["true"])]
    res = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "is not UTF-8 text" in res.stderr and "byte 0xff" in res.stderr
    assert "Traceback" not in res.stderr
    assert not out.exists()
