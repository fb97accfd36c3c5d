"""The closed loop of ``aorta-tui agent``: baseline, propose, sweep, read, until the goal or the
budget (docs/agent.md).

Every iteration is an ordinary sweep (``aorta-tui sweep run`` in a child process, so its run
directory, journal, resume and the TUI work as for any run) in the recipe's ticket. The agent's
own record is ``<output>/<ticket>/agent-<id>/``: ``recipe.yaml`` (the recipe it started from),
``iter-NN.yaml`` (each iteration's recipe), ``agent.json`` (the state, rewritten atomically
after every step, so Ctrl-C loses nothing that finished and ``--resume`` continues) and
``agent.md``.

The loop works on the typed state (``state.AgentState``, frozen: each step makes a new value)
and never prints: it emits the one event stream (``core/events.py``) to the callback its caller
hands :func:`run`; the CLI picks lines for a person or ``--json``'s event lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from aorta_tui.agent.proposer import (
    Conflicts,
    Figures,
    Proposal,
    builtin_propose,
    cell_figures,
    score,
)
from aorta_tui.agent.state import (
    AgentState,
    Baseline,
    CellResult,
    Evidence,
    EvidenceFigures,
    Iteration,
    LlmSettings,
    Recommendation,
)
from aorta_tui.core import spawn_gate
from aorta_tui.core.errors import AortaError, EnvironmentProblem, ExitCode, UsageError
from aorta_tui.core.events import (
    Event,
    Progress,
    ResultWritten,
    RunFinished,
    RunStarted,
    RunWarning,
)
from aorta_tui.store.naming import DEFAULT_OUTPUT

if TYPE_CHECKING:
    from aorta_tui.agent.records import MitigationsSidecar
    from aorta_tui.recipe.condition import Condition
    from aorta_tui.recipe.model import Recipe
    from aorta_tui.registry.registry import Registry
    from aorta_tui.sweep.matrix_doc import MatrixCell
    from aorta_tui.sweep.plan import Plan

GOAL_NAMES = frozenset({"failure_rate", "error_rate", "trials", "step_time_ratio",
                        "step_time_p50_s"})
DEFAULT_GOAL = "failure_rate == 0 and error_rate == 0"
PAIR_JOIN = "--"  # a combined mitigation's name: hsa_no_sdma--xnack
FINISHED = ("goal_met", "baseline_meets_goal", "budget_spent", "exhausted", "declined")


@dataclass
class AgentRequest:
    recipe: Path
    command: list[str]
    goal: str = DEFAULT_GOAL
    budget: int = 64
    per_iteration: int = 8
    output: Path = Path(DEFAULT_OUTPUT)
    candidates: list[str] | None = None
    env_candidates: list[str] = field(default_factory=list)  # VAR=VALUE settings to try
    mitigation_files: list[Path] = field(default_factory=list)
    no_snapshot: bool = False
    proposer: str = "builtin"
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_timeout: float = 120.0  # seconds for the whole request to the llm server
    yes: bool = False


def check_goal(goal: str) -> Condition:
    from aorta_tui.core.errors import RecipeError
    from aorta_tui.recipe.condition import compile_condition

    try:
        return compile_condition(goal, names=GOAL_NAMES)
    except RecipeError as exc:
        raise UsageError(f"--goal {goal!r}: {exc.message}",
                         hint=f"an expression over {', '.join(sorted(GOAL_NAMES))}, e.g. "
                              f"\"{DEFAULT_GOAL}\"") from None


def _registry(files: list[Path], secrets: dict[str, dict[str, str]] | None = None) -> Registry:
    """The mitigations the sweeps load; ``secrets`` (in memory only) fill the masks of the
    secret ``--env-candidate`` settings, so conflicts and the engine's plan see real values."""
    from aorta_tui.registry.registry import Registry

    registry = Registry([str(f) for f in files])
    if secrets:
        registry.fill_masked(secrets)
    return registry


def _plan(recipe_path: Path, registry: Registry) -> tuple[Recipe, Plan]:
    from aorta_tui.recipe import load_recipe
    from aorta_tui.sweep.plan import build_plan

    recipe = load_recipe(recipe_path, registry=registry)
    return recipe, build_plan(recipe, registry)


# -- starting ------------------------------------------------------------------------------
def start(req: AgentRequest) -> tuple[Path, dict[str, dict[str, str]]]:
    """Check everything, then create the agent's directory; nothing runs before this returns.
    Returns it and the secret ``--env-candidate`` values, which are never written: the caller
    hands them to :func:`run`."""
    check_goal(req.goal)
    if req.budget < 1:
        raise UsageError(f"--budget {req.budget}: at least 1 trial",
                         hint="the budget counts trials, the baseline's included, e.g. --budget 64")
    if req.per_iteration < 1:
        raise UsageError(f"--per-iteration {req.per_iteration}: at least 1 cell")
    llm = _llm_settings(req)
    registry = _registry(req.mitigation_files)
    recipe, plan = _plan(req.recipe, registry)
    if recipe.mode == "probe" and not req.command and not getattr(recipe, "command", None):
        raise UsageError("a probe recipe needs the command to run after `--`",
                         hint="aorta-tui agent probe.yaml -- bash launch.sh")
    from aorta_tui.agent import env_candidates

    settings = env_candidates.parse(req.env_candidates)
    secrets = env_candidates.secret_values(settings)
    _refuse_written_secrets(recipe, secrets)
    candidates = _candidates(req, registry, settings)
    _check_budget_and_output(req, plan)
    agent_dir, env_sidecar = _create_agent_dir(req, recipe.ticket or "untitled", settings)  # as the sweep names it
    state = AgentState(
        status="running", created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), proposer=req.proposer,
        llm=llm, goal=req.goal, budget=req.budget, per_iteration=req.per_iteration,
        trials_used=0, recipe="recipe.yaml", recipe_source=str(req.recipe), mode=recipe.mode,
        command=tuple(req.command), output=str(req.output.resolve()),
        candidates=tuple(candidates),
        mitigation_files=tuple(str(f.resolve()) for f in [*req.mitigation_files, *env_sidecar]),
        no_snapshot=req.no_snapshot,
        # name -> variable of each secret setting; its value is in memory only (a resume
        # asks for it again)
        secret_candidates={name: next(iter(env)) for name, env in secrets.items()})
    save(agent_dir, state)
    return agent_dir, secrets


def _llm_settings(req: AgentRequest) -> LlmSettings | None:
    """The llm proposer's settings, checked (its client installed, the gate); None: builtin."""
    llm: LlmSettings | None = None
    if req.proposer == "llm":
        from aorta_tui.agent import llm as llm_mod

        given = llm_mod.settings(req.llm_model, req.llm_base_url)
        if not req.llm_timeout > 0 or req.llm_timeout != req.llm_timeout:
            raise UsageError(f"--llm-timeout {req.llm_timeout:g}: expected a number of seconds "
                             "above 0", hint="--llm-timeout 120 (the whole request's deadline)")
        llm = LlmSettings(model=str(given["model"]), base_url=given["base_url"],
                          timeout_s=req.llm_timeout)
        llm_mod.require_client()
        check_gate(req.yes)
    elif req.proposer != "builtin":
        raise UsageError(f"--proposer {req.proposer!r}: expected builtin or llm")
    return llm


def _candidates(req: AgentRequest, registry: Registry, settings: dict[str, tuple[str, str]]) -> list[str]:
    """The mitigations to search (each one known), then the --env-candidate settings."""
    candidates = req.candidates if req.candidates is not None else sorted(
        n for n in registry.mitigations if n != "none")
    for name in candidates:
        registry.mitigation(name)  # an unknown name is a UsageError with a did-you-mean
    taken = [n for n in settings if n in registry.mitigations]
    if taken:
        raise UsageError(f"--env-candidate: {taken[0]} is already a registered mitigation's name",
                         hint="rename that mitigation in its sidecar")
    return [*candidates, *settings]


def _check_budget_and_output(req: AgentRequest, plan: Plan) -> None:
    """The budget covers the baseline's trials; --output is (or can be) a directory."""
    if len(plan.trials) > req.budget:
        # the least the agent takes is the baseline's trials (it then stops: budget spent);
        # each proposed cell costs one cell's trials more
        per_cell = max(1, len(plan.trials) // max(1, len(plan.cells)))
        raise UsageError(f"--budget {req.budget}: the baseline recipe alone runs "
                         f"{len(plan.trials)} trials, so the least budget is {len(plan.trials)}",
                         hint=f"--budget {len(plan.trials)} or more (the baseline only); each "
                              f"cell the agent tries costs {per_cell} more, e.g. --budget "
                              f"{len(plan.trials) + 8 * per_cell} for one iteration of 8 cells")
    if not req.output.exists() and not req.output.parent.is_dir():
        raise UsageError(f"--output {req.output}: the directory {req.output.parent} does not exist")
    if req.output.exists() and not req.output.is_dir():
        raise UsageError(f"--output {req.output} is not a directory")


def _create_agent_dir(req: AgentRequest, ticket: str, settings: dict[str, tuple[str, str]],
                      ) -> tuple[Path, list[Path]]:
    """OUTPUT/<ticket>/agent-<id>/ with the recipe as given (0600) and the env sidecar."""
    from aorta_tui.agent import env_candidates
    from aorta_tui.core.atomic import atomic_write_bytes
    from aorta_tui.store.naming import new_run_id, safe_component

    agent_dir = req.output / safe_component(ticket) / f"agent-{new_run_id()}"
    try:
        agent_dir.mkdir(parents=True, exist_ok=True)
        # the recipe as given (it may hold a secret's value in extra_env: mode 0600)
        atomic_write_bytes(agent_dir / "recipe.yaml", req.recipe.read_bytes(), mode=0o600)
        env_sidecar = [env_candidates.write_sidecar(agent_dir, settings)] if settings else []
    except OSError as exc:
        raise EnvironmentProblem(f"{exc.filename or agent_dir}: cannot write: "
                                 f"{exc.strerror or exc}", hint="pick another --output") from None
    return agent_dir, env_sidecar


def _refuse_written_secrets(recipe: Recipe, secrets: dict[str, dict[str, str]]) -> None:
    """A secret setting's value is kept in memory only; two recipe settings would write every
    trial variable into the run: probe.env (``env_passthrough_mode: file``) and a Slurm
    trial's job spec (``executor: slurm``: the job reads its environment from that file)."""
    if not secrets:
        return
    var = next(iter(next(iter(secrets.values()))))
    if getattr(recipe, "env_passthrough_mode", None) == "file":
        raise UsageError(f"--env-candidate {var}=...: a secret's value is kept in memory only, "
                         "and this recipe's env_passthrough_mode: file writes every variable "
                         "into probe.env", hint="use env_passthrough_mode: inherit, or set the "
                         "secret in the recipe's extra_env (written to probe.env, mode 0600)")
    if getattr(getattr(recipe, "executor", None), "kind", "local") == "slurm":
        raise UsageError(f"--env-candidate {var}=...: a secret's value is kept in memory only, "
                         "and this recipe's executor: slurm writes each trial's environment "
                         "into its job spec in the run", hint="run the agent with the local "
                         "executor, or set the secret in the recipe's extra_env (written to "
                         "the job spec, mode 0600)")


def check_gate(yes: bool) -> None:
    """The llm proposer asks before each run: that needs a terminal, or --yes."""
    if not yes and not sys.stdin.isatty():
        raise UsageError("--proposer llm asks before running each proposal, and stdin is not a "
                         "terminal", hint="pass --yes to run its proposals without asking")


def load_state(agent_dir: Path) -> AgentState:
    """agent.json through its one reader: a damaged one is a located error (exit 2)."""
    path = agent_dir / "agent.json"
    if not path.is_file():
        raise UsageError(f"{agent_dir} is not an agent directory (no agent.json)",
                         hint="pass <output>/<ticket>/agent-<id>, printed when the agent started")
    return AgentState.from_json(path)


def save(agent_dir: Path, state: AgentState) -> AgentState:
    """Write agent.json (the one serializer) and agent.md, each atomically."""
    from aorta_tui.agent.page import render_markdown
    from aorta_tui.core.atomic import atomic_write_json, atomic_write_text

    atomic_write_json(agent_dir / "agent.json", state.to_json())
    atomic_write_text(agent_dir / "agent.md", render_markdown(state))
    return state


def _ignore(_event: Event) -> None:
    return None


class _Record:
    """The loop's state as it goes and where it is kept. Each step puts a new value here
    (the values are frozen); :meth:`save` writes it. How the loop stops (Ctrl-C, an error) is
    recorded over the last value put, saved or not, so agent.json says how far it got."""

    def __init__(self, agent_dir: Path, state: AgentState, emit: Callable[[Event], None]) -> None:
        self.agent_dir = agent_dir
        self.state = state
        self.emit = emit
        self.run_id = agent_dir.name  # agent-<id>: every event of this agent carries it

    def put(self, it: Iteration) -> Iteration:
        self.state = self.state.put_iteration(it)
        return it

    def iteration(self, index: int) -> Iteration:
        """The iteration of ``index`` as last put (a step may have replaced the caller's)."""
        return next(it for it in self.state.iterations if it.index == index)

    def save(self) -> AgentState:
        return save(self.agent_dir, self.state)

    def progress(self, message: str) -> None:
        """A step as a person reads it; the trials used of the budget as the progress."""
        self.emit(Progress(self.run_id, done=self.state.trials_used, total=self.state.budget,
                           message=message))

    def finished(self, status: str, exit_code: int, **summary: object) -> None:
        """The stream's last event: agent.json's document whole in ``summary["result"]``."""
        self.emit(RunFinished(self.run_id, status=status, exit_code=exit_code,
                              summary={**summary, "result": self.state.to_json()}))


# -- the loop ------------------------------------------------------------------------------
def run(agent_dir: Path, on_event: Callable[[Event], None] = _ignore, *, yes: bool = False,
        confirm: Callable[[str], bool] | None = None,
        secrets: dict[str, dict[str, str]] | None = None,
        resume_settings: list[str] | None = None) -> AgentState:
    """Run (or continue) the loop until the goal, the budget or the end of the proposals.
    ``on_event`` gets the agent's events (docs/cli.md): ``run_started`` first, a progress per
    iteration started and finished, the iterations' sweeps' warnings, ``run_finished`` last
    (also when it stops on Ctrl-C or an error, before that goes on up).
    ``secrets``: the secret settings' values (from :func:`start`); a resume gives them again
    as ``resume_settings`` (``--env-candidate VAR=VALUE``)."""
    typed = load_state(agent_dir)
    rec = _Record(agent_dir, typed, on_event)
    on_event(RunStarted(rec.run_id, source="agent", run_dir=str(agent_dir.resolve()),
                        total=typed.budget,
                        resumed=bool(typed.iterations), already_done=typed.trials_used))
    if typed.status in FINISHED:
        rec.progress(f"agent already finished ({typed.status}): {agent_dir / 'agent.md'}")
        rec.finished("completed", 0)
        return typed
    if secrets is None:
        from aorta_tui.agent import env_candidates

        secrets = env_candidates.resume_values(typed.secret_candidates, resume_settings or [],
                                               agent_dir)
    gated = typed.proposer == "llm" and not yes
    if gated:
        check_gate(yes)
    rec.state = replace(typed, status="running")  # a resume after an error or a Ctrl-C runs again
    try:
        _loop(rec, gated, confirm, secrets)
    except KeyboardInterrupt:
        _stopped(rec, "interrupted", "interrupted (Ctrl-C); --resume continues")
        rec.finished("interrupted", int(ExitCode.INTERRUPTED))
        raise
    except AortaError as exc:  # agent.json says how it ended, never "running"
        _stopped(rec, "error", exc.message)
        rec.emit(RunWarning(rec.run_id, message=exc.render(), code="error"))
        rec.finished("failed", int(exc.exit_code), error=exc.render())
        raise
    rec.finished("completed", 0)
    return rec.state


def _stopped(rec: _Record, status: str, why: str) -> None:
    """Record how the loop stopped (not a finish: ``--resume`` goes on from here)."""
    from aorta_tui.agent.llm import inert

    rec.state = replace(rec.state, status=status, stop_reason=inert(why, 500))
    with contextlib.suppress(OSError, AortaError):  # the error being raised says more
        rec.save()


def _loop(rec: _Record, gated: bool, confirm: Callable[[str], bool] | None,
          secrets: dict[str, dict[str, str]]) -> None:
    goal = check_goal(rec.state.goal)
    registry = _registry([Path(f) for f in rec.state.mitigation_files], secrets)
    while True:
        it = _next_iteration(rec, registry, secrets)
        if it is None:
            break
        if gated and it.index > 0 and it.status == "planned" and \
                not (confirm or ask)(_describe(it)):
            why = f"proposal {it.index} declined at the approval gate"
            state = replace(rec.state, iterations=rec.state.iterations[:-1], status="declined",
                            stop_reason=why)
            rec.state = replace(state, recommendation=_no_recommendation(state, why))
            break
        it = _run_iteration(rec, it, secrets)
        it = _read_iteration(rec, it, goal)
        rec.save()
        best = min(it.cells, key=lambda c: (score(c), c.cell or "")) if it.cells else None
        rec.progress(f"iteration {it.index}: {len(it.cells)} cells, {it.trials} trials "
                     f"({rec.state.trials_used}/{rec.state.budget} used); "
                     + (f"best {best.cell}: {cell_figures(best)}" if best else "no cells"))
        if it.run_dir:  # the iteration's sweep and its matrix, for a script to open
            rec.emit(ResultWritten(rec.run_id, path=str(Path(it.run_dir) / "matrix.json"),
                                   what="matrix.json"))
        if _finish_if_done(rec, it):
            break
    rec.save()


def _next_iteration(rec: _Record, registry: Registry,
                    secrets: dict[str, dict[str, str]]) -> Iteration | None:
    its = rec.state.iterations
    if its and its[-1].status in ("running", "interrupted"):
        return its[-1]  # cut short: continue it (its sweep resumes from its journal)
    index = len(its)
    it: Iteration | None
    if index == 0:
        it = Iteration(index=0, status="planned", recipe="recipe.yaml", run_dir=None,
                       note="the baseline: the recipe as given")
    else:
        it = _propose(rec, registry, index, secrets)
        if it is None:
            return None
    rec.put(it)
    rec.save()
    return it


def _describe(it: Iteration) -> str:
    lines = [f"iteration {it.index}: {it.note}"]
    lines += [f"  {' + '.join(c)}: {why}" for c, why in zip(it.proposed, it.reasons,
                                                             strict=False)]
    return "\n".join(lines)


def ask(text: str, out: TextIO | None = None) -> bool:
    """The approval gate's question on ``out`` (stdout unless the caller's stdout is a document:
    ``agent --json`` asks on stderr), the answer from stdin."""
    stream = out if out is not None else sys.stdout
    stream.write(f"{text}\nrun these cells? [y/N] ")
    stream.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")  # "" at end of input: no


def _trials_per_cell(state: AgentState) -> int:
    base = state.baseline
    return max(1, int((base.trials if base is not None else None) or 1))


def _propose(rec: _Record, registry: Registry, index: int,
             secrets: dict[str, dict[str, str]]) -> Iteration | None:
    """The next iteration, planned and checked (its recipe written); None when the proposer
    has nothing more or the budget cannot pay for it (``rec.state`` then says why)."""
    state, agent_dir = rec.state, rec.agent_dir
    per_cell = _trials_per_cell(state)
    left = state.budget - state.trials_used
    slots = min(state.per_iteration, left // per_cell)
    tried = {tuple(sorted(c.mitigations)): c for it in state.iterations for c in it.cells}

    def conflicts(a: str, b: str) -> bool:
        ea, eb = registry.mitigation(a).env, registry.mitigation(b).env
        return any(k in eb and eb[k] != v for k, v in ea.items())

    if state.proposer == "llm" and slots > 0:
        proposal = _llm_propose(agent_dir, state, registry, tried, conflicts, slots, index)
    else:
        proposal = builtin_propose(state.candidates, tried, conflicts, slots)
    if not proposal.cells:
        rec.state = replace(state, status="budget_spent" if slots <= 0 else "exhausted",
                            stop_reason=proposal.note,
                            recommendation=_no_recommendation(state, proposal.note))
        return None
    for cell in proposal.cells:  # a proposal is checked before anything runs
        for name in cell:
            registry.mitigation(name)
        for a, b in [(a, b) for i, a in enumerate(cell) for b in cell[i + 1:]]:
            if conflicts(a, b):
                raise UsageError(f"the proposer suggested {a} + {b}, which set one variable to "
                                 "different values; nothing was run")
    name = f"iter-{index:02d}.yaml"
    _write_iteration_recipe(agent_dir, state, proposal.cells, agent_dir / name)
    sidecar = (agent_dir / name).with_suffix(".mitigations.json")
    files = [Path(f) for f in state.mitigation_files] + ([sidecar] if sidecar.is_file() else [])
    # the engine's own validation (the pair sidecar holds masks: the iteration's values fill them)
    _recipe, plan = _plan(agent_dir / name, _registry(files, _iteration_secrets(
        secrets, proposal.cells)))
    if state.trials_used + len(plan.trials) > state.budget:
        why = f"the next iteration needs {len(plan.trials)} trials, over the budget"
        rec.state = replace(state, status="budget_spent", stop_reason=why,
                            recommendation=_no_recommendation(state, why))
        (agent_dir / name).unlink()
        sidecar.unlink(missing_ok=True)
        return None
    return Iteration(index=index, status="planned", recipe=name, run_dir=None,
                     proposed=tuple(tuple(c) for c in proposal.cells),
                     reasons=tuple(proposal.reasons), note=proposal.note)


def _llm_propose(agent_dir: Path, state: AgentState, registry: Registry,
                 tried: dict[tuple[str, ...], CellResult], conflicts: Conflicts, slots: int,
                 index: int) -> Proposal:
    from aorta_tui.agent import llm
    from aorta_tui.agent.records import LlmRecord
    from aorta_tui.core.atomic import atomic_write_json

    request = llm.build_request(state, registry, tried, slots)
    path = agent_dir / f"llm-{index:02d}.json"
    atomic_write_json(path, LlmRecord(request, None).to_json())
    answer = None
    try:
        assert state.llm is not None  # build_request refused a state without its settings
        answer = llm.ask(state.llm, request)
        atomic_write_json(path, LlmRecord(request, answer).to_json())
        return llm.parse_answer(answer, state.candidates, tried, conflicts, slots)
    except llm.NotAProposal as exc:  # kept as evidence (JSON-escaped: inert in the file)
        atomic_write_json(path, LlmRecord(request, answer, not_a_proposal=exc.message,
                                          raw_answer=exc.raw if answer is None else None
                                          ).to_json())
        raise
    except llm.BadProposal as exc:  # a proposal that will not run: kept with why
        atomic_write_json(path, LlmRecord(request, answer, bad_proposal=exc.message).to_json())
        raise


def _write_iteration_recipe(agent_dir: Path, state: AgentState,
                            cells: list[tuple[str, ...]], path: Path) -> None:
    import yaml

    from aorta_tui.core.atomic import atomic_write_bytes
    from aorta_tui.recipe.loader import parse_yaml_text

    data, _marks = parse_yaml_text((agent_dir / state.recipe).read_text(encoding="utf-8"))
    data.pop("stop_after", None)
    confound = data.get("confound")
    if isinstance(confound, dict):
        confound.pop("baseline_cell", None)  # the baseline ran in iteration 0
    if state.mode == "probe":
        # a probe cell is one mitigation (x one diagnostic): a pair goes in as one combined
        # mitigation of a sidecar file the iteration's sweep loads
        data["mitigation_axis"] = [PAIR_JOIN.join(c) for c in cells]
        pairs = [c for c in cells if len(c) > 1]
        if pairs:
            _write_pair_sidecar(path.with_suffix(".mitigations.json"), pairs,
                                [Path(f) for f in state.mitigation_files])
    else:
        base = _baseline_cell_spec(data, state)
        data["cells"] = [{**base, "name": PAIR_JOIN.join(c),
                          "mitigations": sorted((set(base.get("mitigations") or []) - {"none"})
                                                | set(c))}
                         for c in cells]
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    atomic_write_bytes(path, text.encode("utf-8"), mode=0o600)


def _iteration_secrets(secrets: dict[str, dict[str, str]], cells: Sequence[Sequence[str]]
                       ) -> dict[str, dict[str, str]]:
    """The secret values an iteration's mitigations need: each secret setting by its name,
    and a probe pair ``a--b`` (a mitigation of its own) by the pair's name."""
    out = dict(secrets)
    for cell in cells:
        parts = [secrets[n] for n in cell if n in secrets]
        if len(cell) > 1 and parts:
            out[PAIR_JOIN.join(cell)] = {k: v for env in parts for k, v in env.items()}
    return out


def _write_pair_sidecar(path: Path, pairs: list[tuple[str, ...]], files: list[Path]) -> None:
    from aorta_tui.core.atomic import atomic_write_json

    registry = _registry(files)  # unfilled: a secret setting's value stays the mask here
    atomic_write_json(path, pair_sidecar(pairs, registry).to_json())


def pair_sidecar(pairs: list[tuple[str, ...]], registry: Registry) -> MitigationsSidecar:
    """A probe iteration's pairs, each one combined mitigation ``a--b``: both variables, both
    switches (sorted), and a description naming the two."""
    from aorta_tui.agent.records import MitigationsSidecar, SidecarEntry
    from aorta_tui.recipe.checks import mitigation_env

    entries = []
    for pair in pairs:
        ms = [registry.mitigation(n) for n in pair]
        entries.append(SidecarEntry(PAIR_JOIN.join(pair), mitigation_env(ms),
                                    "agent: " + " + ".join(pair),
                                    tuple(sorted({s for m in ms for s in m.switches}))))
    return MitigationsSidecar(tuple(entries))


def mitigation_set(mitigations: Sequence[str]) -> list[str]:
    """A cell's mitigations, a combined pair ``a--b`` of a probe iteration split again."""
    return sorted(n for m in mitigations for n in str(m).split(PAIR_JOIN)
                  if n != "none")  # `none` adds nothing: [none, x] is the single x


def _baseline_cell_spec(data: dict[str, Any], state: AgentState) -> dict[str, Any]:
    cells = [c for c in data.get("cells") or [] if isinstance(c, dict)]
    want = state.baseline.cell if state.baseline is not None else None
    for c in cells:
        if c.get("name") == want:
            return {k: v for k, v in c.items() if k != "name"}
    return {k: v for k, v in (cells[0] if cells else {}).items() if k != "name"}


def _run_iteration(rec: _Record, it: Iteration, secrets: dict[str, dict[str, str]]
                   ) -> Iteration:
    """Run (or resume) the iteration's sweep in a process of its own, to its end."""
    argv, pipe = _sweep_argv(rec, it, secrets)
    it = rec.put(replace(it, status="running"))
    rec.save()
    rec.progress(f"iteration {it.index}: {it.note}")
    try:
        proc = spawn_gate.popen(argv, stdout=subprocess.PIPE, text=True, encoding="utf-8",
                                errors="replace", pass_fds=(pipe,) if pipe is not None else ())
    finally:
        if pipe is not None:
            os.close(pipe)  # the child holds its own copy
    try:
        it = _follow_sweep(rec, it, proc)
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.wait()  # the sweep got the same Ctrl-C: it stops its trial and keeps its journal
        rec.put(replace(rec.iteration(it.index), status="interrupted"))
        rec.save()
        raise
    if rc == ExitCode.INTERRUPTED:
        rec.put(replace(it, status="interrupted"))
        rec.save()
        raise KeyboardInterrupt
    if rc not in (0, 1) or not it.run_dir:
        rec.put(replace(it, status="failed"))
        rec.save()
        raise AortaError(f"iteration {it.index}: the sweep exited {rc}",
                         hint=f"see its message above; `aorta-tui agent --resume {rec.agent_dir}` "
                              "tries again", exit_code=ExitCode(rc) if rc in (2, 3) else None)
    return it


def _sweep_argv(rec: _Record, it: Iteration, secrets: dict[str, dict[str, str]]
                ) -> tuple[list[str], int | None]:
    """The iteration's sweep as a request file and the command that runs it, and the pipe
    (if any) that hands it the secret values."""
    from aorta_tui.sweep.way_in import SweepRequest, write_request

    state, agent_dir = rec.state, rec.agent_dir
    resume = Path(it.run_dir) if it.run_dir and Path(it.run_dir).is_dir() else None
    sidecar = (agent_dir / it.recipe).with_suffix(".mitigations.json")
    pipe = None
    if secrets:  # in memory only: through an inherited pipe, never a file or an argument
        from aorta_tui.core.secrets import send_secret_values

        pipe = send_secret_values(_iteration_secrets(secrets, it.proposed))
    req = SweepRequest(
        recipe=agent_dir / it.recipe, resume=resume,
        mitigation_files=[Path(f) for f in [*state.mitigation_files,
                                            *([str(sidecar)] if sidecar.is_file() else [])]],
        snapshots=not state.no_snapshot, command=list(state.command or []),
        # a new run of the iteration goes where the agent keeps its runs (a resume: the run's)
        output=Path(state.output) if resume is None else Path(DEFAULT_OUTPUT),
        secret_values_fd=pipe)
    request_file = (agent_dir / it.recipe).with_suffix(".request.json")  # iter-NN.request.json
    write_request(req, request_file)
    # an engine entry point, not the command line (sweep/child.py): the same sweep, its events
    # as JSON lines on stdout
    return [sys.executable, "-m", "aorta_tui.sweep.child", str(request_file)], pipe


def _follow_sweep(rec: _Record, it: Iteration, proc: subprocess.Popen[str]) -> Iteration:
    """Read the sweep's event lines: its run directory recorded as soon as it is known, its
    warnings passed on as the agent's (naming the iteration)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        ev = _event(line)
        if ev.get("event") == "run_started" and isinstance(ev.get("run_dir"), str):
            it = rec.put(replace(it, run_dir=str(Path(ev["run_dir"]).resolve())))
            rec.save()
        elif ev.get("event") == "warning" and isinstance(ev.get("message"), str):
            code = ev.get("code")
            rec.emit(RunWarning(rec.run_id, message=f"iteration {it.index}: {ev['message']}",
                                code=code if isinstance(code, str) else ""))
    return it


def _event(line: str) -> dict[str, Any]:
    try:
        ev = json.loads(line)
    except ValueError:
        return {}
    return ev if isinstance(ev, dict) else {}


def _read_iteration(rec: _Record, it: Iteration, goal: Condition) -> Iteration:
    """The iteration's sweep read in: each cell's figures and whether it meets the goal, its
    trials counted as used; iteration 0's baseline cell becomes the baseline."""
    from aorta_tui.sweep.matrix_doc import read_matrix

    assert it.run_dir is not None  # _run_iteration refused a sweep that named none
    matrix = read_matrix(it.run_dir)  # typed: a damaged matrix is a located exit 2
    if it.index == 0:
        name = matrix.baseline_cell or (matrix.cells[0].name if matrix.cells else None)
        base = matrix.cell(name)
        if base is None:
            raise AortaError("the baseline sweep has no cells")
        figures = _figures(base, None)
        # kept before the check, so the agent.json of the error names the cell it read
        rec.state = replace(rec.state, baseline=Baseline(
            cell=name, run_dir=it.run_dir, **figures,
            mitigations=tuple(mitigation_set(base.mitigations))))
        if not _has_rates(rec.state.baseline):
            raise AortaError(f"the baseline cell {name} finished no trial: there is nothing to "
                             "compare a mitigation with", hint=f"see {it.run_dir}/matrix.md")
    baseline = rec.state.baseline
    base_mean = baseline.step_time_mean_s if baseline is not None else None
    cells = []
    for c in matrix.cells:
        cell = CellResult(cell=c.name, mitigations=tuple(mitigation_set(c.mitigations)),
                          run_dir=it.run_dir, **_figures(c, base_mean))
        meets = _has_rates(cell) and bool(goal.evaluate({k: getattr(cell, k) for k in GOAL_NAMES}))
        cells.append(replace(cell, meets_goal=meets))
    it = replace(it, cells=tuple(cells), trials=sum(c.stats.trials for c in matrix.cells),
                 status="done")
    rec.state = replace(rec.state, trials_used=rec.state.trials_used + it.trials)
    return rec.put(it)


def _has_rates(fig: Figures | None) -> bool:
    return fig is not None and fig.failure_rate is not None and fig.error_rate is not None


def _figures(cell: MatrixCell, base_mean: float | None) -> dict[str, Any]:
    stats = cell.stats
    mean = stats.step_time.get("mean")
    ratio = mean / base_mean if isinstance(mean, (int, float)) and base_mean else None
    # a cell with no finished trial has no rates (None in matrix.json): kept None, never 0.0,
    # or a cell that ran nothing would meet "failure_rate == 0"
    return {"trials": stats.trials, "failure_rate": stats.failure_rate,
            "error_rate": stats.error_rate, "step_time_mean_s": mean,
            "step_time_p50_s": stats.step_time.get("p50"), "step_time_ratio": ratio}


def _finish_if_done(rec: _Record, it: Iteration) -> bool:
    """Whether the loop ends after ``it``; if so ``rec.state`` says how and what to apply."""
    state = rec.state
    base = state.baseline
    assert base is not None  # iteration 0 made it (or raised)
    if it.index == 0:
        base_cell = next(c for c in it.cells if c.cell == base.cell)
        if base_cell.meets_goal:
            rec.state = replace(state, status="baseline_meets_goal", recommendation=Recommendation(
                mitigations=(), cell=base.cell, confidence=None,
                evidence=_evidence(base_cell, base),
                reason="the baseline already meets the goal: nothing to mitigate"))
            return True
    winners = [c for c in it.cells if c.meets_goal and c.cell != base.cell]
    if not winners:
        if state.trials_used >= state.budget:
            rec.state = replace(state, status="budget_spent",
                                recommendation=_no_recommendation(state, "the budget is spent"))
            return True
        return False
    best = min(winners, key=lambda c: (len(c.mitigations), score(c), c.cell or ""))
    n = int(best.trials or 0)
    assert base.failure_rate is not None and base.error_rate is not None  # _has_rates held
    p = base.failure_rate + base.error_rate
    confidence = round(1 - (1 - min(p, 1.0)) ** n, 4) if p > 0 else None
    rec.state = replace(state, status="goal_met", recommendation=Recommendation(
        mitigations=best.mitigations, cell=best.cell, confidence=confidence,
        confidence_meaning=(f"1 - (1 - {p:.3g})^{n}: the chance that {n} trials at the "
                            "baseline's failure-or-error rate would not all have met the goal"
                            if confidence is not None else "the baseline did not fail: "
                            "the goal is about speed; no failure-rate confidence"),
        evidence=_evidence(best, base),
        reason=f"{best.cell} met the goal `{state.goal}` in iteration {it.index}"))
    return True


def _evidence(cell: CellResult, base: Baseline) -> Evidence:
    return Evidence(
        EvidenceFigures(run_dir=cell.run_dir, trials=cell.trials,
                        failure_rate=cell.failure_rate, error_rate=cell.error_rate,
                        step_time_ratio=cell.step_time_ratio,
                        step_time_p50_s=cell.step_time_p50_s),
        # the baseline's own ratio is 1 by definition: not kept
        EvidenceFigures(run_dir=base.run_dir, trials=base.trials,
                        failure_rate=base.failure_rate, error_rate=base.error_rate,
                        step_time_ratio=None, step_time_p50_s=base.step_time_p50_s,
                        cell=base.cell))


def _no_recommendation(state: AgentState, why: str) -> Recommendation:
    base = state.baseline
    cells = [c for it in state.iterations for c in it.cells
             if base is not None and c.cell != base.cell]
    best = min(cells, key=lambda c: (score(c), c.cell or "")) if cells else None
    text = f"no cell met the goal `{state.goal}`: {why}"
    if best is not None:
        text += f"; the closest was {best.cell} ({cell_figures(best)})"
    return Recommendation(mitigations=(), cell=None, confidence=None,
                          evidence=_evidence(best, base) if best is not None and base is not None
                          else None, reason=text)
