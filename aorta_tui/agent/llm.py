"""The optional LLM proposer: asks a chat model (through the ``openai`` client, which speaks to
any OpenAI-compatible server) for the next cells, and checks its answer before anything runs.

What it sends: the goal, the candidate mitigations with the variables they set (the
registry's public values), every cell tried so far with its figures, and how many cells fit
the budget. Never the command, the recipe's ``extra_env`` or a run's logs. Each request and
answer is saved in the agent's directory (``llm-NN.json``).

The server may be hostile. Its answer is read as bytes and checked here, not by the client's
models: a body that is not UTF-8, not JSON, nested too deep, without ``choices`` or without a
text ``content`` is "not a proposal" (exit 3, nothing run, the recipe's runs kept). The whole
request has a deadline (``--llm-timeout``), not each read: a server that trickles one chunk
every 20 s cannot hold the agent. Any text of its answer that is printed (``reasons``,
``note``) is made inert first (:func:`inert`): escapes shown, not obeyed; one line each.
"""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any, cast

from aorta_tui.agent.proposer import Conflicts, Proposal
from aorta_tui.agent.records import LlmMessage, LlmRequest
from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.core.secrets import mask_env
from aorta_tui.core.text import inert as text_inert

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from types import ModuleType

    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageParam

    from aorta_tui.agent.state import AgentState, CellResult, LlmSettings
    from aorta_tui.registry.registry import Registry

DEFAULT_TIMEOUT_S = 120.0
# What of a server's text is printed: each reason or note on one line, at most this long.
MAX_TEXT_CHARS = 200
MAX_RAW_SAVED = 64 * 1024  # of a body that was not a proposal, kept in llm-NN.json
# the most of an answer's body read (decompressed): a chat completion is a few kB
MAX_BODY_BYTES = 8 * 1024 * 1024
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


def require_client() -> ModuleType:
    """The ``openai`` module (its names are read as the client library has them)."""
    try:
        import openai
    except ImportError:
        raise EnvironmentProblem("the llm proposer needs the openai client library, which is "
                                 "not installed", hint=EXTRA_HINT) from None
    return openai


def build_request(state: AgentState, registry: Registry,
                  tried: Mapping[tuple[str, ...], CellResult], slots: int) -> LlmRequest:
    # a secret-named variable's value (--env-candidate HF_TOKEN=...) is never sent: its name
    # and the mask stand for it
    if state.llm is None:  # a hand-edited agent.json: proposer llm, its settings gone
        raise UsageError("agent.json: proposer llm without its llm settings (model, server)",
                         hint="start the agent again with --proposer llm --llm-model NAME")
    candidates = {n: mask_env(registry.mitigation(n).env) for n in state.candidates}
    keep = ("failure_rate", "error_rate", "trials", "step_time_ratio", "step_time_p50_s")
    tried_rows = [{"mitigations": list(k), **{f: getattr(v, f) for f in keep}}
                  for k, v in tried.items()]
    base = state.baseline
    user = {"goal": state.goal, "slots": slots, "candidates": candidates, "tried": tried_rows,
            "baseline": {f: getattr(base, f) if base is not None else None for f in keep}}
    return LlmRequest(state.llm.model, (
        LlmMessage("system", SYSTEM), LlmMessage("user", json.dumps(user, sort_keys=True))))


class NotAProposal(EnvironmentProblem):
    """The server answered something that is not a chat completion carrying text (exit 3)."""

    def __init__(self, why: str, raw: bytes = b"") -> None:
        super().__init__(f"the server's answer was not a proposal: {why}; nothing was run",
                         hint="check --llm-base-url / OPENAI_BASE_URL: it must speak the "
                              "OpenAI chat completions API; the recipe's runs are kept")
        self.raw = raw[:MAX_RAW_SAVED].decode("utf-8", "replace")


class BadProposal(EnvironmentProblem):
    """The answer is a proposal the agent will not run: a name that is not a candidate, a cell
    tried already, too many cells. Exit 3 like any answer that is not a proposal: the
    server's answer is not the user's input, and the recipe's runs are kept."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint or "the recipe's runs are kept; `aorta-tui agent "
                                               "--resume AGENT_DIR` asks the server again")


def ask(llm: LlmSettings, request: LlmRequest) -> str:
    """The text of the server's answer, within the request's deadline."""
    openai = require_client()
    timeout_s = float(llm.timeout_s or DEFAULT_TIMEOUT_S)
    # no redirect is followed: a 3xx is refused and named (the request body, the goal and
    # the tried cells, would otherwise go to whatever host the server names)
    client = openai.OpenAI(base_url=llm.base_url,
                           api_key=os.environ.get("OPENAI_API_KEY") or "unset", max_retries=0,
                           timeout=timeout_s,
                           http_client=openai.DefaultHttpxClient(follow_redirects=False,
                                                                 timeout=timeout_s))
    got: dict[str, Any] = {}

    def call() -> None:  # the client's timeout is per read: the deadline is this thread's join
        try:
            got["body"] = _read_capped(client, request)
        except BaseException as exc:  # handed to the caller's thread as it is
            got["error"] = exc

    worker = threading.Thread(target=call, name="llm-request", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        client.close()  # the abandoned request's socket; the daemon thread ends with it
        raise EnvironmentProblem(f"the llm proposer's server did not answer within "
                                 f"{timeout_s:g} s (the whole request's deadline); nothing "
                                 "was run", hint="--llm-timeout SECONDS gives it longer; check "
                                 "--llm-base-url / OPENAI_BASE_URL")
    error = got.get("error")
    if isinstance(error, openai.APIStatusError) and 300 <= error.status_code < 400:
        where = inert(error.response.headers.get("location", "(no Location)"))
        raise EnvironmentProblem(f"the llm proposer's server redirected the request to {where} "
                                 f"(HTTP {error.status_code}): not followed, nothing was sent "
                                 "there and nothing was run",
                                 hint="point --llm-base-url / OPENAI_BASE_URL at the final "
                                      "address; the recipe's runs are kept") from None
    if isinstance(error, openai.OpenAIError):
        raise EnvironmentProblem(f"the llm proposer's server did not answer: {inert(str(error))}",
                                 hint="check --llm-base-url / OPENAI_BASE_URL and the model") from None
    if error is not None:
        raise error
    return answer_text(got["body"])


def _read_capped(client: OpenAI, request: LlmRequest) -> bytes:
    """The answer's body, read as a stream and counted after decompression: past
    :data:`MAX_BODY_BYTES` it is not a proposal (an endless body, a gzip bomb)."""
    chunks: list[bytes] = []
    size = 0
    with client.chat.completions.with_streaming_response.create(
            model=request.model,
            # the client's typed dicts, with the roles build_request gives (system, user)
            messages=cast("list[ChatCompletionMessageParam]", request.to_json()["messages"]),
            ) as response:
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise NotAProposal(f"its body is over {MAX_BODY_BYTES} bytes (counted "
                                   "decompressed); the rest was not read", b"".join(chunks))
            chunks.append(chunk)
    return b"".join(chunks)


def answer_text(body: bytes) -> str:
    """The ``choices[0].message.content`` of a chat completion's body, or NotAProposal."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotAProposal(f"its body is not UTF-8 (byte {exc.start})", body) from None
    try:
        doc = json.loads(text)
    except RecursionError:
        raise NotAProposal("its body is JSON nested too deep", body) from None
    except ValueError as exc:  # JSONDecodeError, or a number past Python's digit limit
        why = f"{exc.msg} at {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise NotAProposal(f"its body is not JSON ({why})", body) from None
    if not isinstance(doc, dict):
        raise NotAProposal(f"its body is {_json_kind(doc)}, not a chat completion object", body)
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices:
        what = "missing" if "choices" not in doc else f"{_json_kind(choices)}"
        raise NotAProposal(f"its `choices` is {what}, not a list of at least one choice", body)
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise NotAProposal("its choices[0].message.content is not text", body)
    return content


def _json_kind(value: object) -> str:
    from aorta_tui.core.inputs import json_type_name

    return "an empty array" if value == [] else json_type_name(value)


def inert(text: object, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` safe to print (core/text.py), at most ``limit`` characters."""
    return text_inert(text, limit)


def parse_answer(text: str, candidates: Sequence[str], tried: Mapping[tuple[str, ...], object],
                 conflicts: Conflicts, slots: int) -> Proposal:
    """The answer as a proposal, or a :class:`BadProposal` saying what is wrong with it
    (nothing runs)."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        doc = json.loads(body)
    except RecursionError:
        raise NotAProposal("its content is JSON nested too deep", text.encode()) from None
    except ValueError:
        raise BadProposal("the llm proposer's answer is not JSON; nothing was run",
                         hint=f"its answer began: {text[:120]!r}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise BadProposal("the llm proposer's answer has no `cells` list; nothing was run")
    cells: list[tuple[str, ...]] = []
    for i, cell in enumerate(doc["cells"]):
        if not isinstance(cell, list) or not cell or not all(isinstance(m, str) for m in cell):
            raise BadProposal(f"the llm proposer's cells[{i}] is not a list of mitigation names; "
                             "nothing was run")
        for m in cell:
            if m not in candidates:
                raise BadProposal(f"the llm proposer suggested {inert(m, 80)!r}, which is not a "
                                 "candidate mitigation; nothing was run",
                                 hint=f"candidates: {', '.join(candidates)}")
        for a in cell:
            for b in cell:
                if a < b and conflicts(a, b):
                    raise BadProposal(f"the llm proposer suggested {a} + {b}, which set one "
                                     "variable to different values; nothing was run")
        key = tuple(sorted(set(cell)))
        if key in tried or key in cells:
            raise BadProposal(f"the llm proposer suggested {' + '.join(key)} again; nothing was run")
        cells.append(key)
    if len(cells) > slots:
        raise BadProposal(f"the llm proposer suggested {len(cells)} cells, over the {slots} the "
                         "budget allows; nothing was run")
    given = doc.get("reasons")
    # stored and printed inert
    reasons = [inert(r) for r in given][: len(cells)] if isinstance(given, list) else []
    reasons += ["(no reason given)"] * (len(cells) - len(reasons))
    note = inert(doc.get("note") or f"the llm proposer picked {len(cells)} cells")
    return Proposal(cells, reasons, note)
