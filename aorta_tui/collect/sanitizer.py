"""``mode: sanitizer`` recipes: upstream AORTA's schema, run under CUDA's compute-sanitizer here.

Upstream (``amd-aorta`` 0.3.0, ``aorta.instrumentation.rocjitsu_sanitizers``) loads a
``mode: sanitizer`` recipe with its own strict loader (top-level keys ``schema_version``,
``mode``, ``ticket``, ``description``, ``sanitizer_plan``) and runs ROCm RocJITsu's
``waitcheck`` (``rj_waitcheck``, a static s_waitcnt scan of code objects) and ``consan`` (a
DBI hook around a targeted repro). This module reads the same schema with the same refusals
(deferred source kinds ``workload``/``model``/``module``, ``on_missing_backend`` other than
``fail``, a non-positive ``timeout_seconds``, unknown keys) and adds, as an extension:

* ``source.kind: command`` with ``argv: [...]``: a program run as the trial;
* CUDA's compute-sanitizer tools in ``sanitizers``: ``memcheck``, ``racecheck``,
  ``synccheck``, ``initcheck``. Each runs the command under
  ``compute-sanitizer --tool T`` and its report is classified into a typed verdict with the
  first error located (kind, kernel, source line, thread/block, the report's line).

A check whose tool is not on this machine (``rj_waitcheck``, the ConSan hook, a missing
``compute-sanitizer``) is ``not_checked`` with ``not available: <reason>``; the run then exits 3
(environment), never a silent pass. The report (``sanitizer_report.json``) is written
atomically in ``<output>/<ticket>/<run-id>/`` beside each tool's log.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from aorta_tui.collect.sanitizer_report import CheckResult, Finding, SanitizerReport
from aorta_tui.core import spawn_gate
from aorta_tui.core.atomic import atomic_write_json
from aorta_tui.core.errors import ExitCode
from aorta_tui.recipe.checks import RecipeIssue, RecipeValidationError, Validator
from aorta_tui.recipe.loader import LoadProblem, Marks, parse_yaml_text, read_recipe_file

TOP_LEVEL = frozenset({"schema_version", "mode", "ticket", "description", "sanitizer_plan"})
PLAN_KEYS = frozenset({"target", "source", "scope", "selection", "sanitizers", "policy",
                       "output", "provisioning"})
# upstream's RocJITsu sanitizers, and what each needs that aorta-tui does not drive
ROCM_SANITIZERS: dict[str, str] = {
    "waitcheck": "RocJITsu's rj_waitcheck (ROCm only; $ROCJITSU_PREBUILT/bin or "
                 "$ROCJITSU_BUILD/tools); aorta-tui does not drive it",
    "consan": "RocJITsu's ConSan DBI hook around a ROCm repro (ROCm only); aorta-tui does not "
              "drive it",
}
CUDA_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
SANITIZERS = (*ROCM_SANITIZERS, *CUDA_TOOLS)
UPSTREAM_SOURCE_KINDS = frozenset({"gemm_csv", "dispatch_csv", "rocprof_trace", "consan_repro",
                                   "kernel_list", "kernel"})
DEFERRED_SOURCE_KINDS = frozenset({"workload", "model", "module"})  # upstream: not supported yet
SOURCE_KINDS = UPSTREAM_SOURCE_KINDS | {"command"}
KERNEL_FIELDS = frozenset({"name", "code_object", "code_object_sha256", "code_object_index",
                           "entry_offset"})
SOURCE_FIELDS: dict[str, frozenset[str]] = {
    "gemm_csv": frozenset({"path", "isa_dir"}),
    "dispatch_csv": frozenset({"path", "isa_dir"}),
    "rocprof_trace": frozenset({"path", "isa_dir"}),
    "consan_repro": frozenset({"hip", "variant", "command", "isa_dir"}),
    "kernel_list": frozenset({"kernels", "isa_dir", "consan_command"}),
    "kernel": frozenset({"kernel", "isa_dir", "consan_command"}),
    "command": frozenset({"argv"}),
}
DEFAULT_TIMEOUT_S = 900.0  # upstream's default per sanitizer subprocess
ERROR_EXITCODE = 86  # compute-sanitizer's exit when it found errors (--error-exitcode)
MAX_LOG_BYTES = 8 << 20  # a report is read up to this size (a runaway log must not eat memory)


@dataclass(frozen=True)
class SanitizerRecipe:
    ticket: str
    target: str
    source_kind: str
    sanitizers: tuple[str, ...]
    argv: tuple[str, ...] | None = None  # source kind `command`
    description: str = ""
    consan_policy: str = "strict"
    on_missing_backend: str = "fail"
    timeout_s: float = DEFAULT_TIMEOUT_S
    report_name: str = "sanitizer_report.json"
    source_label: str = "<recipe>"
    source_path: Path | None = None


# -- loading ----------------------------------------------------------------------------------

def peek_mode(path: Path) -> str | None:
    """The recipe file's ``mode`` (None when it cannot be read: the normal loader says why)."""
    try:
        data, _ = parse_yaml_text(read_recipe_file(path))
    except LoadProblem:
        return None
    return data.get("mode") if isinstance(data, dict) and isinstance(data.get("mode"), str) \
        else None


class _Checker:
    def __init__(self, marks: Marks) -> None:
        # problems are recorded by the recipe validator (its positions, clipping and cap)
        self._v = Validator(marks, "", None)
        self.issues: list[RecipeIssue] = self._v.issues

    def bad(self, path: str, message: str, hint: str | None = None, *, key: bool = False) -> None:
        self._v.issue(path, message, hint, key=key)

    def mapping(self, path: str, value: object, allowed: frozenset[str] | None = None,
                *, required: bool = True) -> dict[str, Any] | None:
        if value is None and not required:
            return {}
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            self.bad(path, f"{path} must be a mapping", f"write `{path.rsplit('.', 1)[-1]}:` "
                     "followed by indented keys (every key: docs/recipes.md, \"Sanitizer "
                     "recipes\"; an example: recipes/examples/sanitizer.yaml)")
            return None
        if allowed is not None:
            for k in value:
                if k not in allowed:
                    self.bad(f"{path}.{k}" if path else k, f"unknown key {k!r} in "
                             f"{path or 'a sanitizer recipe'}", _near(k, allowed), key=True)
        return value

    def text(self, block: Mapping[str, Any], path: str, key: str) -> str | None:
        value = block.get(key)
        if not isinstance(value, str) or not value.strip():
            where = f"{path}.{key}" if path else key
            self.bad(where, f"{where} must be a non-empty string",
                     f"add `{key}: ...` under {path or 'the recipe'}")
            return None
        return value.strip()


def _near(word: str, choices: Sequence[str] | frozenset[str]) -> str:
    from aorta_tui.core.suggest import did_you_mean

    return did_you_mean(word, choices) + f"known: {', '.join(sorted(choices))}"


def load_sanitizer_recipe(path: str | Path) -> SanitizerRecipe:
    """Read and check a ``mode: sanitizer`` recipe; every problem located (exit 2)."""
    p = Path(path)
    try:
        data, marks = parse_yaml_text(read_recipe_file(p))
    except LoadProblem as exc:
        raise RecipeValidationError([RecipeIssue(exc.line, exc.column, exc.path, exc.message,
                                                 exc.hint)], str(p)) from None
    c = _Checker(marks)
    recipe = _build(c, data, p)
    if c.issues or recipe is None:
        raise RecipeValidationError(c.issues or [RecipeIssue(1, 1, "", "invalid recipe")], str(p))
    return recipe


def _build(c: _Checker, data: object, path: Path) -> SanitizerRecipe | None:
    root = c.mapping("", data, TOP_LEVEL)
    if root is None:
        return None
    if root.get("mode") != "sanitizer":
        c.bad("mode", "mode must be 'sanitizer'", "write `mode: sanitizer`")
    version = root.get("schema_version")
    if version != 1 or isinstance(version, bool):
        c.bad("schema_version", f"schema_version must be 1, got {version!r}",
              "write `schema_version: 1`")
    ticket = c.text(root, "", "ticket") if "ticket" in root else path.stem
    plan = c.mapping("sanitizer_plan", root.get("sanitizer_plan"), PLAN_KEYS)
    if plan is None:
        return None
    target = c.text(plan, "sanitizer_plan", "target")
    source = c.mapping("sanitizer_plan.source", plan.get("source"))
    if source is None:
        return None
    kind = _source_kind(c, source)
    if kind is None:
        return None
    argv = _source(c, kind, source, path)
    upstream_kind = kind != "command"
    _scope_and_selection(c, plan, required=upstream_kind)
    sanitizers = _sanitizers(c, plan.get("sanitizers"))
    consan_policy, timeout = _policy(c, plan, required=upstream_kind)
    report = _report_name(c, plan, required=upstream_kind)
    if c.issues or target is None or ticket is None or sanitizers is None:
        return None
    return SanitizerRecipe(
        ticket=ticket, target=target, source_kind=kind, sanitizers=sanitizers, argv=argv,
        description=str(root.get("description") or "").strip(),
        consan_policy=consan_policy or "strict", on_missing_backend="fail", timeout_s=timeout,
        report_name=report or "sanitizer_report.json", source_label=str(path), source_path=path)


def _source_kind(c: _Checker, source: dict[str, Any]) -> str | None:
    """``source.kind`` once it is one this module runs (its keys checked too), else None."""
    kind = c.text(source, "sanitizer_plan.source", "kind")
    if kind is None:
        return None
    if kind in DEFERRED_SOURCE_KINDS:
        c.bad("sanitizer_plan.source.kind", f"sanitizer_plan.source.kind={kind!r} is not "
              "supported yet (upstream refuses it too)",
              "use `kind: command` with `argv: [...]` to run a program (a workload: "
              "`argv: [python, -m, aorta_tui, run, --workload, NAME]`)")
        return None
    if kind not in SOURCE_KINDS:
        c.bad("sanitizer_plan.source.kind", f"unsupported sanitizer_plan.source.kind={kind!r}",
              _near(kind, SOURCE_KINDS))
        return None
    c.mapping("sanitizer_plan.source", source, SOURCE_FIELDS[kind] | {"kind", "consan_log"})
    if "consan_log" in source and not isinstance(source["consan_log"], bool):
        c.bad("sanitizer_plan.source.consan_log", "sanitizer_plan.source.consan_log must be a "
              "boolean", "write true or false")
    return kind


def _policy(c: _Checker, plan: dict[str, Any], *, required: bool) -> tuple[str | None, float]:
    """(consan_policy, timeout_seconds) of ``sanitizer_plan.policy``; upstream's source kinds
    must spell the policy out (as upstream), ``command`` takes the defaults."""
    policy = c.mapping("sanitizer_plan.policy", plan.get("policy"),
                       frozenset({"consan_policy", "on_missing_backend", "timeout_seconds"}),
                       required=required) or {}
    consan_policy = (c.text(policy, "sanitizer_plan.policy", "consan_policy")
                     if required or "consan_policy" in policy else "strict")
    if consan_policy is not None and consan_policy not in ("strict", "lenient"):
        c.bad("sanitizer_plan.policy.consan_policy", f"unsupported consan_policy "
              f"{consan_policy!r}", "write strict or lenient")
    missing = (c.text(policy, "sanitizer_plan.policy", "on_missing_backend")
               if required or "on_missing_backend" in policy else "fail")
    if missing is not None and missing != "fail":
        c.bad("sanitizer_plan.policy.on_missing_backend", f"unsupported on_missing_backend "
              f"{missing!r}: a missing backend always fails closed (upstream too)",
              "write `on_missing_backend: fail`")
    return consan_policy, _timeout(c, policy)


def _report_name(c: _Checker, plan: dict[str, Any], *, required: bool) -> str | None:
    """``sanitizer_plan.output.report``: a plain file name in the run directory."""
    output = c.mapping("sanitizer_plan.output", plan.get("output"), frozenset({"report"}),
                       required=required) or {}
    report = (c.text(output, "sanitizer_plan.output", "report")
              if required or "report" in output else "sanitizer_report.json")
    if report is not None and (report in (".", "..") or "/" in report or "\x00" in report):
        c.bad("sanitizer_plan.output.report", f"output.report {report!r} must be a file name",
              "write a plain name such as sanitizer_report.json (it goes in the run directory)")
    return report


def _source(c: _Checker, kind: str, source: dict[str, Any], path: Path) -> tuple[str, ...] | None:
    where = "sanitizer_plan.source"
    if kind in ("gemm_csv", "dispatch_csv", "rocprof_trace"):
        c.text(source, where, "path")
        if kind == "gemm_csv" and "isa_dir" not in source:
            c.bad(where, "sanitizer_plan.source.isa_dir is required for gemm_csv",
                  "add `isa_dir: DIR` (the ISA dumps of the GEMM kernels)")
    elif kind == "consan_repro":
        c.text(source, where, "hip")
        c.text(source, where, "variant")
        if "command" in source:
            c.text(source, where, "command")
    elif kind == "kernel_list":
        kernels = source.get("kernels")
        if not isinstance(kernels, list) or not kernels:
            c.bad(f"{where}.kernels", "sanitizer_plan.source.kernels must be a non-empty list",
                  "list kernel names or {name, code_object, ...} entries")
        else:
            for i, k in enumerate(kernels):
                _kernel(c, f"{where}.kernels[{i}]", k)
    elif kind == "kernel":
        _kernel(c, f"{where}.kernel", source.get("kernel"), allow_str=False)
    elif kind == "command":
        argv = source.get("argv")
        if not isinstance(argv, list) or not argv or not all(
                isinstance(a, str) and a and "\x00" not in a for a in argv):
            c.bad(f"{where}.argv", "sanitizer_plan.source.argv must be a non-empty list of "
                  "non-empty strings", "write `argv: [./my_program, --flag]` (no shell)")
            return None
        first = argv[0]
        if "/" in first and not os.path.isabs(first):
            first = str((path.parent / first).resolve())  # relative to the recipe, as upstream
        return (first, *argv[1:])
    return None


def _kernel(c: _Checker, path: str, entry: object, *, allow_str: bool = True) -> None:
    if allow_str and isinstance(entry, str):
        if not entry.strip():
            c.bad(path, f"{path} must be a non-empty kernel name")
        return
    spec = c.mapping(path, entry, KERNEL_FIELDS)
    if spec is None:
        return
    c.text(spec, path, "name")
    for key in ("code_object_index", "entry_offset"):
        value = spec.get(key)
        if value is None:
            continue
        try:
            ok = not isinstance(value, bool) and int(str(value).strip(), 0) >= 0
        except ValueError:
            ok = False
        if not ok:
            c.bad(f"{path}.{key}", f"{path}.{key} must be a non-negative integer "
                  "(decimal or 0x hex)")


def _scope_and_selection(c: _Checker, plan: dict[str, Any], *, required: bool) -> None:
    scope = c.mapping("sanitizer_plan.scope", plan.get("scope"), required=required)
    if scope:
        kind = c.text(scope, "sanitizer_plan.scope", "kind")
        allowed = ("kernel",) if required else ("kernel", "process")
        if kind is not None and kind not in allowed:
            c.bad("sanitizer_plan.scope.kind", f"unsupported sanitizer_plan.scope.kind={kind!r}",
                  f"write one of: {', '.join(allowed)}")
    selection = c.mapping("sanitizer_plan.selection", plan.get("selection"),
                          frozenset({"requirement", "top_n"}), required=required)
    if selection:
        req = c.text(selection, "sanitizer_plan.selection", "requirement")
        if req is not None and req not in ("top_time", "top_dispatch_count"):
            c.bad("sanitizer_plan.selection.requirement", f"unsupported selection.requirement="
                  f"{req!r}", "write top_time or top_dispatch_count")
        top = selection.get("top_n")
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            c.bad("sanitizer_plan.selection.top_n", "sanitizer_plan.selection.top_n must be a "
                  "positive integer", "write `top_n: 1`")


def _sanitizers(c: _Checker, raw: object) -> tuple[str, ...] | None:
    if not isinstance(raw, list) or not raw:
        c.bad("sanitizer_plan.sanitizers", "sanitizer_plan.sanitizers must be a non-empty list",
              f"list some of: {', '.join(SANITIZERS)}")
        return None
    names = tuple(dict.fromkeys(str(x) for x in raw))
    for i, name in enumerate(names):
        if name not in SANITIZERS:
            c.bad(f"sanitizer_plan.sanitizers[{i}]", f"unsupported sanitizer {name!r}",
                  _near(name, SANITIZERS))
    return names


def _timeout(c: _Checker, policy: dict[str, Any]) -> float:
    if "timeout_seconds" not in policy:
        return DEFAULT_TIMEOUT_S
    value = policy["timeout_seconds"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
            or value != value or value == float("inf"):
        c.bad("sanitizer_plan.policy.timeout_seconds", "sanitizer_plan.policy.timeout_seconds "
              "must be a positive number", "write e.g. `timeout_seconds: 600`")
        return DEFAULT_TIMEOUT_S
    return float(value)


# -- the report of compute-sanitizer ----------------------------------------------------------

# Finding and CheckResult, the report's parts, are collect/sanitizer_report.py's (re-exported).

class _RunFacts(TypedDict):
    """The fields of a ``CheckResult`` that every finished or failed run of a tool has."""

    log: str
    argv: tuple[str, ...]
    seconds: float
    exit_code: int | None


_PREFIX = re.compile(r"^=+ ?")
_HEADERS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(r"^Invalid (?:__(?P<space>\w+?)__ )?(?P<access>read|write|atomic)\b[^\n]*"),
     None),
    (re.compile(r"^Uninitialized __\w+__ memory read\b"), "uninitialized_read"),
    (re.compile(r"^(?:ERROR|Error|WARN|Warning|WARNING): Race reported between\b"), "race"),
    (re.compile(r"^(?:ERROR|Error): (?:Potential )?(?:RAW|WAR|WAW) hazard detected"), "race"),
    (re.compile(r"^Barrier error detected\b"), "barrier_error"),
    (re.compile(r"^(?:Divergent thread\(s\) in (?:warp|block)|Invalid arguments? to "
                r"(?:__syncwarp|__syncthreads|bar\.sync))"), "barrier_error"),
    (re.compile(r"^Program hit (?P<api>cuda\w+|CUDA_ERROR_\w+) \(error \d+\)"), "api_error"),
    (re.compile(r"^Leaked \d+ bytes\b"), "leak"),
    (re.compile(r"^(?:Malloc/Free|Misaligned|Out-of-range|Illegal|Hardware Exception|"
                r"Unspecified Launch Failure|Invalid PC)\b"), "device_error"),
)
_AT = re.compile(r"^\s+at (?P<where>.+?)(?: in (?P<file>\S+?:\d+))?\s*$")
_AT_ADDR = re.compile(r"^\s+at 0x[0-9a-f]+ in (?P<kernel>.+?)\s*$")
_BY = re.compile(r"^\s+by thread (?P<thread>\([\d, ]+\)) in block (?P<block>\([\d, ]+\))")
_ADDRESS = re.compile(r"^\s+Address (?P<addr>0x[0-9a-fA-F]+)")
_ERROR_SUMMARY = re.compile(r"^ERROR SUMMARY: (?P<n>\d+) errors?")
_RACE_SUMMARY = re.compile(r"^RACECHECK SUMMARY: \d+ hazards? displayed \((?P<n>\d+) errors?, "
                           r"(?P<w>\d+) warnings?\)")
_TOOL_ERROR = re.compile(r"^(?:Internal Sanitizer Error|Error: (?!Race|Potential|RAW|WAR|WAW)"
                         r"(?P<why>.+)|No CUDA-capable device|Device not supported)")


def _header_kind(body: str) -> str | None:
    for rx, kind in _HEADERS:
        m = rx.match(body)
        if m:
            if kind is None:
                space = (m.group("space") or "generic").lower()
                return f"invalid_{space}_{m.group('access')}"
            return kind
    return None


@dataclass
class ParsedReport:
    findings: list[Finding] = field(default_factory=list)
    errors: int | None = None  # from the summary line; None when there was none
    warnings: int | None = None
    tool_error: str | None = None  # the sanitizer's own failure line


def parse_report(text: str) -> ParsedReport:
    """Read compute-sanitizer's report (its ``=====``-prefixed lines; other lines are the
    program's). Never raises: unknown lines are skipped."""
    out = ParsedReport()
    current: dict[str, Any] | None = None

    def close() -> None:
        nonlocal current
        if current is not None:
            out.findings.append(Finding(**current))
            current = None

    for n, raw in enumerate(text.splitlines(), start=1):
        m = _PREFIX.match(raw)
        if not m or not raw.startswith("="):
            continue
        body = raw[m.end():].rstrip()
        if not body.strip():
            continue
        if not body[0].isspace():  # a header line: a new error, a summary or a notice
            kind = _header_kind(body)
            if kind is not None:
                close()
                current = {"kind": kind, "message": body[:500], "log_line": n}
                _located_header(current, body)
                continue
            close()
            s = _ERROR_SUMMARY.match(body)
            if s:
                out.errors = int(s.group("n"))
                continue
            s = _RACE_SUMMARY.match(body)
            if s:
                out.errors, out.warnings = int(s.group("n")), int(s.group("w"))
                continue
            if _TOOL_ERROR.match(body) and out.tool_error is None:
                out.tool_error = f"line {n}: {body[:300]}"
            continue
        if current is None:
            continue
        _detail(current, body)
    close()
    return out


# racecheck names the first access on its header line: "... Write access at K+0x30 in F:7"
_HEADER_AT = re.compile(r" access at (?P<kernel>.+?)(?:\+0x[0-9a-f]+)? in (?P<file>\S+?:\d+)")


def _located_header(current: dict[str, Any], body: str) -> None:
    m = _HEADER_AT.search(body)
    if m:
        current["kernel"], current["source"] = m.group("kernel")[:200], m.group("file")[:300]


def _detail(current: dict[str, Any], body: str) -> None:
    m = _AT_ADDR.match(body)
    if m and current.get("kernel") is None:
        current["kernel"] = m.group("kernel")[:200]
        return
    m = _AT.match(body)
    if m and current.get("kernel") is None:
        where = m.group("where")
        current["kernel"] = re.sub(r"\+0x[0-9a-f]+$", "", where)[:200]
        if m.group("file"):
            current["source"] = m.group("file")[:300]
        return
    m = _BY.match(body)
    if m and current.get("thread") is None:
        current["thread"], current["block"] = m.group("thread"), m.group("block")
        return
    m = _ADDRESS.match(body)
    if m and current.get("address") is None:
        current["address"] = m.group("addr")


def verdict_of(tool: str, parsed: ParsedReport, exit_code: int | None) -> tuple[str, str, str]:
    """(state, verdict, reason) of one compute-sanitizer run."""
    if parsed.findings:
        f = parsed.findings[0]
        warn_only = tool == "racecheck" and not parsed.errors and parsed.warnings and all(
            re.match(r"^(?:WARN|Warning|WARNING):", x.message) for x in parsed.findings)
        where = " ".join(x for x in (f"in {f.kernel}" if f.kernel else "",
                                     f"at {f.source}" if f.source else "",
                                     f"thread {f.thread} block {f.block}" if f.thread else "")
                         if x)
        reason = (f"{parsed.errors if parsed.errors is not None else len(parsed.findings)} "
                  f"error(s); first (log line {f.log_line}): {f.message}"
                  + (f" {where}" if where else ""))
        return "ran", "warn" if warn_only else "fail", reason
    if parsed.errors is None:
        why = parsed.tool_error or f"no summary line in its log (exit code {exit_code})"
        return "error", "error", f"{tool} did not finish its report: {why}"
    if parsed.errors:
        return "ran", "fail", f"{parsed.errors} error(s) in the summary (none itemised)"
    if exit_code not in (0, None):
        return "ran", "error", (f"the program exited {exit_code}; {tool} found no error, so "
                                "the trial failed for another reason (see its log)")
    if parsed.warnings:
        return "ran", "warn", f"0 errors, {parsed.warnings} warning(s)"
    return "ran", "pass", "0 errors"


# -- running ----------------------------------------------------------------------------------

def find_compute_sanitizer(env: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """(path, '') or (None, why not): PATH, then $CUDA_HOME/bin, then /usr/local/cuda/bin."""
    env = os.environ if env is None else env
    hit = shutil.which("compute-sanitizer", path=env.get("PATH", os.defpath))
    if hit:
        return hit, ""
    tried = []
    for root in (env.get("CUDA_HOME"), env.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            cand = Path(root) / "bin" / "compute-sanitizer"
            tried.append(str(cand))
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand), ""
    return None, ("compute-sanitizer is not on PATH nor in " + ", ".join(tried)
                  + " (it ships with the CUDA toolkit: install cuda-toolkit or set CUDA_HOME)")


def sanitizer_argv(tool_path: str, tool: str, log: Path, argv: Sequence[str]) -> list[str]:
    """The exact argv (no shell): every process the program starts is sanitized too."""
    return [tool_path, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE),
            "--print-limit", "100", "--target-processes", "all", "--log-file", str(log),
            "--", *argv]


def _run(argv: list[str], out: Path, timeout_s: float) -> tuple[int | None, bool, str | None]:
    """(exit code, timed out, launch error); the program's output goes to ``out``."""
    with open(out, "wb") as fh:
        try:
            proc = spawn_gate.popen(argv, stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            return None, False, f"{type(exc).__name__}: {exc.strerror or exc}"
        try:
            return proc.wait(timeout=timeout_s), False, None
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return None, True, None
        except BaseException:  # Ctrl-C: the sanitized program must not outlive us
            _kill_group(proc)
            raise


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue


def _read_log(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_LOG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_cuda_tool(recipe: SanitizerRecipe, tool: str, run_dir: Path,
                  env: Mapping[str, str] | None = None) -> CheckResult:
    if recipe.argv is None:
        return CheckResult(tool, "not_checked", "not_checked",
                           f"not available: {tool} runs a program; source kind "
                           f"{recipe.source_kind!r} names kernels/code objects, not a program "
                           "(use `kind: command` with `argv`)")
    path, why = find_compute_sanitizer(env)
    if path is None:
        return CheckResult(tool, "not_checked", "not_checked", f"not available: {why}")
    log = run_dir / f"{tool}.log"
    out = run_dir / f"{tool}.program.log"
    argv = sanitizer_argv(path, tool, log, recipe.argv)
    start = time.monotonic()
    code, timed_out, launch = _run(argv, out, recipe.timeout_s)
    seconds = round(time.monotonic() - start, 3)
    common: _RunFacts = {"log": log.name, "argv": tuple(argv), "seconds": seconds,
                         "exit_code": code}
    if launch is not None:
        return CheckResult(tool, "error", "error", f"cannot start {path}: {launch}", **common)
    if timed_out:
        return CheckResult(tool, "timed_out", "error", f"{tool} ran past timeout_seconds="
                           f"{recipe.timeout_s:g}; killed", **common)
    parsed = parse_report(_read_log(log) or _read_log(out))
    state, verdict, reason = verdict_of(tool, parsed, None if code == ERROR_EXITCODE else code)
    return CheckResult(tool, state, verdict, reason, errors=parsed.errors,
                       warnings=parsed.warnings,
                       first=parsed.findings[0] if parsed.findings else None, **common)


def rocm_check(name: str, env: Mapping[str, str] | None = None) -> CheckResult:
    env = os.environ if env is None else env
    found = ""
    if name == "waitcheck":
        for root, sub in (("ROCJITSU_PREBUILT", "bin"), ("ROCJITSU_BUILD", "tools")):
            cand = Path(env.get(root) or "/nonexistent") / sub / "rj_waitcheck"
            if env.get(root) and cand.is_file():
                found = f" (found {cand}, but its driver is not implemented here)"
    return CheckResult(name, "not_checked", "not_checked",
                       f"not available: {ROCM_SANITIZERS[name]}{found}")


def overall(checks: Sequence[CheckResult]) -> str:
    verdicts = {c.verdict for c in checks}
    for v in ("fail", "error", "not_checked", "warn"):
        if v in verdicts:
            return v
    return "pass"


def exit_code_of(checks: Sequence[CheckResult]) -> ExitCode:
    """fail/error: 1 (found something, or the trial broke); only not-available checks: 3."""
    v = overall(checks)
    if v in ("fail", "error"):
        return ExitCode.FAILURES
    if v == "not_checked":
        return ExitCode.ENVIRONMENT
    return ExitCode.OK


def sanitizer_report(recipe: SanitizerRecipe, checks: Sequence[CheckResult], *,
                     dry_run: bool) -> SanitizerReport:
    """The report of ``recipe``'s run so far (``checks``: those that finished)."""
    return SanitizerReport(
        ticket=recipe.ticket, recipe=recipe.source_label, target=recipe.target,
        source_kind=recipe.source_kind, argv=tuple(recipe.argv or ()), dry_run=dry_run,
        overall_verdict=overall(checks), checks=tuple(checks))


def plan_summary(recipe: SanitizerRecipe, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What ``sweep run`` would do with ``recipe`` (for ``recipe validate``): per check, the
    argv it would run (``RUN_DIR`` stands for the run directory), or why it cannot run here."""
    tool, why = find_compute_sanitizer(env)
    checks: list[dict[str, object]] = []
    for name in recipe.sanitizers:
        if name in ROCM_SANITIZERS:
            checks.append({"sanitizer": name, "runs": None,
                           "reason": rocm_check(name, env).reason})
        elif recipe.argv is None:
            checks.append({"sanitizer": name, "runs": None, "reason": (
                f"not available: source kind {recipe.source_kind!r} is upstream's ROCm input; "
                "the CUDA tools run a `source: {kind: command, argv: [...]}` program")})
        else:
            argv = sanitizer_argv(tool or "compute-sanitizer", name, Path("RUN_DIR") / f"{name}.log",
                                  recipe.argv)
            checks.append({"sanitizer": name, "runs": argv,
                           "reason": "" if tool else f"not available: {why}"})
    return {"file": recipe.source_label, "mode": "sanitizer", "ticket": recipe.ticket,
            "target": recipe.target, "source_kind": recipe.source_kind,
            "argv": list(recipe.argv or ()), "timeout_s": recipe.timeout_s,
            "report": recipe.report_name, "checks": checks}


def plan_lines(summary: Mapping[str, Any]) -> list[str]:
    out = [f"{summary['file']}: valid recipe (mode sanitizer, upstream's sanitizer schema)",
           f"  ticket {summary['ticket']}, target {summary['target']}, source "
           f"{summary['source_kind']}, timeout {summary['timeout_s']:g} s per check",
           f"  report RUN_DIR/{summary['report']}; run it with `aorta-tui sweep run --recipe "
           f"{summary['file']}`"]
    for c in summary["checks"]:
        how = shlex.join(c["runs"]) if c["runs"] else "-"
        out.append(f"  {c['sanitizer']}: {how}" + (f"\n    {c['reason']}" if c["reason"] else ""))
    return out


def run_sanitizer_recipe(recipe: SanitizerRecipe, output: Path, *, dry_run: bool = False,
                         env: Mapping[str, str] | None = None
                         ) -> tuple[Path, list[CheckResult]]:
    """Run every check of ``recipe`` in a new ``<output>/<ticket>/<run-id>/``; the report is
    rewritten (atomically) after each check, so an interrupted run says how far it got."""
    from aorta_tui.store.run_create import create_run_dir

    def populate(d: Path) -> None:
        atomic_write_json(d / recipe.report_name,
                          sanitizer_report(recipe, [], dry_run=dry_run).to_json())

    run_dir = create_run_dir(output, recipe.ticket, populate)
    checks: list[CheckResult] = []
    for name in recipe.sanitizers:
        if dry_run:
            checks.append(CheckResult(name, "not_checked", "not_checked", "dry_run"))
        elif name in ROCM_SANITIZERS:
            checks.append(rocm_check(name, env))
        else:
            checks.append(run_cuda_tool(recipe, name, run_dir, env))
        atomic_write_json(run_dir / recipe.report_name,
                          sanitizer_report(recipe, checks, dry_run=dry_run).to_json())
    return run_dir, checks
