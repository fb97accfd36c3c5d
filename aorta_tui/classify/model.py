"""The classifier's data: patterns, recipe rules, detections and the verdict."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

# Tier 2's detector ids: the hang monitor's signals, named beside its report in core (which
# result.json's process section holds); the classifier and trial/hang.py read them here.
from aorta_tui.core.hang_report import GPU_IDLE as GPU_IDLE
from aorta_tui.core.hang_report import IO_IDLE as IO_IDLE
from aorta_tui.core.hang_report import OUTPUT_SILENCE as OUTPUT_SILENCE
from aorta_tui.core.hang_report import SIGNAL_NAMES as SIGNAL_NAMES

Severity = Literal["fail", "warn", "info", "error"]
Verdict = Literal["pass", "fail", "error"]
OnMatch = Literal["fail", "warn", "info"]


@dataclass(frozen=True)
class Pattern:
    """A built-in pattern (tier 3 kernel log or tier 4 trial log), with a line it matches."""

    id: str
    regex: re.Pattern[str]
    severity: Severity
    description: str
    sample: str
    tier: int = 4
    # Literal strings one of which every match contains: the scanner looks for these with
    # str.find and runs the regex only on those lines (tests check each sample has one).
    needles: tuple[str, ...] = ()
    # further real lines it matches, one per other spelling (tests check them like ``sample``)
    more_samples: tuple[str, ...] = ()

    def samples(self) -> tuple[str, ...]:
        return (self.sample, *self.more_samples)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tier": self.tier,
            "severity": self.severity,
            "regex": self.regex.pattern,
            "description": self.description,
            "sample": self.sample,
            "more_samples": list(self.more_samples),
            "needles": list(self.needles),
        }


@dataclass(frozen=True)
class PatternRule:
    """A recipe ``custom_patterns`` entry (tier 5), built by the recipe layer.

    ``condition`` receives the match's named groups (numbers as floats, groups that did not
    take part as ``None``) and decides whether the match counts.
    """

    id: str
    regex: re.Pattern[str]
    on_match: OnMatch = "fail"
    required_for_pass: bool = False
    condition: Callable[[dict[str, Any]], bool] | None = None


@dataclass(frozen=True)
class Detection:
    """One thing a tier found. ``count`` is how many lines (or events) matched in all."""

    tier: int
    id: str
    severity: Severity
    message: str
    evidence: str = ""
    line_no: int | None = None
    stream: str | None = None
    captures: dict[str, Any] = field(default_factory=dict)
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Classification:
    verdict: Verdict
    reason: str
    detections: list[Detection] = field(default_factory=list)

    @property
    def fired(self) -> list[str]:
        """Ids of the detections that decided a fail or error (the matrix's "detectors")."""
        return [d.id for d in self.detections if d.severity in ("fail", "error")]

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "detections": [d.to_dict() for d in self.detections],
        }


class HangFinding(Protocol):
    """What tier 2 reads of a hang the monitor reported (trial/hang.py's HangReport)."""

    def summary(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


class Outcome(Protocol):
    """What tiers 1-3 read of how a trial's process ended: the interface the classifier
    declares, which trial/supervisor.py's ``ProcessOutcome`` fills (Hydra's shape: the
    implementation sits above the interface, never the other way round)."""

    @property
    def exit_code(self) -> int | None: ...
    @property
    def signal(self) -> int | None: ...
    @property
    def signal_name(self) -> str | None: ...
    @property
    def core_dumped(self) -> bool: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def cancelled(self) -> bool: ...
    @property
    def hang(self) -> HangFinding | None: ...
    @property
    def hang_note(self) -> str | None: ...
    @property
    def exec_error(self) -> str | None: ...
    @property
    def wall_s(self) -> float: ...
    @property
    def timeout_s(self) -> float | None: ...
    @property
    def stopped_at_s(self) -> float | None: ...
    @property
    def containment(self) -> str | None: ...
    @property
    def killed_count(self) -> int: ...
    @property
    def survivors(self) -> list[int] | None: ...
    @property
    def survivors_reason(self) -> str | None: ...
    @property
    def gpu_counters_delta(self) -> dict[str, dict[str, int]] | None: ...
