"""The optional LLM proposer: asks a chat model (through the ``openai`` client, which speaks to
any OpenAI-compatible server) for the next cells, and checks its answer before anything runs.

What it sends: the goal, the candidate mitigations with the variables they set (the
registry's public values), every cell tried so far with its figures, and how many cells fit
the budget. Never the command, the recipe's ``extra_env`` or a run's logs. Each request and
answer is saved in the agent's directory (``llm-NN.json``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from aorta_tui.agent.proposer import Proposal
from aorta_tui.core.errors import EnvironmentProblem, UsageError

EXTRA_HINT = "pip install 'aorta-tui[agent-llm]' (or: pip install 'openai>=1')"
SYSTEM = (
    "You help triage GPU workload failures. You pick the next cells of a sweep: each cell is "
    "a set of mitigations (names from the candidate list only) that will run as new trials. "
    "Answer with one JSON object and nothing else: "
    '{"cells": [["mitigation", ...], ...], "reasons": ["why this cell", ...]} '
    "with at most `slots` cells, none already tried, one reason per cell. "
    'Answer {"cells": [], "reasons": [], "note": "why"} to stop.')


def settings(model: str | None, base_url: str | None) -> dict[str, str | None]:
    model = model or os.environ.get("AORTA_LLM_MODEL")
    if not model:
        raise UsageError("--proposer llm needs a model", hint="--llm-model NAME (or set "
                         "AORTA_LLM_MODEL); the server is OPENAI_BASE_URL or --llm-base-url")
    return {"model": model, "base_url": base_url or os.environ.get("OPENAI_BASE_URL")}


def require_client() -> Any:
    try:
        import openai
    except ImportError:
        raise EnvironmentProblem("the llm proposer needs the openai client library, which is "
                                 "not installed", hint=EXTRA_HINT) from None
    return openai


def build_request(state: dict[str, Any], registry: Any, tried: dict[tuple[str, ...], Any],
                  slots: int) -> dict[str, Any]:
    candidates = {n: dict(registry.mitigation(n).env) for n in state["candidates"]}
    keep = ("failure_rate", "error_rate", "trials", "step_time_ratio", "step_time_p50_s")
    tried_rows = [{"mitigations": list(k), **{f: v.get(f) for f in keep}} for k, v in tried.items()]
    user = {"goal": state["goal"], "slots": slots, "candidates": candidates,
            "tried": tried_rows, "baseline": {f: (state.get("baseline") or {}).get(f) for f in keep}}
    return {"model": state["llm"]["model"],
            "messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": json.dumps(user, sort_keys=True)}]}


def ask(state: dict[str, Any], request: dict[str, Any]) -> str:
    openai = require_client()
    client = openai.OpenAI(base_url=state["llm"]["base_url"],
                           api_key=os.environ.get("OPENAI_API_KEY") or "unset", max_retries=0,
                           timeout=120)
    try:
        reply = client.chat.completions.create(model=request["model"], messages=request["messages"])
    except openai.OpenAIError as exc:
        raise EnvironmentProblem(f"the llm proposer's server did not answer: {exc}",
                                 hint="check --llm-base-url / OPENAI_BASE_URL and the model") from None
    return str(reply.choices[0].message.content or "")


def parse_answer(text: str, candidates: list[str], tried: dict[tuple[str, ...], Any],
                 conflicts: Any, slots: int) -> Proposal:
    """The answer as a proposal, or a UsageError saying what is wrong with it (nothing runs)."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        doc = json.loads(body)
    except ValueError:
        raise UsageError("the llm proposer's answer is not JSON; nothing was run",
                         hint=f"its answer began: {text[:120]!r}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise UsageError("the llm proposer's answer has no `cells` list; nothing was run")
    cells: list[tuple[str, ...]] = []
    for i, cell in enumerate(doc["cells"]):
        if not isinstance(cell, list) or not cell or not all(isinstance(m, str) for m in cell):
            raise UsageError(f"the llm proposer's cells[{i}] is not a list of mitigation names; "
                             "nothing was run")
        for m in cell:
            if m not in candidates:
                raise UsageError(f"the llm proposer suggested {m!r}, which is not a candidate "
                                 "mitigation; nothing was run",
                                 hint=f"candidates: {', '.join(candidates)}")
        for a in cell:
            for b in cell:
                if a < b and conflicts(a, b):
                    raise UsageError(f"the llm proposer suggested {a} + {b}, which set one "
                                     "variable to different values; nothing was run")
        key = tuple(sorted(set(cell)))
        if key in tried or key in cells:
            raise UsageError(f"the llm proposer suggested {' + '.join(key)} again; nothing was run")
        cells.append(key)
    if len(cells) > slots:
        raise UsageError(f"the llm proposer suggested {len(cells)} cells, over the {slots} the "
                         "budget allows; nothing was run")
    reasons = doc.get("reasons") if isinstance(doc.get("reasons"), list) else []
    reasons = [str(r) for r in reasons][: len(cells)]
    reasons += ["(no reason given)"] * (len(cells) - len(reasons))
    note = str(doc.get("note") or f"the llm proposer picked {len(cells)} cells")
    return Proposal(cells, reasons, note)
