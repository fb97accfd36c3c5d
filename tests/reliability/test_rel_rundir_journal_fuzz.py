"""Issue 12, item 7 and the journal fuzzer: damaged journals for `--resume`, `attach --plain` and
the run list. Never exit 70, never a traceback; a resume still yields exactly the planned trials.

Each case is a real run directory (copied from one real sweep) whose ``journal.jsonl`` is
mutated: truncated lines, lines of JSON that are not objects, known fields of the wrong type,
duplicated, dropped or swapped lines, NUL bytes, invalid UTF-8, long lines, a torn tail. The
hypothesis cases go through the real command code in process (the typer app behind
``cli_command``, which turns any unexpected exception into exit 70); a fixed set of the nastiest
journals (a line over the 16 MiB limit among them) goes through the real CLI in a subprocess.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from aorta_tui.store.naming import JOURNAL
from aorta_tui.store.run_list import list_runs, run_info
from tests.engine_support import aorta, only_run_dir

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RECIPE = """\
schema_version: 1
mode: probe
ticket: FUZZ
trials: 2
mitigation_axis: [none, xnack]
diagnostic_axis: [none]
"""
PLANNED = {f"{c}/trial-{n:03d}" for c in ("none-none", "xnack-none") for n in range(2)}
PROMISE = "never exit 70 or a traceback; resume yields the planned trials"


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real finished run: the journal every case mutates."""
    root = tmp_path_factory.mktemp("journal-fuzz-base")
    (root / "probe.yaml").write_text(RECIPE)
    res = aorta("--batch", str(root / "probe.yaml"), "--output", str(root / "out"), "--no-snapshot",
                "--", "sh", "-c", "echo step_time 0.01")
    assert res.returncode == 0, res.stderr
    return only_run_dir(root / "out")


@pytest.fixture()
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rel-journal-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- mutations ------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
NON_OBJECTS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10),
                        st.lists(JSON_VALUES, max_size=4))


@st.composite
def mutation(draw: st.DrawFn, n_lines: int) -> tuple[str, int, object]:
    kind = draw(st.sampled_from(["truncate", "non_object", "wrong_type", "nul", "bad_utf8", "duplicate",
                                 "drop", "swap", "long_line", "binary", "torn_tail", "unknown_event",
                                 "bad_trial_id"]))
    i = draw(st.integers(0, max(n_lines - 1, 0)))
    if kind == "non_object":
        arg: object = json.dumps(draw(NON_OBJECTS))
    elif kind == "wrong_type":
        arg = draw(JSON_VALUES)
    elif kind in ("truncate", "nul", "bad_utf8"):
        arg = draw(st.integers(0, 400))
    elif kind == "long_line":
        arg = draw(st.integers(1 << 10, 1 << 20))
    elif kind == "binary":
        arg = draw(st.binary(min_size=1, max_size=64))
    elif kind == "bad_trial_id":
        arg = draw(st.sampled_from(["../../etc/x/trial-000", "/abs/trial-000", "a/b/trial-1", "", "x\x00/trial-1"]))
    else:
        arg = None
    return kind, i, arg


def _object(line: bytes) -> dict | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None  # an earlier mutation already broke this line
    return obj if isinstance(obj, dict) else None


def apply(lines: list[bytes], kind: str, i: int, arg: object) -> tuple[list[bytes], bool]:
    """Apply one mutation; returns the lines and whether the journal still ends with a newline."""
    lines = list(lines)
    i = min(i, len(lines) - 1)
    if kind == "truncate":
        lines[i] = lines[i][: int(arg) % max(len(lines[i]), 1)]  # type: ignore[call-overload]
    elif kind == "non_object":
        lines[i] = str(arg).encode()
    elif kind == "wrong_type":
        obj = _object(lines[i])
        if obj is None:
            return lines, True
        keys = [k for k in obj if k != "event"] or ["event"]
        obj[keys[hash(str(arg)) % len(keys)]] = arg
        lines[i] = json.dumps(obj).encode()
    elif kind == "nul":
        p = int(arg) % (len(lines[i]) + 1)  # type: ignore[call-overload]
        lines[i] = lines[i][:p] + b"\x00" + lines[i][p:]
    elif kind == "bad_utf8":
        p = int(arg) % (len(lines[i]) + 1)  # type: ignore[call-overload]
        lines[i] = lines[i][:p] + b"\xff\xc3(" + lines[i][p:]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "drop" and len(lines) > 1:
        del lines[i]
    elif kind == "swap" and i + 1 < len(lines):
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    elif kind == "long_line":
        lines.insert(i, b'{"event": "warning", "run_id": "r", "message": "' + b"x" * int(arg) + b'"}')  # type: ignore[call-overload]
    elif kind == "binary":
        lines.insert(i, bytes(arg).replace(b"\n", b" "))  # type: ignore[arg-type]
    elif kind == "unknown_event":
        lines.insert(i, b'{"event": "from_the_future", "run_id": "r"}')
    elif kind == "bad_trial_id":
        obj = _object(lines[i])
        if obj is not None and "trial_id" in obj:
            obj["trial_id"] = arg
            lines[i] = json.dumps(obj).encode()
    elif kind == "torn_tail":
        return lines, False
    return lines, True


def write_case(base: Path, work: Path, lines: list[bytes], newline_at_end: bool) -> Path:
    n = len(list(work.iterdir()))
    run_dir = work / f"T{n}" / base.name
    shutil.copytree(base, run_dir)
    data = b"\n".join(lines) + (b"\n" if newline_at_end else b"")
    (run_dir / JOURNAL).write_bytes(data)
    (run_dir / "matrix.json").unlink()
    return run_dir


# -- the three readers ------------------------------------------------------------------------

def check_case(run_dir: Path) -> list[str]:
    """Run the list, attach and resume on a damaged run; what broke a promise."""
    import aorta_tui.cli.follow_plain as follow_plain_mod
    from aorta_tui.cli.main import app

    problems: list[str] = []
    try:
        list_runs(run_dir.parents[1])
        run_info(run_dir)
    except Exception as exc:  # noqa: BLE001 - any exception here is the bug the fuzzer hunts
        problems.append(f"run list: {type(exc).__name__}: {exc}")
    out = io.StringIO()
    old = follow_plain_mod.CHECK_S
    follow_plain_mod.CHECK_S = 0.01
    try:
        code = follow_plain_mod.follow_plain(run_dir, out=out)
        if code not in (0, 1, 130):
            problems.append(f"attach --plain: exit {code}")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"attach --plain: {type(exc).__name__}: {exc}")
    finally:
        follow_plain_mod.CHECK_S = old
    if "Traceback" in out.getvalue():
        problems.append("attach --plain printed a traceback")
    res = CliRunner().invoke(app, ["sweep", "run", "--resume", str(run_dir), "--no-snapshot"])
    if res.exit_code != 0 or "Traceback" in res.output:
        problems.append(f"resume: exit {res.exit_code}: {res.output[-400:]}")
    else:
        problems += trial_problems(run_dir)
    return problems


def trial_problems(run_dir: Path) -> list[str]:
    matrix = json.loads((run_dir / "matrix.json").read_text())
    rows = Counter(t["trial_id"] for t in matrix["trials"])
    if matrix["trials_finished"] != len(PLANNED) or set(rows) != PLANNED or set(rows.values()) != {1}:
        return [f"resume: {matrix['trials_finished']} trials finished, rows {dict(rows)}"]
    return []


def test_fuzzed_journals_never_break_resume_attach_or_the_run_list(base_run: Path, work: Path,
                                                                  attack_tally) -> None:
    base_lines = (base_run / JOURNAL).read_bytes().splitlines()
    failures: list[str] = []
    cases = 0

    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(mutation(len(base_lines)), min_size=1, max_size=4))
    def one(mutations: list[tuple[str, int, object]]) -> None:
        nonlocal cases
        lines, newline = list(base_lines), True
        for kind, i, arg in mutations:
            lines, still = apply(lines, kind, i, arg)
            newline = newline and still
        run_dir = write_case(base_run, work, lines, newline)
        cases += 1
        problems = check_case(run_dir)
        if problems:
            failures.append(f"{mutations!r:.300}: {problems}")
        shutil.rmtree(run_dir.parent, ignore_errors=True)

    one()
    attack_tally.record("journal fuzzer (resume, attach --plain, run list)", cases=cases,
                        failures=len(failures), promise=PROMISE)
    assert not failures, failures[:5]


NASTY = {
    "non_object": lambda lines: [lines[0], b"[1, 2]", *lines[1:]],
    "over_16_MiB_line": lambda lines: [lines[0], b'{"event": "warning", "message": "' + b"x" * (17 << 20) + b'"}',
                                       *lines[1:]],
    "nul_bytes": lambda lines: [lines[0], b"\x00" * 100, *lines[1:]],
    "invalid_utf8": lambda lines: [lines[0], lines[1][:20] + b"\xff\xfe" + lines[1][20:], *lines[2:]],
    "truncated_everywhere": lambda lines: [ln[: len(ln) // 2] for ln in lines],
    "wrong_types": lambda lines: [json.dumps({**json.loads(ln), "trial_id": 5, "total": "many"}).encode()
                                  for ln in lines],
}


@pytest.mark.parametrize("name", sorted(NASTY))
def test_the_real_cli_on_nasty_journals(base_run: Path, work: Path, name: str, attack_tally) -> None:
    lines = (base_run / JOURNAL).read_bytes().splitlines()
    run_dir = write_case(base_run, work, NASTY[name](lines), True)
    problems = []
    att = subprocess.run([sys.executable, "-m", "aorta_tui", "attach", "--plain", str(run_dir)],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    if att.returncode not in (0, 130) or "Traceback" in att.stdout + att.stderr:
        problems.append(f"attach: exit {att.returncode}: {att.stderr[-300:]}")
    if name != "truncated_everywhere" and "damaged" not in att.stdout and "journal.jsonl:" not in att.stdout:
        problems.append("attach did not report the damaged line")
    res = aorta("sweep", "run", "--resume", str(run_dir), "--no-snapshot")
    if res.returncode != 0 or "Traceback" in res.stderr:
        problems.append(f"resume: exit {res.returncode}: {res.stderr[-300:]}")
    else:
        problems += trial_problems(run_dir)
    attack_tally.record("journal fuzzer (real CLI, nasty journals)", cases=1, failures=int(bool(problems)),
                        promise=PROMISE)
    assert not problems, problems
