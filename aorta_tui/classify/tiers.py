"""The five tiers and the verdict.

1. process: exec failure, timeout, cancel (errors: no valid observation); signal, core dump,
   non-zero exit (fails). A process we killed (timeout, cancel, hang) is not also blamed for
   the signal we sent it.
2. hang: the worker's :class:`~aorta_tui.trial.hang.HangReport` (fail).
3. kernel/GPU: kernel log events new since the trial started (fail), or one info detection
   saying why the kernel log is not available.
4. built-in log patterns (:mod:`.patterns`) and the workload's own ``result.json`` failures.
5. the recipe's ``custom_patterns``.

Verdict: any ``fail`` detection -> fail; else any ``error`` -> error; else pass. The reason is
the most specific detection of the deciding severity (a CUDA error explains a trial better
than the exit code it caused).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from aorta_tui.classify.dmesg import KERNEL_PATTERNS, KernelEvent
from aorta_tui.classify.linear import LinearMatch, compile_linear, recipe_regex_issue
from aorta_tui.classify.model import (
    SIGNAL_NAMES,
    Classification,
    Detection,
    Outcome,
    Pattern,
    PatternRule,
    Verdict,
)
from aorta_tui.classify.patterns import LOG_PATTERNS
from aorta_tui.classify.placement import PROCESS_CONSEQUENCES, Placement
from aorta_tui.classify.scan import (
    Hit,
    LogOpener,
    Matcher,
    StreamScanner,
    numeric_captures,
    open_log_checked,
    scan_file,
)
from aorta_tui.classify.upstream_ids import expand_disabled, upstream_alias

TIER1_IDS = (
    "exec_failed", "timeout", "cancelled", "killed_by_signal", "core_dumped", "exit_nonzero",
    "exit_unknown",
)  # fmt: skip
TIER2_IDS = ("hang",)
KERNEL_UNAVAILABLE_ID = "kernel_log_unavailable"
REQUIRED_MISSING = "required pattern never matched"
_EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b)(?::.*)?$")
_EXCEPTION_LOOKAHEAD_LINES = 2000
_ALIAS = re.compile(r"__\d+$")

# is_disabled(tier, detector id[, captures]): whether the recipe turned that detector off
IsDisabled = Callable[..., bool]


def builtin_detector_ids() -> dict[str, int]:
    """Every built-in detector id and its tier (for validating ``disable_detectors``)."""
    ids = {i: 1 for i in TIER1_IDS}
    ids.update({i: 2 for i in TIER2_IDS})
    ids.update({i: 2 for i in SIGNAL_NAMES})  # hang signals, disabled one by one
    ids.update({p.id: 3 for p in KERNEL_PATTERNS})
    ids.update({i: 3 for i in ("gpu_ecc_uncorrected", "gpu_ecc_corrected", KERNEL_UNAVAILABLE_ID)})
    ids.update({p.id: 4 for p in LOG_PATTERNS})
    return ids


def is_upstream_detector_id(token: str) -> bool:
    """One of upstream AORTA's 22 detector ids (accepted in ``disable_detectors``)."""
    return upstream_alias(token) is not None


def _disabled_check(disabled: Collection[str]) -> IsDisabled:
    """``is_disabled(tier, id[, captures])``: our ids, tiers, ``tierN:id``, ``custom:id`` and
    upstream's detector ids (``upstream_ids``; ``tier1:sigsegv`` looks at the signal)."""
    return expand_disabled(disabled).is_disabled


def tier1(outcome: Outcome) -> list[Detection]:
    if outcome.exec_error is not None:
        return [Detection(1, "exec_failed", "error", f"the command did not start: {outcome.exec_error}")]
    out: list[Detection] = []
    if outcome.timed_out:
        out.append(Detection(1, "timeout", "error", f"{_timeout_text(outcome)}; {kill_note(outcome)}",
                             captures=_kill_captures(outcome)))  # fmt: skip
    if outcome.cancelled:
        out.append(Detection(1, "cancelled", "error", f"cancelled; {kill_note(outcome)}",
                             captures=_kill_captures(outcome)))  # fmt: skip
    we_killed = outcome.timed_out or outcome.cancelled or outcome.hang is not None
    if we_killed:
        return out
    if outcome.signal is not None:
        name = outcome.signal_name
        out.append(Detection(1, "killed_by_signal", "fail", f"killed by signal {outcome.signal} ({name})",
                             captures={"signal": outcome.signal, "name": name}))  # fmt: skip
        if outcome.core_dumped:
            out.append(Detection(1, "core_dumped", "fail", f"dumped core ({name})"))
    elif outcome.exit_code is None:
        # Someone else reaped the child (a stray os.wait() in the orchestrator): no observation.
        out.append(Detection(1, "exit_unknown", "error", "the exit status of the trial is unknown"))
    elif outcome.exit_code != 0:
        out.append(Detection(1, "exit_nonzero", "fail", f"exited with code {outcome.exit_code}",
                             captures={"exit_code": outcome.exit_code}))  # fmt: skip
    return out


def _timeout_text(outcome: Outcome) -> str:
    """The configured limit and the measured times: the wall time includes the kill grace."""
    if outcome.timeout_s is None:  # a record from before the limit was stored
        return f"timed out after {outcome.wall_s:.1f} s"
    text = f"timed out: still running at its {outcome.timeout_s:g} s limit"
    if outcome.stopped_at_s is not None:
        text += f" (stopped at {outcome.stopped_at_s:.1f} s"
        if outcome.wall_s - outcome.stopped_at_s >= 0.05:
            text += f", gone at {outcome.wall_s:.1f} s"
        text += ")"
    return text


def kill_note(outcome: Outcome) -> str:
    """What ending the trial did, as measured: how many processes, by which means, survivors."""
    how = outcome.containment
    if how is None:  # a record from before containment was recorded
        return "the process tree was signalled"
    n = outcome.killed_count
    text = f"{n} process{'es' if n != 1 else ''} of the trial ended (containment: {how})"
    if outcome.survivors:
        pids = ", ".join(str(p) for p in outcome.survivors[:10])
        text += f"; {len(outcome.survivors)} still running after SIGKILL: pid {pids}"
    elif outcome.survivors is None and how != "process-group":
        text += f"; survivors not known: {outcome.survivors_reason or 'no reason recorded'}"
    if how == "process-group":
        text += "; a process that double-forked and called setsid would not have been seen"
    return text


def _kill_captures(outcome: Outcome) -> dict[str, Any]:
    return {"timeout_s": outcome.timeout_s, "stopped_at_s": outcome.stopped_at_s,
            "wall_s": outcome.wall_s, "containment": outcome.containment,
            "killed": outcome.killed_count,
            "survivors": None if outcome.survivors is None else list(outcome.survivors),
            "survivors_reason": outcome.survivors_reason}


def tier2(outcome: Outcome) -> list[Detection]:
    out: list[Detection] = []
    if outcome.hang is not None:
        out.append(Detection(2, "hang", "fail", outcome.hang.summary(), captures=outcome.hang.to_dict()))
    elif outcome.hang_note:
        out.append(Detection(2, "hang", "info", f"hang detection could not fire: {outcome.hang_note}"))
    return out


def tier3_counters(outcome: Outcome) -> list[Detection]:
    """GPU error counters that grew while the trial ran (vendor tool, read at start and end)."""
    out: list[Detection] = []
    for device, grown in (outcome.gpu_counters_delta or {}).items():
        if grown.get("ecc_uncorrected"):
            n = grown["ecc_uncorrected"]
            out.append(Detection(3, "gpu_ecc_uncorrected", "fail",
                                 f"{n} uncorrectable ECC error(s) on GPU {device} during the trial",
                                 stream="gpu counters", captures={"device": device, "increase": n},
                                 count=n))  # fmt: skip
        if grown.get("ecc_corrected"):
            n = grown["ecc_corrected"]
            out.append(Detection(3, "gpu_ecc_corrected", "info",
                                 f"{n} corrected ECC error(s) on GPU {device} during the trial",
                                 stream="gpu counters", captures={"device": device, "increase": n},
                                 count=n))  # fmt: skip
    return out


def tier3(events: Sequence[KernelEvent], unavailable: str | None) -> list[Detection]:
    if unavailable:
        return [Detection(3, KERNEL_UNAVAILABLE_ID, "info", f"kernel log not available ({unavailable})")]
    described = {p.id: p.description for p in KERNEL_PATTERNS}
    grouped: dict[str, list[KernelEvent]] = {}
    for ev in events:
        grouped.setdefault(ev.tier3_id, []).append(ev)
    out = []
    for det_id, evs in grouped.items():
        first = evs[0]
        message = described.get(det_id, det_id)
        if "xid" in first.captures:
            message += f" {first.captures['xid']}"
        if len(evs) > 1:
            message += f" ({len(evs)} kernel lines)"
        out.append(Detection(3, det_id, "fail", message, first.line[:300], None, "kernel",
                             dict(first.captures), len(evs)))  # fmt: skip
    return out


def _builtin_matcher(pattern: Pattern) -> Matcher:
    def accept(m: re.Match[str]) -> dict[str, Any]:
        # "op__2" fills "op": one capture name across a pattern's alternatives
        return {_ALIAS.sub("", k): v for k, v in m.groupdict().items() if v is not None}

    return Matcher(pattern.id, pattern.regex, accept, pattern.needles)


def _linear_source(rx: re.Pattern[str]) -> str:
    """The pattern text for RE2, with the flags a caller compiled it with spelled inline."""
    flags = "".join(f for bit, f in ((re.IGNORECASE, "i"), (re.DOTALL, "s")) if rx.flags & bit)
    return f"(?{flags}){rx.pattern}" if flags else rx.pattern


def _rule_matcher(rule: PatternRule) -> Matcher | str:
    """The tier-5 matcher of ``rule`` on RE2, or why the pattern cannot run there."""
    source = _linear_source(rule.regex)
    issue = recipe_regex_issue(source)
    if issue is not None:
        return issue[0]
    matcher = Matcher(rule.id, compile_linear(source), lambda m: None)

    def accept(m: re.Match[str] | LinearMatch) -> dict[str, Any] | None:
        captures = numeric_captures(m)
        if rule.condition is None:
            return captures
        try:
            holds = bool(rule.condition(captures))
        except Exception as exc:  # a recipe condition is user code; never let it escape
            if not matcher.notes:
                matcher.notes.append(f"{type(exc).__name__}: {exc} (captures {captures})")
            return None
        return captures if holds else None

    matcher.accept = accept
    return matcher


def _log_files(stdout_path: Path | None, stderr_path: Path | None) -> list[tuple[str, Path]]:
    if stdout_path is not None and stderr_path is not None and stdout_path == stderr_path:
        return [("stdout+stderr", stdout_path)]
    files = []
    if stderr_path is not None:
        files.append(("stderr", stderr_path))
    if stdout_path is not None:
        files.append(("stdout", stdout_path))
    return files


def _exception_line(path: Path, after_line: int, open_log: LogOpener = open_log_checked) -> str | None:
    """The ``SomeError: message`` line that ends a traceback starting at ``after_line``."""
    fh = open_log(path)  # as the scan's: a link, FIFO or device swapped in is no log
    if fh is None:
        return None
    try:
        with fh:
            for i, raw in enumerate(fh, start=1):
                if i <= after_line:
                    continue
                if i > after_line + _EXCEPTION_LOOKAHEAD_LINES:
                    return None
                line = raw[:2000].decode("utf-8", "replace").rstrip("\r\n")
                if _EXCEPTION_LINE.match(line):
                    return line.strip()[:300]
    except OSError:
        return None
    return None


# A streamed recipe pattern with a condition keeps this many matches for the condition, which
# can only be judged once the process has ended (it may read exit_code, walltime_sec, ...).
CONDITION_CANDIDATES = 10_000


def _matchers(rules: Sequence[PatternRule], is_disabled: IsDisabled, *, deferred: bool = False,
              ) -> tuple[list[Matcher], list[Matcher], list[Detection]]:
    """The built-in and recipe matchers, and a detection for each pattern RE2 cannot run.
    ``deferred``: a recipe pattern's condition is not applied while scanning; its first
    ``CONDITION_CANDIDATES`` matches are kept for it instead (``LogScan``)."""
    builtin = [_builtin_matcher(p) for p in LOG_PATTERNS if not is_disabled(4, p.id)]
    custom: list[Matcher] = []
    refused: list[Detection] = []
    for rule in rules:
        if is_disabled(5, rule.id):
            continue
        built = _rule_matcher(rule)
        if isinstance(built, str):  # validation refuses these; a caller of classify may not
            refused.append(Detection(5, rule.id, "error",
                                     f"custom pattern '{rule.id}' was not searched: {built}"))  # fmt: skip
            continue
        if deferred and rule.condition is not None:
            built.accept, built.keep_hits = numeric_captures, CONDITION_CANDIDATES
            built.cap = 1 << 62  # counted to the end: the condition decides later
        custom.append(built)
    return builtin, custom, refused


class LogScan:
    """Tiers 4 and 5 over a trial's whole output, fed by the supervisor as it passes.

    A log file keeps the first and the last part of a long stream (64 MiB in all): scanning
    the file afterwards missed an error printed in between (a CUDA error after 300 MB of
    output got the verdict pass; issue 27 item 16). The supervisor hands each stream's bytes
    to :meth:`feed_for` ``(label)`` (``ProcessSpec.log_scan``); ``classify`` then reads the
    matches from here instead of the files. Built before the process starts: a recipe
    pattern's condition is judged on its kept matches once the process has ended.
    """

    def __init__(self, rules: Sequence[PatternRule], disabled: Collection[str] = ()) -> None:
        is_disabled = _disabled_check(disabled)
        self.builtin, self.custom, self.refused = _matchers(rules, is_disabled, deferred=True)
        self.scanners: dict[str, StreamScanner] = {}
        self.kept: dict[str, int] = {}  # bytes each stream's log file keeps (head + tail)
        self.head: dict[str, int] = {}  # of which the head (a verbatim prefix of the stream)

    def feed_for(self, label: str) -> Callable[[bytes], None]:
        scanner = self.scanners[label] = StreamScanner(label, self.builtin + self.custom)
        return scanner.feed

    def finish(self, label: str, *, head: int, kept: int) -> None:
        """The stream ended; its log file kept ``kept`` bytes, the first ``head`` verbatim."""
        self.scanners[label].close()
        self.head[label], self.kept[label] = head, kept

    @property
    def used(self) -> bool:
        return bool(self.kept)

    def in_file(self, hit: Hit) -> bool:
        """Whether the line of ``hit`` is in the kept head of its log (same line number)."""
        scanner = self.scanners.get(hit.stream)
        head = self.head.get(hit.stream, 0)
        return scanner is None or scanner.scanned == self.kept.get(hit.stream) or hit.offset < head

    def summary(self) -> dict[str, dict[str, Any]]:
        """How much of each stream was scanned and how much its log keeps, for result.json."""
        return {label: {"scanned_bytes": sc.scanned, "kept_bytes": self.kept.get(label),
                        "whole_stream_scanned": True,
                        "kept_in_log": sc.scanned == self.kept.get(label)}
                for label, sc in self.scanners.items()}


def _apply_conditions(streamed: list[Matcher], rules: Sequence[PatternRule]) -> list[Matcher]:
    """The streamed recipe matchers with each rule's condition applied to its kept matches."""
    by_id = {r.id: r for r in rules}
    out = []
    for mt in streamed:
        rule = by_id.get(mt.id)
        if rule is None or rule.condition is None or not mt.keep_hits:
            out.append(mt)
            continue
        judged = _rule_matcher(rule)
        assert not isinstance(judged, str)  # it compiled for the stream
        for hit in mt.hits:
            if judged.accept(_Captured(hit.captures)) is not None:
                judged.count += 1
                judged.first = judged.first or hit
        out.append(judged)
    return out


class _Captured:
    """A kept match as ``numeric_captures`` reads it (its named groups, already converted)."""

    def __init__(self, captures: dict[str, Any]) -> None:
        self._captures = captures

    def groupdict(self) -> dict[str, Any]:
        return {k: (None if v is None else str(v) if not isinstance(v, str) else v)
                for k, v in self._captures.items()}


def tier4_and_5(
    stdout_path: Path | None,
    stderr_path: Path | None,
    rules: Sequence[PatternRule],
    is_disabled: IsDisabled,
    log_scan: LogScan | None = None,
    open_log: LogOpener = open_log_checked,
) -> list[Detection]:
    files = _log_files(stdout_path, stderr_path)
    if log_scan is not None and log_scan.used:  # the whole streams, scanned as they passed
        builtin, refused = log_scan.builtin, log_scan.refused
        custom = _apply_conditions(log_scan.custom, rules)
    else:  # an in-process or Slurm trial: what its log files kept
        builtin, custom, refused = _matchers(rules, is_disabled)
        for stream, path in files:
            scan_file(path, stream, builtin + custom, open_log=open_log)
    out = _tier4(builtin, files, log_scan, open_log)
    out += refused
    out += _tier5(custom, rules, files, log_scan)
    return out


def _tier4(builtin: Sequence[Matcher], files: list[tuple[str, Path]], log_scan: LogScan | None,
           open_log: LogOpener) -> list[Detection]:
    """Tier 4: each built-in log pattern that matched, once, with its first line; a traceback
    names its exception (read back from the kept log), a line the log did not keep says so."""
    described = {p.id: p for p in LOG_PATTERNS}
    out: list[Detection] = []
    for mt in builtin:
        if mt.first is None:
            continue
        pattern = described[mt.id]
        message = pattern.description
        captures = dict(mt.first.captures)
        in_file = log_scan is None or not log_scan.used or log_scan.in_file(mt.first)
        if mt.id == "python_traceback" and in_file:
            path = dict((s, p) for s, p in files)[mt.first.stream]
            exc_line = _exception_line(path, mt.first.line_no, open_log)
            if exc_line:
                captures["exception"] = exc_line
                message = f"Python exception: {exc_line}"
        if mt.count > 1:
            message += f" ({_count(mt)} lines)"
        if not in_file:
            message += _not_kept_note(mt.first)
        out.append(Detection(4, mt.id, pattern.severity, message, mt.first.evidence,
                             mt.first.line_no, mt.first.stream, captures, mt.count))  # fmt: skip
    return out


def _tier5(custom: Sequence[Matcher], rules: Sequence[PatternRule], files: list[tuple[str, Path]],
           log_scan: LogScan | None) -> list[Detection]:
    """Tier 5: each custom pattern that matched (with its condition), a condition that raised,
    and a required_for_pass pattern that matched nothing."""
    by_id = {r.id: r for r in rules}
    out: list[Detection] = []
    for mt in custom:
        rule = by_id[mt.id]
        if mt.notes:
            out.append(Detection(5, mt.id, "warn",
                                 f"condition of custom pattern '{mt.id}' raised {mt.notes[0]}; "
                                 "those matches were not counted"))  # fmt: skip
        if mt.first is not None:
            message = f"custom pattern '{mt.id}' matched"
            if mt.count > 1:
                message += f" ({_count(mt)} lines)"
            if log_scan is not None and log_scan.used and not log_scan.in_file(mt.first):
                message += _not_kept_note(mt.first)
            out.append(Detection(5, mt.id, rule.on_match, message, mt.first.evidence,
                                 mt.first.line_no, mt.first.stream, _json_safe(mt.first.captures),
                                 mt.count))  # fmt: skip
        elif rule.required_for_pass:
            cond = " with its condition holding" if rule.condition is not None else ""
            where = " or ".join(s for s, _ in files) or "no log"
            out.append(Detection(5, mt.id, "fail",
                                 f"{REQUIRED_MISSING}: custom pattern '{mt.id}' "
                                 f"(/{rule.regex.pattern}/){cond} is required_for_pass and "
                                 f"matched no line of {where}", count=0))  # fmt: skip
    return out


def _not_kept_note(hit: Hit) -> str:
    return (f" (line {hit.line_no} of the {hit.stream} stream, in the part its log does not "
            "keep: seen as the output passed)")


def _json_safe(captures: dict[str, Any]) -> dict[str, Any]:
    """nan/inf captures are floats for the condition, strings in the record (strict JSON)."""
    return {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v) for k, v in captures.items()}


def _count(mt: Matcher) -> str:
    return f"{mt.count}+" if mt.done else str(mt.count)


def workload_detections(result: Mapping[str, Any]) -> list[Detection]:
    """``result.json`` of a registered workload: each failure is a tier-4 fail."""
    out: list[Detection] = []
    failures = result.get("failures") or []
    for failure in failures if isinstance(failures, list) else []:
        if not isinstance(failure, Mapping):
            continue
        code = str(failure.get("code") or "unknown")
        message = str(failure.get("message") or code)
        details = failure.get("details")
        out.append(Detection(4, f"workload:{code}", "fail", message,
                             captures=dict(details) if isinstance(details, Mapping) else {}))  # fmt: skip
    if not out and result.get("passed") is False:
        out.append(Detection(4, "workload:failed", "fail",
                             "the workload reported passed=false without a failure entry"))  # fmt: skip
    return out


_SEVERITY_RANK = {"fail": 0, "error": 1, "warn": 2, "info": 3}


# Detections that are how a failure ends rather than what it was: a crash report (an abort
# after a collective timeout, a rank killed by its launcher), a traceback, the process's
# signal and exit code. They explain a trial only when nothing more specific fired.
_CONSEQUENCE_RANK = {"process_crash": 5, "python_traceback": 6}


def _specificity(d: Detection) -> int:
    """Lower explains the trial better (used to pick the reason): hang, kernel/GPU events,
    built-in cause patterns (in table order), recipe patterns, then the consequences - a crash
    report, a traceback, the signal, the exit code."""
    if d.tier == 1:
        return {"killed_by_signal": 7, "core_dumped": 7, "exit_nonzero": 8}.get(d.id, 0)
    if d.id in _CONSEQUENCE_RANK:
        return _CONSEQUENCE_RANK[d.id]
    return {2: 1, 3: 2, 4: 3, 5: 4}[d.tier]


def verdict_of(detections: Sequence[Detection]) -> tuple[Verdict, str]:
    severities: tuple[Verdict, ...] = ("fail", "error")  # a detection's severity is the verdict
    for severity in severities:
        hits = [d for d in detections if d.severity == severity]
        if hits:
            best = min(hits, key=_specificity)
            reason = best.message
            if best.evidence and best.tier in (3, 4, 5) and best.id != "python_traceback":
                reason += f": {best.evidence[:160]}"
            return severity, reason
    warns = [d.id for d in detections if d.severity == "warn"]
    reason = "no failure detected"
    if warns:
        reason += f" ({len(warns)} warning(s): {', '.join(dict.fromkeys(warns))})"
    return "pass", reason


def classify(
    outcome: Outcome | None,
    *,
    stdout_path: Path | None,
    stderr_path: Path | None,
    custom_rules: Sequence[PatternRule] = (),
    disabled: Collection[str] = (),
    kernel_events: Sequence[KernelEvent] = (),
    kernel_unavailable: str | None = None,
    workload_result: Mapping[str, Any] | None = None,
    log_scan: LogScan | None = None,
    placement: Placement | None = None,
    open_log: LogOpener = open_log_checked,
) -> Classification:
    """Classify one trial. ``outcome`` is None for an in-process trial (tiers 1-2 skipped).
    ``open_log`` opens the trial's logs (the orchestrator's: through the run's file layer).

    ``disabled`` holds detector ids (``cuda_error``), ``tierN:id`` or whole tiers (``tier4``).
    ``placement``: where a trial ran under a scheduler (``classify/placement.py``): its job's
    final state explains the trial before its process does, and the compute node's kernel log
    replaces this machine's.
    """
    is_disabled = _disabled_check(disabled)
    detections: list[Detection] = []
    if outcome is not None:
        detections += tier1(outcome)
        detections += tier2(outcome)
    typed = placement.state_detection() if placement is not None else None
    if typed is not None:
        detections = [typed] + [d for d in detections
                                if not (d.tier == 1 and d.id in PROCESS_CONSEQUENCES)]
    if placement is not None and placement.kernel_events is not None:
        kernel_events, kernel_unavailable = placement.kernel_events, placement.kernel_unavailable
    detections += tier3(kernel_events, kernel_unavailable)
    if outcome is not None:
        detections += tier3_counters(outcome)
    detections += tier4_and_5(stdout_path, stderr_path, custom_rules, is_disabled, log_scan, open_log)
    if workload_result is not None:
        detections += workload_detections(workload_result)
    kept = [d for d in detections if not is_disabled(d.tier, d.id, d.captures)]
    verdict, reason = verdict_of(kept)
    return Classification(verdict, reason, kept)
