"""The five-tier trial classifier (process, hang, kernel/GPU, built-in patterns, recipe patterns).

See ``docs/classifier.md``. Public API::

    classify(outcome, stdout_path=..., stderr_path=..., custom_rules=..., disabled=...,
             kernel_events=..., kernel_unavailable=..., workload_result=...,
             log_scan=LogScan(...)) -> Classification   # log_scan: the streams as they passed
    BUILTIN_PATTERNS   # tier-3 kernel and tier-4 log patterns, each with a sample line
    extract_step_times(path, regex) -> list[float]   # seconds
    KernelLog.open() / .mark() / .events_since(cursor)
"""

from __future__ import annotations

from aorta_tui.classify.dmesg import KERNEL_PATTERNS, KernelEvent, KernelLog
from aorta_tui.classify.model import (
    Classification,
    Detection,
    OnMatch,
    Pattern,
    PatternRule,
    Severity,
    Verdict,
)
from aorta_tui.classify.patterns import LOG_PATTERNS
from aorta_tui.classify.steps import extract_step_times
from aorta_tui.classify.tiers import LogScan, builtin_detector_ids, classify

BUILTIN_PATTERNS: tuple[Pattern, ...] = KERNEL_PATTERNS + LOG_PATTERNS

__all__ = [
    "BUILTIN_PATTERNS",
    "KERNEL_PATTERNS",
    "LOG_PATTERNS",
    "Classification",
    "Detection",
    "KernelEvent",
    "KernelLog",
    "LogScan",
    "OnMatch",
    "Pattern",
    "PatternRule",
    "Severity",
    "Verdict",
    "builtin_detector_ids",
    "classify",
    "extract_step_times",
]
