"""One command-line dialect (issue 36 item 7, docs/cli.md), checked over every command the real
typer app has, not over a list that a new command could miss.

The walk reads the app's options (names, types, parsers); the refusals run the real CLI, as a
user does, with NaN, infinity and -1 for every numeric option: exit 2 naming the option, before
anything runs. A new option that spells a timeout, a trial count or an output its own way, or a
numeric option that skips the one parser (``cli/common.py``), fails here.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.cli.main import app
from tests.engine_support import aorta

# Spellings docs/cli.md keeps on purpose, each with its reason there: an older spelling is a
# hidden option of its own (not in --help), the rest are shown.
OLDER = {("policy sweep", "-k"): "--trials", ("policy sweep", "--timeout-s"): "--timeout"}
KEPT = {**{k: f"an older spelling of {v}" for k, v in OLDER.items()},
        ("agent", "--llm-timeout"): "the HTTP request's deadline, beside --llm-model and --llm-base-url"}
# The one parser's functions (cli/common.py): number, and seconds, seed_number, count on it.
ONE_PARSER = ("number.", "seconds.", "seed_number.", "count.")


def _commands(cmd: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    cmd = typer.main.get_command(app) if cmd is None else cmd
    yield " ".join(path), cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


def _options() -> list[tuple[str, Any]]:
    return [(where, p) for where, cmd in _commands() for p in cmd.params
            if p.param_type_name == "option" and "--help" not in p.opts]


def _names(param: Any) -> list[str]:
    return [*param.opts, *param.secondary_opts]


def _numeric(param: Any) -> bool:
    """Takes a number: an int or float type, or one of the one parser's functions."""
    if getattr(param, "count", False) or param.is_flag:
        return False  # -v, -vv: a count of flags, not a number given
    func = getattr(param.type, "func", None)
    if func is not None:
        return getattr(func, "__qualname__", "").startswith(ONE_PARSER)
    return param.type.name in {"integer", "float", "integer range", "float range"}


def test_the_walk_sees_every_command() -> None:
    where = {w for w, _ in _commands()}
    assert {"run", "sweep run", "queue run", "policy sweep", "trace queue", "trace memory",
            "env probe", "agent", "bundle"} <= where, where


def test_option_names_speak_the_dialect() -> None:
    wrong = []
    for where, p in _options():
        names = _names(p)
        extra = [n for n in names if (where, n) not in KEPT]
        if "--trials" in names and sorted(extra) != ["--trials", "-n"]:
            wrong.append(f"{where}: {names}: trials are --trials/-n")
        if any("timeout" in n for n in extra) and "--timeout" not in extra:
            wrong.append(f"{where}: {names}: a timeout is --timeout (seconds)")
        if any(n.endswith(("-s", "-sec", "-secs", "-seconds")) and n.startswith("--") for n in extra):
            wrong.append(f"{where}: {names}: a unit belongs in the help, not the name")
        if ("-o" in names or "--output" in names) and not {"-o", "--output"} <= set(names):
            wrong.append(f"{where}: {names}: output is -o/--output")
        if any(n.startswith("--output-") or n == "--out" for n in names):
            wrong.append(f"{where}: {names}: output is -o/--output")
        if "--json" in names and not p.is_flag:
            wrong.append(f"{where}: {names}: --json is a flag")
        if any(n.startswith("--json-") for n in names):
            wrong.append(f"{where}: {names}: --json is the one JSON flag (events when it runs something)")
    assert not wrong, "\n".join(wrong)


def test_every_numeric_option_goes_through_the_one_parser() -> None:
    numeric = [(w, p) for w, p in _options() if _numeric(p) or p.type.name in {"integer", "float"}]
    assert len(numeric) >= 40, len(numeric)  # the walk sees them (trials, streams, seconds, ...)
    plain = [f"{w}: {_names(p)} ({p.type.name})" for w, p in numeric if getattr(p.type, "func", None) is None]
    assert not plain, "numeric options without cli/common.py's parser:\n" + "\n".join(plain)


def test_an_older_spelling_is_a_hidden_option_of_its_own() -> None:
    found = {(w, n): p for w, p in _options() for n in _names(p) if (w, n) in OLDER}
    assert set(found) == set(OLDER), found
    for (where, name), p in found.items():
        assert p.hidden and _names(p) == [name], (where, _names(p))


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize(("older", "newer", "value", "key"), [
    ("-k", "--trials", "3", "trials"), ("--timeout-s", "--timeout", "7", "timeout_s")])
def test_an_older_spelling_means_the_option_and_both_together_are_refused(
        tmp_path: Path, older: str, newer: str, value: str, key: str) -> None:
    base = ("policy", "sweep", "hetero_kernels", "--dry-run", "--json", "--device", "cpu")
    plans = [json.loads(aorta(*base, "-o", "p", flag, value, cwd=tmp_path).stdout)["request"]
             for flag in (older, newer)]
    assert plans[0] == plans[1] and plans[0][key] == float(value)
    both = aorta(*base, newer, value, older, value, cwd=tmp_path)
    assert both.returncode == 2 and f"{newer} and {older} are one option" in both.stderr
    assert list(tmp_path.iterdir()) == []


def _numeric_cases() -> list[tuple[str, str]]:
    return [(where, p.opts[0] if p.opts[0].startswith("--") else _names(p)[-1])
            for where, p in _options() if _numeric(p)]


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize(("where", "option"), _numeric_cases(),
                         ids=[f"{w} {o}" for w, o in _numeric_cases()])
def test_a_numeric_option_refuses_nan_inf_and_negative_with_exit_2(
        tmp_path: Path, where: str, option: str) -> None:
    """The real CLI, from an empty directory: refused while parsing, naming the option, before
    any argument is looked at or anything is written."""
    for value in ("nan", "inf", "-1"):
        proc = aorta(*where.split(), option, value, cwd=tmp_path, timeout=120)
        assert proc.returncode == 2, (where, option, value, proc.returncode, proc.stderr[-800:])
        assert option in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-800:]
        assert "internal error" not in proc.stderr
        assert list(tmp_path.iterdir()) == [], (where, option, value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=30), st.integers(min_value=-10**30, max_value=10**30),
                 st.from_regex(r"\A-?[0-9٠-٩０-９]{1,25}\Z"),
                 st.floats(allow_nan=True, allow_infinity=True)),
       st.integers(min_value=0, max_value=2), st.sampled_from([1, 100, 2**31 - 1]))
def test_the_count_parser_gives_an_integer_in_range_or_a_usage_error(
        value: object, at_least: int, at_most: int) -> None:
    from aorta_tui.cli.common import count

    try:
        got = count(at_least=at_least, at_most=at_most)(value)
    except typer.BadParameter as exc:
        assert len(str(exc)) < 300
        return
    assert isinstance(got, int) and not isinstance(got, bool)
    assert at_least <= got <= at_most
    text = str(value).strip()
    assert text.lstrip("-").isascii() and not (isinstance(value, float) and not math.isfinite(value))


DOCUMENT_COMMANDS = {
    "bundle": ["bundle", "nope/run"],  # the output is checked before the inputs are read
    "env probe": ["env", "probe", "--no-torch"],
    "recipe schema": ["recipe", "schema"],
    "queue run": ["queue", "run", "tiny_kernel_stress", "--device", "cpu", "-i", "1", "-w", "0", "-q"],
    "queue sweep": ["queue", "sweep", "tiny_kernel_stress", "--streams", "1", "--device", "cpu",
                    "-i", "1", "-w", "0", "-q"],
    "trace queue": ["trace", "queue", "--probes", "ioctl", "--no-calibrate"],
    "trace memory": ["trace", "memory", "--no-calibrate"],
}


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("target", ["directory", "fifo", "link-to-fifo"])
@pytest.mark.parametrize("command", sorted(DOCUMENT_COMMANDS))
def test_output_that_is_no_file_is_refused_before_any_work(
        tmp_path: Path, command: str, target: str) -> None:
    """`-o DIR`, `-o FIFO`, `-o LINK-TO-A-FIFO` (as `-o /dev/stdout` is a link to a pipe): exit 2
    naming it, before the work; the FIFO is left a FIFO (the atomic rename replaced it with a
    regular file, as root it would have replaced /dev/stdout; a directory was exit 70 for trace)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    path = {"directory": tmp_path / "d", "fifo": fifo, "link-to-fifo": tmp_path / "link"}[target]
    if target == "directory":
        path.mkdir()
    elif target == "link-to-fifo":
        path.symlink_to(fifo)
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = [*DOCUMENT_COMMANDS[command], "-o", path.name]
    proc = aorta(*argv, *(["--", "true"] if command.startswith("trace") else []), cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-800:])
    assert f"-o {path.name} is " in proc.stderr and "Traceback" not in proc.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# Every path-valued option of the app: a file it writes (atomically: a rename over the name),
# a directory it writes in, or something it reads. A new path option must be placed here, and a
# file it writes is then refused when the name is no file (the next test), as `-o` is.
WRITTEN_FILES = {
    ("bundle", "-o"), ("env probe", "--output"), ("queue resume", "--output"),
    ("queue run", "--output"), ("queue run", "--profiler-trace"), ("queue sweep", "--output"),
    ("recipe schema", "--output"), ("trace memory", "-o"), ("trace memory", "--raw"),
    ("trace memory", "--perfetto"), ("trace queue", "-o"), ("trace queue", "--raw"),
    ("trace queue", "--perfetto"),
}
DIRECTORIES = {("agent", "-o"), ("export", "-o"), ("policy sweep", "--output"),
               ("queue sweep", "--run-dir"), ("run", "--output"), ("sweep run", "--output"),
               ("agent", "--resume"), ("sweep run", "--resume")}
READ = {("", "--batch"), ("sweep run", "--recipe"), ("bundle", "--redaction-from"),
        ("policy list", "--policy-file"), ("policy sweep", "--policy-file"),
        *((c, "--mitigations-file") for c in ("agent", "recipe resolve", "recipe validate",
                                               "sweep list-environments", "sweep list-mitigations",
                                               "sweep run")),
        *((c, "--file") for c in ("environments list", "mitigations list"))}


def test_every_path_option_is_a_file_written_a_directory_or_an_input() -> None:
    found = {(where, p.opts[0]) for where, p in _options() if p.type.name == "path"}
    assert found == WRITTEN_FILES | DIRECTORIES | READ


# the other options that name a file the command writes, each on a command that reaches it
OTHER_WRITTEN = {
    ("trace queue", "--raw"): ["trace", "queue", "--probes", "ioctl", "--no-calibrate"],
    ("trace queue", "--perfetto"): ["trace", "queue", "--probes", "ioctl", "--no-calibrate"],
    ("trace memory", "--raw"): ["trace", "memory", "--no-calibrate"],
    ("trace memory", "--perfetto"): ["trace", "memory", "--no-calibrate"],
    ("queue run", "--profiler-trace"): DOCUMENT_COMMANDS["queue run"],
}


@pytest.mark.parametrize("target", ["fifo", "link-to-fifo"])
@pytest.mark.parametrize("option", sorted(OTHER_WRITTEN), ids=" ".join)
def test_every_written_file_that_is_no_file_is_refused_before_any_work(
        tmp_path: Path, option: tuple[str, str], target: str) -> None:
    """`trace queue --raw /dev/null`, as root, renamed a regular file over /dev/null (found
    while testing this session; /dev/null had to be made again): --raw, --perfetto and
    --profiler-trace were never checked as -o is. A FIFO (or a link to one, as /dev/stdout is)
    stands in for the device here: exit 2 naming the option, the FIFO left a FIFO."""
    assert option in WRITTEN_FILES
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    path = fifo if target == "fifo" else tmp_path / "link"
    if target == "link-to-fifo":
        path.symlink_to(fifo)
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = [*OTHER_WRITTEN[option], option[1], path.name]
    proc = aorta(*argv, *(["--", "true"] if option[0].startswith("trace") else []), cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-800:])
    assert f"{option[1]} {path.name} is " in proc.stderr and "Traceback" not in proc.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# Every long command's --json, refused before it runs (docs/cli.md, cli/stream_end.py): the
# argv, and what makes it refuse. `sweep run` printed one untyped `error` line, `policy sweep`,
# `policy resume`, `run` and `queue resume` printed nothing on stdout at all.
REFUSED = [
    (["sweep", "run", "--recipe", "missing.yaml"], "no such recipe file"),
    (["--batch", "missing.yaml"], "no such recipe file"),
    (["run", "--workload", "no_such_workload"], "unknown workload"),
    (["queue", "run", "no_such_workload"], "unknown workload"),
    (["queue", "sweep", "no_such_workload"], "unknown workload"),
    (["queue", "sweep", "hetero_kernels", "--streams", "abc"], "--streams 'abc'"),
    (["queue", "run", "hetero_kernels", "--size", "huge"], "unknown size 'huge'"),
    (["queue", "resume", "no-such-dir"], "no-such-dir"),
    (["policy", "sweep", "tiny_kernel_stress", "--policies", "no_such_policy"], "unknown policy"),
    (["policy", "resume", "no-such-dir"], "no-such-dir"),
    (["trace", "queue", "--pid", "4194303", "--duration", "1"], "4194303"),
    (["agent", "--goal", "failure_rate < 0.1"], "missing RECIPE"),
]


@pytest.mark.parametrize(("argv", "said"), REFUSED, ids=[" ".join(a[:4]) for a, _ in REFUSED])
def test_a_refused_json_run_still_ends_its_stream_typed(argv: list[str], said: str,
                                                        tmp_path: Path) -> None:
    from aorta_tui.core.events import RunFinished, RunStarted, RunWarning, event_from_dict

    proc = aorta(*argv, "--json", cwd=tmp_path)
    assert proc.returncode in (2, 3), proc.stderr
    events = [event_from_dict(json.loads(line)) for line in proc.stdout.splitlines()]
    assert [type(e) for e in events] == [RunStarted, RunWarning, RunFinished], proc.stdout
    started, warning, finished = events
    assert isinstance(started, RunStarted) and started.run_dir == ""  # nothing was made
    assert isinstance(warning, RunWarning) and warning.code == "error" and said in warning.message
    assert isinstance(finished, RunFinished) and finished.status == "failed"
    assert finished.exit_code == proc.returncode and said in finished.summary["error"]
    assert said in proc.stderr  # and for people, on stderr, as without --json
    assert list(tmp_path.iterdir()) == []
