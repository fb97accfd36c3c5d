"""Issue 27 items 9-12: damaged run directories, special files, other users.

Real run directories (a probe sweep, a policy sweep, a queue sweep, each made by the real CLI
from a fresh working directory with its default output), then damaged for real: a FIFO and a
symlink to ``/dev/zero`` as the journal, ``.lock`` as a directory or a FIFO, a trial's or a
cell's directory as a file, a symlinked cell directory, the directory chowned to another user
and the command run as ``nobody`` (``setpriv``). Each command is the real CLI in a subprocess
with a timeout: a hang fails the test, so does any change to the directory.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.engine_support import REPO, only_run_dir

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

RECIPE = """\
schema_version: 1
mode: probe
ticket: DMG
trials: 2
mitigation_axis: [none, xnack]
diagnostic_axis: [none]
"""
QUICK = ["--iterations", "3", "--warmup", "1", "--device", "cpu", "--size", "tiny"]
TIMEOUT = 60  # far above what a refusal takes; a blocked open or an endless read meets it


def _cli(*args: str, cwd: Path, as_user: tuple[int, int] | None = None,
         timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUDO_")}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "aorta_tui", *args]
    if as_user is not None:
        env["HOME"] = str(cwd)
        argv = ["setpriv", f"--reuid={as_user[0]}", f"--regid={as_user[1]}", "--clear-groups",
                "--", *argv]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _fingerprint(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry under ``root`` (not followed): its kind and content hash, or link target."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", "")
            elif p.is_file():
                out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                out[rel] = ("special", str(p.lstat().st_mode))
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One finished run of each engine, made by the real CLI, to copy and damage."""
    pytest.importorskip("torch")  # the policy and queue sweeps run a torch workload on CPU
    work = tmp_path_factory.mktemp("made")
    (work / "probe.yaml").write_text(RECIPE)
    res = _cli("--batch", "probe.yaml", "--no-snapshot", "--", "true", cwd=work, timeout=300)
    assert res.returncode == 0, res.stderr
    pol = _cli("policy", "sweep", "hetero_kernels", "--policies", "baseline", "--trials", "2",
               "--streams", "2", *QUICK, cwd=work, timeout=300)
    assert pol.returncode == 0, pol.stderr
    queue = _cli("queue", "sweep", "hetero_kernels", "--streams", "2,4", *QUICK, cwd=work,
                 timeout=300)
    assert queue.returncode == 0, queue.stderr
    return {"sweep": only_run_dir(work / "aorta-out"),
            "policy": next((work / "aorta-policy").iterdir()),
            "queue": next((work / "aorta-queue").iterdir())}


# The commands that open a run directory of each engine, as the user types them.
def _resume(kind: str, d: Path) -> list[str]:
    return {"sweep": ["sweep", "run", "--resume", str(d), "--no-snapshot"],
            "policy": ["policy", "resume", str(d)],
            "queue": ["queue", "resume", str(d)]}[kind]


READERS: dict[str, Callable[[str, Path], list[str]]] = {
    "resume": _resume,
    "attach": lambda _k, d: ["attach", "--plain", str(d)],
    "bundle": lambda _k, d: ["bundle", str(d), "-o", str(d.parent / "b.tar.gz")],
    "review": lambda _k, d: ["bundle", str(d), "--review"],
}


def _copy(made: dict[str, Path], kind: str, tmp_path: Path) -> Path:
    d = tmp_path / "work" / kind
    shutil.copytree(made[kind], d, symlinks=True)
    (d / ".lock").unlink(missing_ok=True)
    return d


def _first_trial(kind: str, d: Path) -> Path:
    """A finished trial's directory (the resume would skip it) of this engine's layout."""
    if kind == "sweep":
        return d / "trials" / "none-none" / "trial-001"
    return sorted(p for p in (d / "trials").iterdir() if p.is_dir())[0]


# -- item 9: the journal is a FIFO, or a symlink to /dev/zero ---------------------------------

JOURNALS = {
    "fifo": lambda p: os.mkfifo(p),
    "dev-zero": lambda p: p.symlink_to("/dev/zero"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("journal", sorted(JOURNALS))
@pytest.mark.parametrize("kind", ["sweep", "policy", "queue"])
def test_a_special_journal_is_refused_at_once_by_every_reader(
        made: dict[str, Path], tmp_path: Path, kind: str, journal: str, reader: str,
        attack_tally) -> None:
    d = _copy(made, kind, tmp_path)
    (d / "journal.jsonl").unlink()
    JOURNALS[journal](d / "journal.jsonl")
    before = _fingerprint(d)
    res = _cli(*READERS[reader](kind, d), cwd=tmp_path)  # a hang is TimeoutExpired: a failure
    ok = res.returncode in (0, 2) and "Traceback" not in res.stderr
    if reader in ("resume", "attach"):
        ok = ok and res.returncode == 2 and "journal.jsonl" in res.stderr
        ok = ok and ("FIFO" in res.stderr or "symlink" in res.stderr)
    attack_tally.record("special journal (FIFO, /dev/zero) x every reader", cases=1,
                        failures=int(not ok),
                        promise="exit 2 at once (bundle lists it, unread), nothing changed")
    assert ok, (res.returncode, res.stderr[-2000:])
    assert _fingerprint(d) == before


# -- item 10: .lock a directory or a FIFO; a trial's or a cell's directory a file -------------

def _lock_dir(_kind: str, d: Path) -> Path:
    (d / ".lock").mkdir()
    return d / ".lock"


def _lock_fifo(_kind: str, d: Path) -> Path:
    os.mkfifo(d / ".lock")
    return d / ".lock"


def _trial_file(kind: str, d: Path) -> Path:
    t = _first_trial(kind, d)
    shutil.rmtree(t)
    t.write_text("not a directory\n")
    return t


def _cell_file(_kind: str, d: Path) -> Path:
    cell = d / "trials" / "xnack-none"
    shutil.rmtree(cell)
    cell.write_text("not a directory\n")
    return cell


DAMAGE = {"lock-dir": _lock_dir, "lock-fifo": _lock_fifo, "trial-file": _trial_file,
          "cell-file": _cell_file}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("kind", ["sweep", "policy", "queue"])
def test_resume_of_a_damaged_layout_is_a_located_exit_2_with_nothing_changed(
        made: dict[str, Path], tmp_path: Path, kind: str, damage: str, attack_tally) -> None:
    if damage == "cell-file" and kind != "sweep":
        pytest.skip("only a sweep has cell directories")
    d = _copy(made, kind, tmp_path)
    (d / "matrix.json").unlink(missing_ok=True)  # a resume would rewrite the reports
    bad = DAMAGE[damage](kind, d)
    before = _fingerprint(d)
    res = _cli(*_resume(kind, d), cwd=tmp_path)
    ok = (res.returncode == 2 and str(bad) in res.stderr and "fix:" in res.stderr
          and "Traceback" not in res.stderr)
    attack_tally.record("damaged run layout (.lock, trial or cell not a dir)", cases=1,
                        failures=int(not ok), promise="a located exit 2, nothing changed")
    assert ok, (res.returncode, res.stderr[-2000:])
    assert _fingerprint(d) == before


# -- item 12: a symlinked cell directory ------------------------------------------------------

def test_a_symlinked_cell_directory_is_refused_and_nothing_is_written_outside(
        made: dict[str, Path], tmp_path: Path) -> None:
    d = _copy(made, "sweep", tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(str(d / "trials" / "xnack-none"), outside / "xnack-none")
    (d / "trials" / "xnack-none").symlink_to(outside / "xnack-none")
    # The cell's trials lost their journal lines: a resume that followed the link would run
    # them again into the directory outside the run.
    lines = (d / "journal.jsonl").read_text().splitlines(keepends=True)
    (d / "journal.jsonl").write_text("".join(ln for ln in lines if "xnack-none/" not in ln))
    (d / "matrix.json").unlink()
    before, outside_before = _fingerprint(d), _fingerprint(outside)
    res = _cli(*_resume("sweep", d), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert f"{d / 'trials' / 'xnack-none'} is a symlink" in res.stderr, res.stderr
    assert _fingerprint(outside) == outside_before and _fingerprint(d) == before


# -- item 11: another user's run directory ------------------------------------------------------

needs_setpriv = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                   reason="needs root and setpriv")


@pytest.fixture
def outside_pytest_tmp():
    """A directory ``nobody`` can reach for the whole test: under pytest's basetemp it could not
    be kept so (pytest makes /tmp/pytest-of-root 0700 again whenever another session starts)."""
    base = Path(tempfile.mkdtemp(prefix="aorta-nobody-", dir="/tmp"))
    base.chmod(0o711)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_setpriv
@pytest.mark.parametrize("command", ["sweep-resume", "policy-resume", "queue-resume",
                                     "policy-report"])
def test_another_users_run_directory_is_exit_3_naming_the_owner_and_the_fix(
        made: dict[str, Path], outside_pytest_tmp: Path, command: str) -> None:
    kind = command.split("-")[0]
    d = _copy(made, kind, outside_pytest_tmp)
    (d / "matrix.json").unlink(missing_ok=True)
    (outside_pytest_tmp / "work").chmod(0o755)
    owner = pwd.getpwnam("daemon")
    subprocess.run(["chown", "-R", f"{owner.pw_uid}:{owner.pw_gid}", str(d)], check=True)
    nobody = pwd.getpwnam("nobody")
    args = ["policy", "report", str(d)] if command == "policy-report" else _resume(kind, d)
    before = _fingerprint(d)
    res = _cli(*args, cwd=outside_pytest_tmp / "work", as_user=(nobody.pw_uid, nobody.pw_gid))
    assert res.returncode == 3, res.stderr
    assert "permission denied" in res.stderr and "belongs to daemon" in res.stderr, res.stderr
    assert "runs as nobody" in res.stderr and f"sudo chown -R nobody {d}" in res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert _fingerprint(d) == before


# -- "one checked open": the readers of a run directory -----------------------------------------

# Every module that reads a run directory's files. Each opens them through core/inputs.py's
# open_input (or read_input_bytes / read_json_or_none / load_json_input built on it) or
# store's open_journal_file (journal_file.py) / open_lock_file (lock.py), never with a bare open.
RUN_DIR_READERS = [
    "store/lock.py", "store/journal_file.py", "store/journal_writer.py", "store/journal_reader.py",
    "store/run_list.py", "store/resume.py", "store/run_create.py", "store/run_meta.py",
    "store/run_store.py", "store/journal_follow.py", "sweep/orchestrator.py",
    "policy/evaluator.py", "policy/report.py", "hwqueue/sweep.py", "tui/matrix_state.py",
    "tui/logs.py", "cli/sinks.py", "cli/attach_cmd.py", "cli/follow_plain.py",
    "bundle/archive.py", "analysis/tables.py", "sweep/snapshots.py", "executor/placement.py",
    "core/worker_result.py",
]
# Reads that are not of a run directory, each with its reason.
NOT_RUN_DIR = {
    ("store/lock.py", "read_text"): "/proc/stat and /proc/PID/stat (is the lock's holder live)",
}
_BARE = {"open", "read_text", "read_bytes"}


def _bare_reads(module: str) -> list[tuple[str, int]]:
    tree = ast.parse((REPO / "aorta_tui" / module).read_text())
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in (
                "os", "tarfile", "KernelLog"):
            # os.open for writing (the journal's O_WRONLY) is a writer; for reading it is a
            # second checked open; tarfile.open / KernelLog.open are no run-directory files
            if f.value.id == "os" and name == "open" and "O_RDONLY" in ast.unparse(node):
                found.append(("os.open", node.lineno))
            continue
        if name in _BARE and (module, name) not in NOT_RUN_DIR:
            found.append((name, node.lineno))
    return found


@pytest.mark.parametrize("module", RUN_DIR_READERS)
def test_every_run_directory_reader_uses_the_one_checked_open(module: str) -> None:
    assert _bare_reads(module) == [], f"aorta_tui/{module} opens run-directory files itself"


def test_the_checked_open_refuses_special_files_without_blocking(tmp_path: Path) -> None:
    """What every reader above relies on, for each kind of damage, under a short timeout."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    code = (
        "import sys; from aorta_tui.core.inputs import open_input, read_json_or_none\n"
        "from aorta_tui.core.errors import UsageError\n"
        "for name in ('fifo', 'zero', 'dir', 'link'):\n"
        "    p = sys.argv[1] + '/' + name\n"
        "    assert read_json_or_none(p) is None, name\n"
        "    for follow in (True, False):\n"
        "        try:\n"
        "            open_input(p, what='journal', follow_symlinks=follow)\n"
        "        except UsageError as exc:\n"
        "            print(name, follow, exc.message)\n"
        "        else:\n"
        "            raise SystemExit(f'{name} opened')\n")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=TIMEOUT, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 8
    assert "fifo True" in lines[0] and "FIFO" in lines[0]
    assert any(ln.startswith("zero True") and "character device" in ln for ln in lines)
    assert any(ln.startswith("zero False") and "symlink" in ln for ln in lines)


def test_listing_runs_survives_a_special_journal(made: dict[str, Path], tmp_path: Path) -> None:
    """The TUI's home screen lists runs every few seconds: a FIFO journal must not block it."""
    d = _copy(made, "sweep", tmp_path)
    (d / "journal.jsonl").unlink()
    os.mkfifo(d / "journal.jsonl")
    code = ("import sys, json; from aorta_tui.store.run_list import list_runs\n"
            "print(json.dumps([r.state for r in list_runs(sys.argv[1])]))")
    res = subprocess.run([sys.executable, "-c", code, str(d.parent.parent)], capture_output=True,
                         text=True, timeout=TIMEOUT, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == ["interrupted"]


# -- issue 37 item 7: what a resume writes at the top of the run, and retired attempts --------

def _unfinished_first_trial(kind: str, d: Path) -> Path:
    """Make the first trial unfinished (its result gone: the resume runs it again)."""
    t = _first_trial(kind, d)
    for name in ("result.json", "outcome.json"):
        (t / name).unlink(missing_ok=True)
    return t


def _interrupted_link(kind: str, d: Path) -> Path:
    t = _unfinished_first_trial(kind, d)
    link = t.with_name(f"{t.name}.interrupted-1")
    link.symlink_to(d / "nowhere")  # dangling: `exists()` said the name was free
    return link


def _top_dir(name: str) -> Callable[[str, Path], Path]:
    def damage(kind: str, d: Path) -> Path:
        _unfinished_first_trial(kind, d)
        (d / name).unlink(missing_ok=True)
        (d / name).mkdir()
        (d / name / "keep").write_text("x")
        return d / name
    return damage


def _env_file(kind: str, d: Path) -> Path:
    _unfinished_first_trial(kind, d)
    (d / "env").write_text("not a directory\n")
    return d / "env"


TOP_DAMAGE: dict[str, tuple[str, Callable[[str, Path], Path]]] = {
    "sweep interrupted-1 a dangling link": ("sweep", _interrupted_link),
    "sweep matrix.json a directory": ("sweep", _top_dir("matrix.json")),
    "sweep matrix.md a directory": ("sweep", _top_dir("matrix.md")),
    "sweep env a file (snapshots on)": ("sweep", _env_file),
    "policy policy.json a directory": ("policy", _top_dir("policy.json")),
    "policy policy.md a directory": ("policy", _top_dir("policy.md")),
    "queue sweep.json a directory": ("queue", _top_dir("sweep.json")),
}


def _resume_with_snapshots(kind: str, d: Path) -> list[str]:
    args = _resume(kind, d)
    return [a for a in args if a != "--no-snapshot"]  # env/ is written only with snapshots on


@pytest.mark.parametrize("case", sorted(TOP_DAMAGE))
def test_damage_a_resume_met_only_after_rerunning_trials_is_refused_first(
        made: dict[str, Path], tmp_path: Path, case: str, attack_tally) -> None:
    """Each was exit 70 once the trials had run again (IsADirectoryError on the report's
    rename, NotADirectoryError on env/, a retiring rename onto a link); now a located exit 2
    before anything is changed, naming the path and the `mv` that clears it."""
    kind, damage = TOP_DAMAGE[case]
    d = _copy(made, kind, tmp_path)
    bad = damage(kind, d)
    before = _fingerprint(d)
    commands = [_resume_with_snapshots(kind, d)]
    if kind == "policy":
        commands.append(["policy", "report", str(d)])
    for cmd in commands:
        res = _cli(*cmd, cwd=tmp_path, timeout=300)
        ok = (res.returncode == 2 and str(bad) in res.stderr and "fix:" in res.stderr
              and "mv " in res.stderr and "Traceback" not in res.stderr)
        attack_tally.record("damaged run top level (reports, env/, retired attempts)", cases=1,
                            failures=int(not ok), promise="a located exit 2, nothing changed")
        assert ok, (cmd, res.returncode, res.stderr[-2000:])
        assert _fingerprint(d) == before


def test_a_trial_that_replaces_its_own_directory_with_a_file_is_a_located_exit_2(
        tmp_path: Path) -> None:
    """The trial's directory is its ``$AORTA_ARTIFACT_DIR``: one that removes it and writes a
    file in its place made the result's write fail (exit 70)."""
    (tmp_path / "probe.yaml").write_text(RECIPE.replace("trials: 2", "trials: 1")
                                         .replace("[none, xnack]", "[none]"))
    res = _cli("--batch", "probe.yaml", "--no-snapshot", "--", "sh", "-c",
               'rm -rf "$AORTA_ARTIFACT_DIR" && echo mine > "$AORTA_ARTIFACT_DIR"',
               cwd=tmp_path, timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    run_dir = only_run_dir(tmp_path / "aorta-out").relative_to(tmp_path)  # as the user gave it
    trial = run_dir / "trials" / "none-none" / "trial-000"
    assert f"{trial}: trial none-none/trial-000 replaced its own directory with a file" \
        in res.stderr, res.stderr
    assert "$AORTA_ARTIFACT_DIR" in res.stderr and "fix:" in res.stderr
    assert (tmp_path / trial).read_text() == "mine\n"  # what the trial wrote is left as it is
    # the resume refuses it, located, until it is moved away
    again = _cli("sweep", "run", "--resume", str(run_dir), "--no-snapshot", cwd=tmp_path)
    assert again.returncode == 2 and str(trial) in again.stderr and "mv " in again.stderr
