"""sanitizer_report.json as a typed value (collect/sanitizer_report.py): the typed writer writes
the bytes the untyped one wrote (hypothesis-drawn checks); a report the run writes reads back
to its own bytes; a key a newer writer added is kept; a damaged report names the file and the
field (exit 2); an oversize one is refused before it is read."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aorta_tui.collect.sanitizer import SanitizerRecipe, overall, run_sanitizer_recipe
from aorta_tui.collect.sanitizer_report import (
    CheckResult,
    Finding,
    SanitizerReport,
    read_sanitizer_report,
)
from aorta_tui.core.atomic import json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS

# -- the untyped writer, verbatim (collect/sanitizer.py before the type) ----------------------


@dataclass(frozen=True)
class _OldFinding:
    kind: str
    message: str
    log_line: int
    kernel: str | None = None
    source: str | None = None
    thread: str | None = None
    block: str | None = None
    address: str | None = None


@dataclass(frozen=True)
class _OldCheckResult:
    sanitizer: str
    state: str
    verdict: str
    reason: str = ""
    errors: int | None = None
    warnings: int | None = None
    first: _OldFinding | None = None
    exit_code: int | None = None
    log: str | None = None
    argv: tuple[str, ...] = ()
    seconds: float | None = None


def _old_report_dict(recipe: SanitizerRecipe, checks: list[_OldCheckResult], *,
                     dry_run: bool) -> dict[str, Any]:
    return {
        "schema": "aorta-tui.sanitizer_report/1", "ticket": recipe.ticket,
        "recipe": recipe.source_label, "target": recipe.target,
        "source_kind": recipe.source_kind, "argv": list(recipe.argv or ()),
        "dry_run": dry_run, "overall_verdict": overall(checks),  # type: ignore[arg-type]
        "checks": [asdict(c) for c in checks],
    }


# -- the bytes -----------------------------------------------------------------------------

_text = st.text(max_size=10)  # lone surrogates included: an argv's undecodable bytes
_opt_text = st.none() | _text
_opt_int = st.none() | st.integers(-(2**40), 2**40)
_findings = st.builds(_OldFinding, kind=_text, message=_text, log_line=st.integers(1, 10**6),
                      kernel=_opt_text, source=_opt_text, thread=_opt_text, block=_opt_text,
                      address=_opt_text)
_checks = st.builds(
    _OldCheckResult, sanitizer=_text,
    state=st.sampled_from(["ran", "not_checked", "error", "timed_out"]),
    verdict=st.sampled_from(["pass", "warn", "fail", "not_checked", "error"]),
    reason=_text, errors=_opt_int, warnings=_opt_int, first=st.none() | _findings,
    exit_code=_opt_int, log=_opt_text, argv=st.lists(_text, max_size=3).map(tuple),
    seconds=st.none() | st.floats(0, 1e6))
_recipes = st.builds(SanitizerRecipe, ticket=_text, target=_text,
                     source_kind=st.sampled_from(["command", "kernel", "gemm_csv"]),
                     sanitizers=st.just(("memcheck",)),
                     argv=st.none() | st.lists(_text, min_size=1, max_size=3).map(tuple),
                     source_label=_text)


def _typed_check(c: _OldCheckResult) -> CheckResult:
    first = None if c.first is None else Finding(**asdict(c.first))
    return CheckResult(**{**asdict(c), "first": first})


@given(_recipes, st.lists(_checks, max_size=3), st.booleans())
def test_the_typed_writer_writes_the_untyped_writers_bytes(
        recipe: SanitizerRecipe, checks: list[_OldCheckResult], dry_run: bool) -> None:
    from aorta_tui.collect.sanitizer import sanitizer_report

    old = json_bytes(_old_report_dict(recipe, checks, dry_run=dry_run))
    typed = sanitizer_report(recipe, [_typed_check(c) for c in checks], dry_run=dry_run)
    assert json_bytes(typed.to_json()) == old
    again = SanitizerReport.from_dict(json.loads(old))
    assert again == typed and json_bytes(again.to_json()) == old


def _command_recipe(tmp_path: Path, sanitizers: tuple[str, ...]) -> SanitizerRecipe:
    return SanitizerRecipe(ticket="T-1", target="gfx942", source_kind="command",
                           sanitizers=sanitizers, argv=("/bin/true", "\u00e9"),
                           source_label=str(tmp_path / "r.yaml"))


def test_a_report_the_run_writes_reads_back_to_its_bytes(tmp_path: Path) -> None:
    # waitcheck: never available here (ROCm); memcheck under --dry-run: not run. Both are
    # checks the report holds with their reasons, so the real writer's file is exercised.
    recipe = _command_recipe(tmp_path, ("waitcheck", "memcheck"))
    for dry_run in (False, True):
        run_dir, checks = run_sanitizer_recipe(recipe, tmp_path / f"out{dry_run}",
                                               dry_run=dry_run, env={"PATH": ""})
        path = run_dir / recipe.report_name
        report = read_sanitizer_report(path)
        assert json_bytes(report.to_json()) == path.read_bytes()
        assert report.checks == tuple(checks) and report.dry_run is dry_run
        assert report.overall_verdict == "not_checked" and report.argv == recipe.argv


# -- properties ----------------------------------------------------------------------------

def test_a_key_a_newer_writer_added_is_kept_at_each_level() -> None:
    f = Finding("race", "m", 3).to_json()
    c = CheckResult("racecheck", "ran", "fail", first=Finding("race", "m", 3)).to_json()
    doc = SanitizerReport("T", "r.yaml", "t", "command", ("a",), False, "fail").to_json()
    doc = {**doc, "checks": [{**c, "first": {**f, "lane": 4}, "hazards": [1]}], "host": "n1"}
    report = SanitizerReport.from_dict(doc)
    assert report.extra == {"host": "n1"} and report.checks[0].extra == {"hazards": [1]}
    assert report.checks[0].first is not None and report.checks[0].first.extra == {"lane": 4}
    assert report.to_json() == doc and list(report.to_json())[-1] == "host"


# -- damage ----------------------------------------------------------------------------------

def _written() -> dict[str, Any]:
    report = SanitizerReport(
        "T", "r.yaml", "t", "command", ("a",), False, "fail",
        checks=(CheckResult("memcheck", "ran", "fail", "1 error", errors=1, warnings=None,
                            first=Finding("invalid_global_write", "Invalid", 2, kernel="k"),
                            exit_code=86, log="memcheck.log", argv=("cs",), seconds=0.5),))
    return report.to_json()


DAMAGED: list[tuple[str, Any, str]] = [
    ("schema", "aorta-tui.sanitizer_report/2", "schema: 'aorta-tui.sanitizer_report/2' is not"),
    ("ticket", 7, "ticket: expected a string"),
    ("argv", "a b", "argv: expected an array"),
    ("dry_run", "no", "dry_run: expected true or false"),
    ("checks", {}, "checks: expected an array"),
    ("checks.0.errors", "1", r"checks\[0\].errors: expected an integer"),
    ("checks.0.seconds", "fast", r"checks\[0\].seconds: expected a finite number"),
    ("checks.0.first.log_line", None, r"checks\[0\].first.log_line: expected an integer"),
    ("checks.0.first.kernel", 3, r"checks\[0\].first.kernel: expected a string"),
    ("checks.0.argv", None, r"checks\[0\].argv: expected an array"),
    ("checks.0", "memcheck", r"checks\[0\]: expected an object"),
    ("-checks.0.verdict", None, r"checks\[0\].verdict: missing"),
    ("-overall_verdict", None, "overall_verdict: missing"),
    ("-checks.0.first", None, r"checks\[0\].first: missing"),
]


def _damage(doc: dict[str, Any], path: str, value: object) -> None:
    drop = path.startswith("-")
    *parents, last = path.lstrip("-").split(".")
    node: Any = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    key_: Any = int(last) if isinstance(node, list) else last
    if drop:
        del node[key_]
    else:
        node[key_] = value


@pytest.mark.parametrize(("path", "value", "message"), DAMAGED,
                         ids=[f"{p}={v!r}" for p, v, _m in DAMAGED])
def test_a_damaged_report_names_the_file_and_the_field(
        tmp_path: Path, path: str, value: object, message: str) -> None:
    doc = _written()
    _damage(doc, path, value)
    file = tmp_path / "sanitizer_report.json"
    file.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=f"^{file}: {message}") as caught:
        read_sanitizer_report(file)
    assert caught.value.exit_code == ExitCode.USAGE and caught.value.hint


@pytest.mark.parametrize("text", ["[]", "3", "{", ""])
def test_a_report_that_is_no_object_names_the_file(tmp_path: Path, text: str) -> None:
    file = tmp_path / "sanitizer_report.json"
    file.write_text(text)
    with pytest.raises(UsageError, match=f"^{file}") as caught:
        read_sanitizer_report(file)
    assert caught.value.exit_code == ExitCode.USAGE


def test_an_oversize_report_is_refused_before_it_is_read(tmp_path: Path) -> None:
    file = tmp_path / "sanitizer_report.json"
    with file.open("wb") as fh:
        fh.truncate(INPUT_LIMITS["sanitizer report"] + 1)  # sparse: nothing to read
    with pytest.raises(UsageError, match="limit") as caught:
        read_sanitizer_report(file)
    assert str(file) in caught.value.message and caught.value.exit_code == ExitCode.USAGE
