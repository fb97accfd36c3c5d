"""``sanitizer_report.json`` as a typed value: a ``mode: sanitizer`` run's checks, each with its
verdict and the first error located (collect/sanitizer.py writes it after every check).

One serializer, :meth:`SanitizerReport.to_json` (the object the untyped writer wrote, key
order included: ``json_bytes`` of it is that writer's bytes), and one reader,
:func:`read_sanitizer_report` / :meth:`SanitizerReport.from_dict`: bounded
(``INPUT_LIMITS["sanitizer report"]``), every field's type checked, a damaged one named with
the file and the field path (UsageError, exit 2). The version is the ``schema`` string, as
today; another one is refused, named. A key this version does not know is kept (``extra``, at
each level), after the known ones, so a report a newer aorta-tui wrote reads back with nothing
lost.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from aorta_tui.collect.doc_fields import opt_integer, opt_text, required, strings
from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json, load_json_input

SCHEMA = "aorta-tui.sanitizer_report/1"
WHAT = "sanitizer report"


@dataclass(frozen=True)
class Finding:
    """One error of a sanitizer report, located in the kernel and in the report itself."""

    kind: str  # invalid_global_write, race, uninitialized_read, barrier_error, api_error, ...
    message: str  # the report's header line, without its ===== prefix
    log_line: int  # 1-based line of that header in the log
    kernel: str | None = None
    source: str | None = None  # FILE:LINE where the report gives it
    thread: str | None = None
    block: str | None = None
    address: str | None = None
    extra: dict[str, Json] = field(default_factory=dict)  # a newer writer's keys

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "message": self.message, "log_line": self.log_line,
                "kernel": self.kernel, "source": self.source, "thread": self.thread,
                "block": self.block, "address": self.address, **self.extra}


@dataclass(frozen=True)
class CheckResult:
    sanitizer: str
    state: str  # ran | not_checked | error | timed_out (upstream's ExecutionState)
    verdict: str  # pass | warn | fail | not_checked | error (upstream's Verdict)
    reason: str = ""
    errors: int | None = None
    warnings: int | None = None
    first: Finding | None = None
    exit_code: int | None = None
    log: str | None = None  # relative to the run directory
    argv: tuple[str, ...] = ()
    seconds: float | None = None
    extra: dict[str, Json] = field(default_factory=dict)  # a newer writer's keys

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    def to_json(self) -> dict[str, Json]:
        """The object the untyped writer wrote (``dataclasses.asdict``, in field order)."""
        return {"sanitizer": self.sanitizer, "state": self.state, "verdict": self.verdict,
                "reason": self.reason, "errors": self.errors, "warnings": self.warnings,
                "first": None if self.first is None else self.first.to_json(),
                "exit_code": self.exit_code, "log": self.log, "argv": list(self.argv),
                "seconds": self.seconds, **self.extra}


@dataclass(frozen=True)
class SanitizerReport:
    """``sanitizer_report.json`` (docs: collect/sanitizer.py)."""

    ticket: str
    recipe: str  # the recipe file it ran
    target: str
    source_kind: str
    argv: tuple[str, ...]  # the program (source kind ``command``); () for upstream's kinds
    dry_run: bool
    overall_verdict: str  # the worst verdict of ``checks`` (collect/sanitizer.py:overall)
    checks: tuple[CheckResult, ...] = ()
    schema: str = SCHEMA
    extra: dict[str, Json] = field(default_factory=dict)  # a newer writer's keys

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    def to_json(self) -> dict[str, Json]:
        return {"schema": self.schema, "ticket": self.ticket, "recipe": self.recipe,
                "target": self.target, "source_kind": self.source_kind,
                "argv": list(self.argv), "dry_run": self.dry_run,
                "overall_verdict": self.overall_verdict,
                "checks": [c.to_json() for c in self.checks], **self.extra}

    @classmethod
    def from_dict(cls, data: object, *, where: str = "sanitizer_report.json") -> SanitizerReport:
        """Read a parsed report; a damaged one is a located UsageError (exit 2)."""
        return _read_report(FieldReader(where, WHAT), data)


def read_sanitizer_report(path: str | os.PathLike[str]) -> SanitizerReport:
    """The report at ``path``, typed: bounded, a damaged one a located UsageError (exit 2)."""
    data = load_json_input(path, what=WHAT, limit=INPUT_LIMITS["sanitizer report"],
                           hint="pass the sanitizer_report.json of a `mode: sanitizer` run")
    return SanitizerReport.from_dict(data, where=os.fspath(path))


# -- the reader ----------------------------------------------------------------------------

_REPORT_KEYS = frozenset(SanitizerReport("", "", "", "", (), False, "").to_json())
_CHECK_KEYS = frozenset(CheckResult("", "", "").to_json())
_FINDING_KEYS = frozenset(Finding("", "", 0).to_json())


def _read_report(f: FieldReader, data: object) -> SanitizerReport:
    d = f.obj(data, "(top level)")
    schema = f.text(d, "schema", "", required=True)
    if schema != SCHEMA:
        # another version's fields may mean other things: refused, named, never half-read
        raise UsageError(f"{f.where}: schema: {schema!r} is not {SCHEMA!r}",
                         hint="read it with the aorta-tui version that wrote it")
    return SanitizerReport(
        schema=schema, ticket=f.text(d, "ticket", "", required=True),
        recipe=f.text(d, "recipe", "", required=True),
        target=f.text(d, "target", "", required=True),
        source_kind=f.text(d, "source_kind", "", required=True),
        argv=strings(f, d, "argv", ""),
        dry_run=f.check(required(f, d, "dry_run", ""), "boolean", "dry_run"),
        overall_verdict=f.text(d, "overall_verdict", "", required=True),
        checks=tuple(_read_check(f, c, f"checks[{i}]")
                     for i, c in enumerate(f.check(required(f, d, "checks", ""), "array",
                                                   "checks"))),
        extra={k: v for k, v in d.items() if k not in _REPORT_KEYS})


def _read_check(f: FieldReader, value: object, path: str) -> CheckResult:
    d = f.obj(value, path)
    first = required(f, d, "first", path)
    return CheckResult(
        sanitizer=f.text(d, "sanitizer", path, required=True),
        state=f.text(d, "state", path, required=True),
        verdict=f.text(d, "verdict", path, required=True),
        reason=f.text(d, "reason", path, required=True),
        errors=opt_integer(f, d, "errors", path), warnings=opt_integer(f, d, "warnings", path),
        first=None if first is None else _read_finding(f, first, f.join(path, "first")),
        exit_code=opt_integer(f, d, "exit_code", path), log=opt_text(f, d, "log", path),
        argv=strings(f, d, "argv", path),
        seconds=f.opt_number(required(f, d, "seconds", path), f.join(path, "seconds")),
        extra={k: v for k, v in d.items() if k not in _CHECK_KEYS})


def _read_finding(f: FieldReader, value: object, path: str) -> Finding:
    d = f.obj(value, path)
    return Finding(
        kind=f.text(d, "kind", path, required=True),
        message=f.text(d, "message", path, required=True),
        log_line=f.integer(d, "log_line", path, required=True),
        kernel=opt_text(f, d, "kernel", path), source=opt_text(f, d, "source", path),
        thread=opt_text(f, d, "thread", path), block=opt_text(f, d, "block", path),
        address=opt_text(f, d, "address", path),
        extra={k: v for k, v in d.items() if k not in _FINDING_KEYS})
