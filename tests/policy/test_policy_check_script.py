"""scripts/policy_check.py (the GPU check) reads its sweeps' reports as the typed PolicyReport.

It read them by key (``report["policies"]``) after PolicyReport stopped being a dict, so its
table and its direct comparisons ended in a TypeError on a GPU. Here they read the golden
report (a real CPU sweep's policy.json) through the one reader; no GPU needed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aorta_tui.policy.report_doc import PolicyReport

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "policy" / "fixtures" / "golden-run" / "policy.json"


@pytest.fixture(scope="module")
def check() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "policy_check", REPO / "scripts" / "policy_check.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["policy_check"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def report() -> PolicyReport:
    return PolicyReport.from_json(GOLDEN)


def test_a_policy_against_the_reference_directly_is_the_reports_own_call(
    check: ModuleType, report: PolicyReport
) -> None:
    compared = 0
    for entry in report.policies:
        for metric, call in entry.vs_reference.items():
            assert check.direct(report, entry.name, report.reference, metric) == call
            compared += 1
    assert compared  # the golden compares something, or this proves nothing


def test_a_metric_no_policy_measured_is_not_available(
    check: ModuleType, report: PolicyReport
) -> None:
    got = check.direct(report, "cuda_max_connections_1", report.reference, "no_such_metric")
    assert got.verdict == "not available" and got.reason == "not measured"


def test_the_table_has_a_row_per_policy_that_ran_and_metric(
    check: ModuleType, report: PolicyReport
) -> None:
    lines = check.table(report, check.KEY_METRICS_A)
    ran = [p for p in report.policies if p.status == "ran"]
    present = [m for m in check.KEY_METRICS_A if m in {i.name for i in report.metrics}]
    assert len(lines) == 1 + len(ran) * len(present) and present
    reference_rows = [line for line in lines if line.startswith(f"{report.reference} ")]
    assert reference_rows and all(line.endswith("reference") for line in reference_rows)
    other = next(p for p in ran if p.name != report.reference)
    row = next(
        line for line in lines if line.startswith(f"{other.name} ") and " throughput " in line
    )
    assert row.split("  ")[-1].startswith(other.vs_reference["throughput"].verdict)
