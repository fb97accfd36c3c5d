"""``agent.json`` as a typed value: :class:`AgentState` and its parts.

One serializer (:meth:`AgentState.to_json`, the object agent.json holds, key order included)
and one reader (:meth:`AgentState.from_dict` / :meth:`AgentState.from_json`: every field's type
checked, a damaged file a located error naming the file and the field path, exit 2). The page
(``page.py``), the CLI and ``--resume`` read these attributes.

The loop (``loop.py``) works on these values: each step makes a new AgentState
(``dataclasses.replace``, :meth:`AgentState.put_iteration`) and saves ``to_json()``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
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

    def put_iteration(self, it: Iteration) -> AgentState:
        """This state with ``it`` in its place: the iteration of the same index replaced (a
        step of the one running), else appended (a new one)."""
        its = list(self.iterations)
        at = next((i for i, old in enumerate(its) if old.index == it.index), None)
        if at is None:
            its.append(it)
        else:
            its[at] = it
        return replace(self, iterations=tuple(its))

    @classmethod
    def from_dict(cls, data: object, *, where: str = "agent.json") -> AgentState:
        """Read a parsed agent.json; a damaged one is a located UsageError (exit 2)."""
        return _read_state(FieldReader(where, WHAT), data)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> AgentState:
        data = load_json_input(path, what=WHAT, limit=STATE_LIMIT,
                               hint="agent.json is written by `aorta-tui agent`; start the "
                                    "agent again (its iterations' run directories are kept)")
        return cls.from_dict(data, where=os.fspath(path))


# -- the reader ----------------------------------------------------------------------------


def _read_state(f: FieldReader, data: object) -> AgentState:
    d = f.obj(data, "(top level)")
    if d.get("kind") != KIND:
        raise UsageError(f"{f.where}: not an agent state (kind {d.get('kind')!r:.60})",
                         hint="pass <output>/<ticket>/agent-<id>, printed when the agent started")
    secrets = {str(name): str(f.check(var, "string", f"secret_candidates.{name}"))
               for name, var in f.obj_at(d, "secret_candidates", "").items()}
    baseline, recommendation, llm = d.get("baseline"), d.get("recommendation"), d.get("llm")
    return AgentState(
        schema_version=f.integer(d, "schema_version", "", SCHEMA_VERSION),
        status=f.text(d, "status", "", required=True), created=f.text(d, "created", ""),
        proposer=f.text(d, "proposer", "", "builtin"),
        llm=_read_llm(f, llm) if llm is not None else None,
        goal=f.text(d, "goal", "", required=True), budget=f.integer(d, "budget", "", required=True),
        per_iteration=f.integer(d, "per_iteration", "", required=True),
        trials_used=f.integer(d, "trials_used", ""),
        recipe=f.text(d, "recipe", "", "recipe.yaml"), recipe_source=f.text(d, "recipe_source", ""),
        mode=f.text(d, "mode", "", required=True), command=f.strings_at(d, "command", ""),
        output=f.text(d, "output", "", required=True),
        candidates=f.strings_at(d, "candidates", ""),
        mitigation_files=f.strings_at(d, "mitigation_files", ""),
        no_snapshot=f.boolean(d, "no_snapshot", ""),
        baseline=_read_baseline(f, baseline) if baseline is not None else None,
        iterations=tuple(_read_iteration(f, x, f"iterations[{i}]")
                         for i, x in enumerate(f.array_at(d, "iterations", ""))),
        recommendation=(_read_recommendation(f, recommendation)
                        if recommendation is not None else None),
        secret_candidates=secrets, stop_reason=f.opt_text(d, "stop_reason", ""))


def _read_llm(f: FieldReader, value: object) -> LlmSettings:
    d = f.obj(value, "llm")
    return LlmSettings(model=f.text(d, "model", "llm", required=True),
                       base_url=f.opt_text(d, "base_url", "llm"),
                       timeout_s=f.number(d, "timeout_s", "llm"))


def _read_baseline(f: FieldReader, value: object) -> Baseline:
    d = f.obj(value, "baseline")
    p = "baseline"
    return Baseline(cell=f.opt_text(d, "cell", p), run_dir=f.opt_text(d, "run_dir", p),
                    **_read_figures(f, d, p), mitigations=f.strings_at(d, "mitigations", p))


def _read_figures(f: FieldReader, d: dict[str, Any], p: str) -> dict[str, Any]:
    """The figures a baseline and every cell share (``_figures_json`` writes them)."""
    return {"trials": f.opt_integer(d, "trials", p), "failure_rate": f.number(d, "failure_rate", p),
            "error_rate": f.number(d, "error_rate", p),
            "step_time_mean_s": f.number(d, "step_time_mean_s", p),
            "step_time_p50_s": f.number(d, "step_time_p50_s", p),
            "step_time_ratio": f.number(d, "step_time_ratio", p)}


def _read_cell(f: FieldReader, value: object, p: str) -> CellResult:
    d = f.obj(value, p)
    return CellResult(cell=f.opt_text(d, "cell", p), mitigations=f.strings_at(d, "mitigations", p),
                      run_dir=f.opt_text(d, "run_dir", p), **_read_figures(f, d, p),
                      meets_goal=f.boolean(d, "meets_goal", p))


def _read_iteration(f: FieldReader, value: object, path: str) -> Iteration:
    d = f.obj(value, path)
    return Iteration(
        index=f.integer(d, "index", path, required=True),
        status=f.text(d, "status", path, required=True),
        recipe=f.text(d, "recipe", path, required=True),
        run_dir=f.opt_text(d, "run_dir", path),
        proposed=tuple(f.strings(c, f"{path}.proposed[{i}]")
                       for i, c in enumerate(f.array_at(d, "proposed", path))),
        reasons=f.strings_at(d, "reasons", path), note=f.text(d, "note", path),
        cells=tuple(_read_cell(f, c, f"{path}.cells[{i}]")
                    for i, c in enumerate(f.array_at(d, "cells", path))),
        trials=f.integer(d, "trials", path))


def _read_evidence_figures(f: FieldReader, d: dict[str, Any], path: str,
                           *, baseline: bool) -> EvidenceFigures:
    # the baseline's figures carry its cell's name and no ratio (its own ratio is 1)
    return EvidenceFigures(
        run_dir=f.opt_text(d, "run_dir", path), trials=f.opt_integer(d, "trials", path),
        failure_rate=f.number(d, "failure_rate", path), error_rate=f.number(d, "error_rate", path),
        step_time_ratio=None if baseline else f.number(d, "step_time_ratio", path),
        step_time_p50_s=f.number(d, "step_time_p50_s", path),
        cell=f.opt_text(d, "cell", path) if baseline else None)


def _read_evidence(f: FieldReader, value: object, path: str) -> Evidence:
    e = f.obj(value, path)
    base = f.obj_at(e, "baseline", path, required=True)
    return Evidence(_read_evidence_figures(f, e, path, baseline=False),
                    _read_evidence_figures(f, base, f"{path}.baseline", baseline=True))


def _read_recommendation(f: FieldReader, value: object) -> Recommendation:
    path = "recommendation"
    d = f.obj(value, path)
    evidence = d.get("evidence")
    return Recommendation(
        mitigations=f.strings_at(d, "mitigations", path), cell=f.opt_text(d, "cell", path),
        confidence=f.number(d, "confidence", path), reason=f.text(d, "reason", path),
        evidence=(_read_evidence(f, evidence, f"{path}.evidence")
                  if evidence is not None else None),
        confidence_meaning=f.opt_text(d, "confidence_meaning", path))
