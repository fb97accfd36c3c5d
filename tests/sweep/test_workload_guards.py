"""What the Workload base class guarantees, read without getattr guards (sweep/workload_check.py,
the sweep's failure hint): a workload that keeps the base class's config_schema, launch,
hint and failure_hint is checked and hinted as before; the optional hooks (config_problems,
config_notes) stay optional."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from aorta_tui.recipe import load_recipe_text
from aorta_tui.registry import registry as registry_mod
from aorta_tui.registry.workload import (
    ConfigField,
    LaunchSpec,
    Workload,
    WorkloadContext,
    WorkloadResult,
)
from aorta_tui.sweep.orchestrator import Sweep
from aorta_tui.sweep.workload_check import workload_issues

RECIPE = """\
schema_version: 1
ticket: GUARD
workload: bare_t
trials: 1
steps: 1
workload_config: {}
cells:
  - name: a
    mitigations: [none]
"""


class Bare(Workload):
    """Only what a workload must have: every other attribute is the base class's."""

    name = "bare_t"

    def run(self, ctx: WorkloadContext) -> WorkloadResult:
        return WorkloadResult()


class Safe(Bare):
    launch = LaunchSpec(in_process_safe=True)
    config_schema: ClassVar[tuple[ConfigField, ...]] = (ConfigField("size", "int", 8),)
    hint = "the hint"

    @classmethod
    def config_notes(cls, config: dict[str, Any]) -> list[tuple[str, str]]:
        return [("size", f"size {config['size']} does less here")]


class NoneHint(Bare):
    @classmethod
    def failure_hint(cls, failing: list[dict[str, Any]]) -> str:
        return None  # type: ignore[return-value]  # a plugin's mistake: read as no hint


def _issues(monkeypatch: pytest.MonkeyPatch, cls: type[Workload], extra: str = "",
            config: str = "{}") -> tuple[list[Any], list[str]]:
    monkeypatch.setattr(registry_mod, "load_workload", lambda name: cls)
    recipe = load_recipe_text(RECIPE.replace("workload_config: {}", f"workload_config: {config}") + extra)
    return workload_issues(recipe)


def test_a_bare_workload_is_checked_with_the_base_class_defaults(monkeypatch) -> None:
    assert _issues(monkeypatch, Bare) == ([], [])
    issues, _ = _issues(monkeypatch, Bare, config="{size: 3}")  # the base schema: no settings
    assert [i.path for i in issues] == ["workload_config.size"]
    assert "unknown setting 'size'" in issues[0].message
    issues, _ = _issues(monkeypatch, Bare, "trial_isolation: in_process\n")
    assert [i.path for i in issues] == ["trial_isolation"]
    assert "does not declare itself safe" in issues[0].message


def test_a_workload_that_declares_them_is_checked_with_its_own(monkeypatch) -> None:
    issues, notes = _issues(monkeypatch, Safe, "trial_isolation: in_process\n", config="{size: 3}")
    assert issues == []
    assert len(notes) == 1 and notes[0].endswith("workload_config.size: size 3 does less here")


def _hint(cls: type[Workload], verdicts: list[str]) -> str:
    records = [SimpleNamespace(verdict=v, workload_result={"failures": []}) for v in verdicts]
    cells = [SimpleNamespace(cross_trial_failures=[])]
    return Sweep._failure_hint(SimpleNamespace(workload_cls=cls), records, cells)  # type: ignore[arg-type]


def test_the_failure_hint_is_the_workloads_only_when_something_failed() -> None:
    assert _hint(Safe, ["pass", "fail"]) == "the hint"  # the base failure_hint: its hint
    assert _hint(Safe, ["pass"]) == ""
    assert _hint(Bare, ["fail"]) == ""  # the base class's hint is ""
    assert _hint(NoneHint, ["fail"]) == ""  # None read as no hint, as before
