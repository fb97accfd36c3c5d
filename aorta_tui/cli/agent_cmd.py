"""`aorta-tui agent RECIPE [-- CMD ...]`: search for the mitigation in a loop of sweeps."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from aorta_tui.cli.common import cli_command, count, err, seconds
from aorta_tui.core.numerals import MAX_CELLS, MAX_TRIALS
from aorta_tui.store.naming import DEFAULT_OUTPUT

if TYPE_CHECKING:
    from aorta_tui.agent.state import AgentState
    from aorta_tui.core.events import Event

_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": False}


@cli_command
def agent(
    ctx: typer.Context,
    recipe: Path | None = typer.Argument(  # noqa: UP007 - typer needs Optional on 3.10
        None, help="The recipe whose baseline starts the search (not with --resume)."),
    goal: str = typer.Option("failure_rate == 0 and error_rate == 0", "--goal",
                             help="When a cell is good enough: an expression over failure_rate, "
                                  "error_rate, trials, step_time_ratio, step_time_p50_s."),
    budget: int = typer.Option(64, "--budget", parser=count(at_least=0, at_most=MAX_TRIALS), metavar="N", help="Trials in all, the baseline's included "
                               "(at least the baseline recipe's trial count)."),
    per_iteration: int = typer.Option(8, "--per-iteration", parser=count(at_most=MAX_CELLS), metavar="N", help="Most cells per iteration."),
    proposer: str = typer.Option("builtin", "--proposer",
                                 help="builtin (deterministic) or llm (an OpenAI-compatible chat "
                                      "model through the openai client; asks before each run)."),
    llm_model: str | None = typer.Option(  # noqa: UP007
        None, "--llm-model", help="The llm proposer's model (default $AORTA_LLM_MODEL)."),
    llm_base_url: str | None = typer.Option(  # noqa: UP007
        None, "--llm-base-url", help="Its server (default $OPENAI_BASE_URL; key $OPENAI_API_KEY)."),
    llm_timeout: float = typer.Option(
        120.0, "--llm-timeout", metavar="SECONDS", parser=seconds(),
        help="The deadline of each whole request to the llm server (not of each read)."),
    candidates: str | None = typer.Option(  # noqa: UP007
        None, "--candidates", help="Comma-separated mitigations to search (default: every "
                                   "registered one)."),
    env_candidate: list[str] = typer.Option(  # noqa: B008
        [], "--env-candidate", metavar="VAR=VALUE",
        help="An environment setting to try like a mitigation (repeatable): a cell named "
             "env.VAR.VALUE sets it; pairs never set one variable twice."),
    mitigations_file: list[Path] = typer.Option(  # noqa: B008
        [], "--mitigations-file", help="Sidecar JSON of extra mitigations (repeatable)."),
    output: Path = typer.Option(Path(DEFAULT_OUTPUT), "-o", "--output",  # noqa: B008
                                help="The parent directory: sweeps go to "
                                     "OUTPUT/<ticket>/<run-id>/, the agent's record "
                                     "(agent.json, agent.md) to OUTPUT/<ticket>/agent-<id>/."),
    resume: Path | None = typer.Option(  # noqa: UP007
        None, "--resume", metavar="AGENT_DIR", help="Continue an agent that was interrupted."),
    no_snapshot: bool = typer.Option(False, "--no-snapshot", help="Skip environment snapshots."),
    yes: bool = typer.Option(False, "--yes", help="Run the llm proposer's proposals without "
                                                  "asking (the builtin proposer never asks)."),
    as_json: bool = typer.Option(
        False, "--json", help="One JSON event per line on stdout: run_started (the agent's "
                              "directory) first, a progress line per iteration started and "
                              "finished, run_finished last with agent.json whole in "
                              "summary.result (failed, with the exit code, when it stops on an "
                              "error). Questions and messages go to stderr."),
) -> None:
    """Run the recipe's baseline, then let a proposer pick the next cells (single mitigations
    first, then pairs of the best), each iteration an ordinary sweep in the same ticket, until a
    cell meets the goal or the budget is spent. agent.md / agent.json record every iteration and
    end with the recommendation.

    Examples:

      aorta-tui agent probe.yaml --budget 40 -- bash launch.sh

      aorta-tui agent recipes/training.yaml --goal "failure_rate == 0 and step_time_ratio < 1.1"

      aorta-tui agent probe.yaml --env-candidate NCCL_ALGO=Ring --env-candidate HSA_ENABLE_SDMA=0 -- sh run.sh

      aorta-tui agent --resume aorta-out/T-1/agent-20261201-101500-ab12
    """
    _run_agent(list(ctx.args), _AgentOptions(
        recipe=recipe, goal=goal, budget=budget, per_iteration=per_iteration, proposer=proposer,
        llm_model=llm_model, llm_base_url=llm_base_url, llm_timeout=llm_timeout,
        candidates=candidates, env_candidate=list(env_candidate),
        mitigations_file=list(mitigations_file), output=output, resume=resume,
        no_snapshot=no_snapshot, yes=yes, as_json=as_json))


@dataclass(frozen=True)
class _AgentOptions:
    """The `agent` command's options, as typer parsed them."""

    recipe: Path | None
    goal: str
    budget: int
    per_iteration: int
    proposer: str
    llm_model: str | None
    llm_base_url: str | None
    llm_timeout: float
    candidates: str | None
    env_candidate: list[str]
    mitigations_file: list[Path]
    output: Path
    resume: Path | None
    no_snapshot: bool
    yes: bool
    as_json: bool


def _run_agent(command: list[str], o: _AgentOptions) -> None:
    """Start (or resume) the agent, run it to the end, print its outcome: as lines for a
    person, or with --json as the event stream (docs/cli.md)."""
    if o.as_json:
        _event_lines(command, o)
        return
    state, agent_dir = _start_and_run(command, o, _print_event, say=print)
    rec = state.recommendation
    print(f"agent {state.status}: {rec.reason if rec is not None else ''}")
    if rec is not None and rec.mitigations:
        print(f"  recommendation: {', '.join(rec.mitigations)} (confidence "
              f"{rec.confidence})")
    print(f"  {agent_dir / 'agent.md'}")


def _start_and_run(command: list[str], o: _AgentOptions, on_event: Callable[[Event], None],
                   say: Callable[[str], None]) -> tuple[AgentState, Path]:
    """The agent created from RECIPE (or the one --resume names), then its loop; ``say`` gets
    the line naming its directory and the resume command."""
    from aorta_tui.agent import loop
    from aorta_tui.core.errors import UsageError

    secrets = None  # a resume gives the secret --env-candidate values again (docs/agent.md)
    if o.resume is not None:
        if o.recipe is not None:
            raise UsageError("--resume continues an agent: give no RECIPE with it")
        agent_dir = o.resume
    else:
        if o.recipe is None:
            raise UsageError("missing RECIPE", hint="aorta-tui agent probe.yaml -- CMD ...")
        names = [c.strip() for c in o.candidates.split(",") if c.strip()] if o.candidates else None
        req = loop.AgentRequest(recipe=o.recipe, command=command, goal=o.goal, budget=o.budget,
                                per_iteration=o.per_iteration, output=o.output, candidates=names,
                                env_candidates=list(o.env_candidate),
                                mitigation_files=list(o.mitigations_file),
                                no_snapshot=o.no_snapshot, proposer=o.proposer,
                                llm_model=o.llm_model, llm_base_url=o.llm_base_url,
                                llm_timeout=o.llm_timeout, yes=o.yes)
        agent_dir, secrets = loop.start(req)
        again = "".join(f" --env-candidate {next(iter(env))}=..." for env in secrets.values())
        say(f"agent: {agent_dir} (resume with: aorta-tui agent --resume {agent_dir}{again})")
    # with --json the approval gate asks on stderr: stdout is the event lines' alone
    confirm = (lambda text: loop.ask(text, sys.stderr)) if o.as_json else None
    state = loop.run(agent_dir, on_event, yes=o.yes, confirm=confirm, secrets=secrets,
                     resume_settings=list(o.env_candidate))
    return state, agent_dir


def _print_event(event: Event) -> None:
    """The agent's events for a person: each step's line and the warnings (an error is the
    CLI's message on stderr, not a warning here)."""
    from aorta_tui.core.events import Progress, RunWarning

    if isinstance(event, Progress):
        print(event.message, flush=True)
    elif isinstance(event, RunWarning) and event.code != "error":
        print(f"warning: {event.message}", flush=True)


def _event_lines(command: list[str], o: _AgentOptions) -> None:
    """`agent --json`: the agent's events, one line each, as every long command's --json is:
    the loop's own ``run_started`` first and ``run_finished`` last (agent.json whole in its
    ``summary.result``). A run refused before the loop began (bad input, exit 2) gets both
    here: ``run_started``, then a ``warning`` and a failed ``run_finished`` with the code."""
    from aorta_tui.cli.stream_end import EndedStream, ends_typed
    from aorta_tui.cli.trace_stream import open_stream

    # fd 1 becomes stderr: nothing else can land between the lines; the loop says its own
    # run_started and run_finished, a run refused before the loop gets them here
    stream = EndedStream("agent", refusal_id=o.resume.name if o.resume is not None else "agent",
                         sink=open_stream(), total=o.budget,
                         run_dir=o.resume.resolve() if o.resume is not None else None)
    with ends_typed(stream):
        _start_and_run(command, o, stream.emit, say=err)
