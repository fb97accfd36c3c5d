"""``agent.json`` as a typed value: :class:`AgentState` and its parts.

One serializer (:meth:`AgentState.to_json`, the object agent.json holds, key order included)
and one reader (:meth:`AgentState.from_dict` / :meth:`AgentState.from_json`: every field's type
checked, a damaged file a located error naming the file and the field path, exit 2). The page
(``page.py``), the CLI and ``--resume`` read these attributes.

The loop (``loop.py``) records each step into the document's JSON form and saves it through
this reader and serializer, so what it writes is always a well-typed AgentState.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.inputs import FieldReader, load_json_input

KIND = "aorta-tui/agent"
SCHEMA_VERSION = 1
WHAT = "agent state"
STATE_LIMIT = 64 * 1024 * 1024
# JSON values as the serializers build them
JsonObject = dict[str, object]


@dataclass(frozen=True)
class CellResult:
    """A cell of an iteration's sweep, its figures from matrix.json (None: not measured)."""

    cell: str | None
    mitigations: tuple[str, ...]
    run_dir: str | None
    trials: int | None
    failure_rate: float | None
    error_rate: float | None
    step_time_mean_s: float | None
    step_time_p50_s: float | None
    step_time_ratio: float | None  # against the baseline's mean step time
    meets_goal: bool = False

    def to_json(self) -> JsonObject:
        return {"cell": self.cell, "mitigations": list(self.mitigations),
                "run_dir": self.run_dir, **_figures_json(self), "meets_goal": self.meets_goal}


def _figures_json(c: CellResult | Baseline) -> JsonObject:
    return {"trials": c.trials, "failure_rate": c.failure_rate, "error_rate": c.error_rate,
            "step_time_mean_s": c.step_time_mean_s, "step_time_p50_s": c.step_time_p50_s,
            "step_time_ratio": c.step_time_ratio}


@dataclass(frozen=True)
class Baseline:
    """The baseline cell of iteration 0: what every mitigation is compared with."""

    cell: str | None
    run_dir: str | None
    trials: int | None
    failure_rate: float | None
    error_rate: float | None
    step_time_mean_s: float | None
    step_time_p50_s: float | None
    step_time_ratio: float | None
    mitigations: tuple[str, ...] = ()

    def to_json(self) -> JsonObject:
        return {"cell": self.cell, "run_dir": self.run_dir, **_figures_json(self),
                "mitigations": list(self.mitigations)}


@dataclass(frozen=True)
class Iteration:
    """One proposal and its sweep: ``planned``, ``running``, ``interrupted``, ``failed``, ``done``."""

    index: int
    status: str
    recipe: str  # the iteration's recipe file in the agent directory
    run_dir: str | None
    proposed: tuple[tuple[str, ...], ...] = ()  # each cell's mitigations
    reasons: tuple[str, ...] = ()  # why each cell was proposed
    note: str = ""
    cells: tuple[CellResult, ...] = ()
    trials: int = 0

    def to_json(self) -> JsonObject:
        return {"index": self.index, "status": self.status, "recipe": self.recipe,
                "run_dir": self.run_dir, "proposed": [list(c) for c in self.proposed],
                "reasons": list(self.reasons), "note": self.note,
                "cells": [c.to_json() for c in self.cells], "trials": self.trials}


@dataclass(frozen=True)
class EvidenceFigures:
    """The figures a recommendation rests on: a cell's, or the baseline's (``cell`` set)."""

    run_dir: str | None
    trials: int | None
    failure_rate: float | None
    error_rate: float | None
    step_time_ratio: float | None
    step_time_p50_s: float | None
    cell: str | None = None  # the baseline's cell name; None for the recommended cell

    def to_json(self, *, baseline: bool) -> JsonObject:
        if baseline:  # the baseline's own ratio is 1 by definition: not written
            return {"cell": self.cell, "run_dir": self.run_dir, "trials": self.trials,
                    "failure_rate": self.failure_rate, "error_rate": self.error_rate,
                    "step_time_p50_s": self.step_time_p50_s}
        return {"run_dir": self.run_dir, "trials": self.trials,
                "failure_rate": self.failure_rate, "error_rate": self.error_rate,
                "step_time_ratio": self.step_time_ratio, "step_time_p50_s": self.step_time_p50_s}


@dataclass(frozen=True)
class Evidence:
    cell: EvidenceFigures
    baseline: EvidenceFigures

    def to_json(self) -> JsonObject:
        return {**self.cell.to_json(baseline=False),
                "baseline": self.baseline.to_json(baseline=True)}


@dataclass(frozen=True)
class Recommendation:
    """How the agent ended: the mitigations to apply (none when no cell met the goal)."""

    mitigations: tuple[str, ...]
    cell: str | None
    confidence: float | None
    reason: str
    evidence: Evidence | None = None
    confidence_meaning: str | None = None  # written only when set (a goal met)

    def to_json(self) -> JsonObject:
        out: JsonObject = {"mitigations": list(self.mitigations), "cell": self.cell,
                           "confidence": self.confidence}
        if self.confidence_meaning is not None:
            out["confidence_meaning"] = self.confidence_meaning
        out["evidence"] = self.evidence.to_json() if self.evidence is not None else None
        out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class LlmSettings:
    model: str
    base_url: str | None
    timeout_s: float | None = None  # the whole request's deadline; written when set

    def to_json(self) -> JsonObject:
        out: JsonObject = {"model": self.model, "base_url": self.base_url}
        if self.timeout_s is not None:
            out["timeout_s"] = self.timeout_s
        return out


@dataclass(frozen=True)
class AgentState:
    """``agent.json``: the agent's request, its iterations and how it ended (docs/agent.md)."""

    status: str  # running, interrupted, error, or one of loop.FINISHED
    created: str
    proposer: str  # builtin or llm
    llm: LlmSettings | None
    goal: str
    budget: int
    per_iteration: int
    trials_used: int
    recipe: str
    recipe_source: str
    mode: str
    command: tuple[str, ...]
    output: str
    candidates: tuple[str, ...]
    mitigation_files: tuple[str, ...]
    no_snapshot: bool
    baseline: Baseline | None = None
    iterations: tuple[Iteration, ...] = ()
    recommendation: Recommendation | None = None
    # name -> variable of each secret --env-candidate; the value is in memory only
    secret_candidates: dict[str, str] = field(default_factory=dict)
    stop_reason: str | None = None  # why it stopped; written (last) once set
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> JsonObject:
        """The object agent.json holds (``core.atomic.atomic_write_json`` writes it)."""
        out: JsonObject = {
            "schema_version": self.schema_version, "kind": KIND, "status": self.status,
            "created": self.created, "proposer": self.proposer,
            "llm": self.llm.to_json() if self.llm is not None else None, "goal": self.goal,
            "budget": self.budget, "per_iteration": self.per_iteration,
            "trials_used": self.trials_used, "recipe": self.recipe,
            "recipe_source": self.recipe_source, "mode": self.mode,
            "command": list(self.command), "output": self.output,
            "candidates": list(self.candidates), "mitigation_files": list(self.mitigation_files),
            "no_snapshot": self.no_snapshot,
            "baseline": self.baseline.to_json() if self.baseline is not None else None,
            "iterations": [it.to_json() for it in self.iterations],
            "recommendation": (self.recommendation.to_json()
                               if self.recommendation is not None else None),
            "secret_candidates": dict(self.secret_candidates)}
        if self.stop_reason is not None:
            out["stop_reason"] = self.stop_reason
        return out

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "agent.json") -> AgentState:
        """Read a parsed agent.json; a damaged one is a located UsageError (exit 2)."""
        return _read_state(FieldReader(where, WHAT), data)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> AgentState:
        data = load_json_input(path, what=WHAT, limit=STATE_LIMIT,
                               hint="agent.json is written by `aorta-tui agent`; start the "
                                    "agent again (its iterations' run directories are kept)")
        return cls.from_dict(data, where=os.fspath(path))


# -- the reader ----------------------------------------------------------------------------


def _read_state(f: FieldReader, data: Any) -> AgentState:
    d = f.obj(data, "(top level)")
    if d.get("kind") != KIND:
        raise UsageError(f"{f.where}: not an agent state (kind {d.get('kind')!r:.60})",
                         hint="pass <output>/<ticket>/agent-<id>, printed when the agent started")
    secrets = f.get(d, "secret_candidates", "object", "", {})
    for name, var in secrets.items():
        f.check(var, "string", f"secret_candidates.{name}")
    baseline, recommendation, llm = d.get("baseline"), d.get("recommendation"), d.get("llm")
    return AgentState(
        schema_version=f.get(d, "schema_version", "integer", "", SCHEMA_VERSION),
        status=f.required(d, "status", "string", ""), created=f.text(d, "created", ""),
        proposer=f.text(d, "proposer", "", "builtin"),
        llm=_read_llm(f, llm) if llm is not None else None,
        goal=f.required(d, "goal", "string", ""), budget=f.required(d, "budget", "integer", ""),
        per_iteration=f.required(d, "per_iteration", "integer", ""),
        trials_used=f.get(d, "trials_used", "integer", "", 0),
        recipe=f.text(d, "recipe", "", "recipe.yaml"), recipe_source=f.text(d, "recipe_source", ""),
        mode=f.required(d, "mode", "string", ""),
        command=f.strings(d.get("command", []), "command"), output=f.required(d, "output", "string", ""),
        candidates=f.strings(d.get("candidates", []), "candidates"),
        mitigation_files=f.strings(d.get("mitigation_files", []), "mitigation_files"),
        no_snapshot=f.get(d, "no_snapshot", "boolean", "", False),
        baseline=_read_baseline(f, baseline) if baseline is not None else None,
        iterations=tuple(_read_iteration(f, x, f"iterations[{i}]")
                         for i, x in enumerate(f.get(d, "iterations", "array", "", []))),
        recommendation=(_read_recommendation(f, recommendation)
                        if recommendation is not None else None),
        secret_candidates=dict(secrets),
        stop_reason=f.get(d, "stop_reason", "string", "", None, nullable=True))


def _read_llm(f: FieldReader, value: Any) -> LlmSettings:
    d = f.obj(value, "llm")
    return LlmSettings(model=f.required(d, "model", "string", "llm"),
                       base_url=f.get(d, "base_url", "string", "llm", None, nullable=True),
                       timeout_s=f.number(d, "timeout_s", "llm"))


def _figures(f: FieldReader, d: dict[str, Any], path: str) -> dict[str, Any]:
    return {"trials": f.get(d, "trials", "integer", path, None, nullable=True),
            **{k: f.number(d, k, path) for k in ("failure_rate", "error_rate",
                                                  "step_time_mean_s", "step_time_p50_s",
                                                  "step_time_ratio")}}


def _read_baseline(f: FieldReader, value: Any) -> Baseline:
    d = f.obj(value, "baseline")
    return Baseline(cell=f.get(d, "cell", "string", "baseline", None, nullable=True),
                    run_dir=f.get(d, "run_dir", "string", "baseline", None, nullable=True),
                    **_figures(f, d, "baseline"),
                    mitigations=f.strings(d.get("mitigations", []), "baseline.mitigations"))


def _read_cell(f: FieldReader, value: Any, path: str) -> CellResult:
    d = f.obj(value, path)
    return CellResult(cell=f.get(d, "cell", "string", path, None, nullable=True),
                      mitigations=f.strings(d.get("mitigations", []), f"{path}.mitigations"),
                      run_dir=f.get(d, "run_dir", "string", path, None, nullable=True),
                      **_figures(f, d, path),
                      meets_goal=f.get(d, "meets_goal", "boolean", path, False))


def _read_iteration(f: FieldReader, value: Any, path: str) -> Iteration:
    d = f.obj(value, path)
    proposed = f.get(d, "proposed", "array", path, [])
    return Iteration(
        index=f.required(d, "index", "integer", path),
        status=f.required(d, "status", "string", path),
        recipe=f.required(d, "recipe", "string", path),
        run_dir=f.get(d, "run_dir", "string", path, None, nullable=True),
        proposed=tuple(f.strings(c, f"{path}.proposed[{i}]") for i, c in enumerate(proposed)),
        reasons=f.strings(d.get("reasons", []), f"{path}.reasons"),
        note=f.text(d, "note", path),
        cells=tuple(_read_cell(f, c, f"{path}.cells[{i}]")
                    for i, c in enumerate(f.get(d, "cells", "array", path, []))),
        trials=f.get(d, "trials", "integer", path, 0))


def _read_evidence_figures(f: FieldReader, d: dict[str, Any], path: str,
                           *, baseline: bool) -> EvidenceFigures:
    return EvidenceFigures(
        run_dir=f.get(d, "run_dir", "string", path, None, nullable=True),
        trials=f.get(d, "trials", "integer", path, None, nullable=True),
        failure_rate=f.number(d, "failure_rate", path), error_rate=f.number(d, "error_rate", path),
        step_time_ratio=None if baseline else f.number(d, "step_time_ratio", path),
        step_time_p50_s=f.number(d, "step_time_p50_s", path),
        cell=f.get(d, "cell", "string", path, None, nullable=True) if baseline else None)


def _read_recommendation(f: FieldReader, value: Any) -> Recommendation:
    path = "recommendation"
    d = f.obj(value, path)
    evidence = d.get("evidence")
    if evidence is not None:
        e = f.obj(evidence, f"{path}.evidence")
        base = f.obj(f.required(e, "baseline", "object", f"{path}.evidence"),
                     f"{path}.evidence.baseline")
        evidence = Evidence(_read_evidence_figures(f, e, f"{path}.evidence", baseline=False),
                            _read_evidence_figures(f, base, f"{path}.evidence.baseline",
                                                   baseline=True))
    return Recommendation(
        mitigations=f.strings(d.get("mitigations", []), f"{path}.mitigations"),
        cell=f.get(d, "cell", "string", path, None, nullable=True),
        confidence=f.number(d, "confidence", path), reason=f.text(d, "reason", path),
        evidence=evidence,
        confidence_meaning=f.get(d, "confidence_meaning", "string", path, None, nullable=True))
