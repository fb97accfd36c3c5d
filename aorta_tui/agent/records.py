"""The agent's files besides ``agent.json`` (``state.py``), as typed values.

- :class:`LlmRecord`: ``llm-NN.json``, the llm proposer's request and what came back (the
  answer, or why it was not a proposal or would not run), kept as evidence. One serializer
  (:meth:`LlmRecord.to_json`, the object the untyped writer wrote, key order included) and one
  reader (:meth:`LlmRecord.read`: at most ``INPUT_LIMITS[LLM_WHAT]`` bytes, every field's type
  checked, damage a located UsageError naming the file and the field; keys a newer writer
  added kept in ``extra``).
- :class:`MitigationsSidecar`: the mitigations side-cars the agent writes for its sweeps: the
  ``--env-candidate`` settings (``env-candidates.mitigations.json``) and a probe iteration's
  pairs (``iter-NN.mitigations.json``). One serializer (:meth:`MitigationsSidecar.to_json`);
  its reader is the sweep's own (``registry.load_sidecar_mitigations``, which reads every
  ``--mitigations-file``: size-limited, located to the line), so the agent reads the file as
  the sweep that runs it will, not by a second reader that could disagree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from aorta_tui.core.inputs import INPUT_LIMITS, FieldReader, Json, load_json_input

if TYPE_CHECKING:
    from aorta_tui.registry.registry import Mitigation

LLM_WHAT = "agent llm record"
_LLM_HINT = "llm-NN.json is written by `aorta-tui agent --proposer llm`; it is evidence only"
_LLM_KEYS = ("request", "answer", "not_a_proposal", "raw_answer", "bad_proposal")


@dataclass(frozen=True)
class LlmMessage:
    role: str  # system or user
    content: str


@dataclass(frozen=True)
class LlmRequest:
    """What the agent sent the chat server (``llm.build_request`` makes it)."""

    model: str
    messages: tuple[LlmMessage, ...]

    def to_json(self) -> dict[str, Json]:
        return {"model": self.model,
                "messages": [{"role": m.role, "content": m.content} for m in self.messages]}


@dataclass(frozen=True)
class LlmRecord:
    """``llm-NN.json``: written with ``answer`` None before the request, again with the answer,
    and again with why it was refused (``not_a_proposal`` or ``bad_proposal``, never both)."""

    request: LlmRequest
    answer: str | None  # the answer's text; None: none came (yet), or it had no text
    # why the server's answer was not a proposal (llm.NotAProposal); None: it was one
    not_a_proposal: str | None = None
    # the start of a body that was not a proposal (written with not_a_proposal; None there
    # when the answer's text was saved instead)
    raw_answer: str | None = None
    bad_proposal: str | None = None  # why a proposal would not run (llm.BadProposal)
    extra: dict[str, Json] = field(default_factory=dict)  # keys a newer writer added

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    def to_json(self) -> dict[str, Json]:
        """The object the file holds (``core.atomic.atomic_write_json`` writes it)."""
        out: dict[str, Json] = {"request": self.request.to_json(), "answer": self.answer}
        if self.not_a_proposal is not None:  # raw_answer goes with it, null or not
            out["not_a_proposal"] = self.not_a_proposal
            out["raw_answer"] = self.raw_answer
        if self.bad_proposal is not None:
            out["bad_proposal"] = self.bad_proposal
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: object, where: str) -> LlmRecord:
        """Read a parsed record; a damaged one is a located UsageError (exit 2)."""
        f = FieldReader(where, LLM_WHAT)
        d = f.obj(data, "(top level)")
        r = f.obj_at(d, "request", "", required=True)
        messages = tuple(_read_message(f, m, f"request.messages[{i}]")
                         for i, m in enumerate(f.array_at(r, "messages", "request")))
        return cls(request=LlmRequest(f.text(r, "model", "request", required=True), messages),
                   answer=f.opt_text(d, "answer", ""),
                   not_a_proposal=f.opt_text(d, "not_a_proposal", ""),
                   raw_answer=f.opt_text(d, "raw_answer", ""),
                   bad_proposal=f.opt_text(d, "bad_proposal", ""),
                   extra={k: v for k, v in d.items() if k not in _LLM_KEYS})

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> LlmRecord:
        """A record file: at most ``INPUT_LIMITS[LLM_WHAT]`` bytes (looked up at each read) of
        a regular file, then every field checked."""
        data = load_json_input(path, what=LLM_WHAT, limit=INPUT_LIMITS[LLM_WHAT], hint=_LLM_HINT)
        return cls.from_json(data, os.fspath(path))


def _read_message(f: FieldReader, value: object, path: str) -> LlmMessage:
    d = f.obj(value, path)
    return LlmMessage(f.text(d, "role", path, required=True),
                      f.text(d, "content", path, required=True))


@dataclass(frozen=True)
class SidecarEntry:
    """A mitigation of a side-car: its variables (a secret's value is the mask), its switches
    (None: not written, as the ``--env-candidate`` side-car has none) and its description."""

    name: str
    env: dict[str, str]
    description: str
    switches: tuple[str, ...] | None = None

    __hash__ = None  # type: ignore[assignment]  # a dict field: never a dict key

    def to_json(self) -> dict[str, Json]:
        out: dict[str, Json] = {"env": dict(self.env)}
        if self.switches is not None:
            out["switches"] = list(self.switches)
        out["description"] = self.description
        return out


@dataclass(frozen=True)
class MitigationsSidecar:
    """A side-car of mitigations by name (``{"name": {"env": ..., ...}}``), as the agent
    writes it for ``--mitigations-file``."""

    entries: tuple[SidecarEntry, ...]

    def to_json(self) -> dict[str, Json]:
        return {e.name: e.to_json() for e in self.entries}

    @classmethod
    def of(cls, mitigations: list[Mitigation], *, switches: bool) -> MitigationsSidecar:
        """The side-car of ``mitigations`` (``switches``: written, as a pair side-car does)."""
        return cls(tuple(SidecarEntry(m.name, dict(m.env), m.description,
                                      tuple(m.switches) if switches else None)
                         for m in mitigations))

    @classmethod
    def read(cls, path: str | os.PathLike[str], *, switches: bool) -> MitigationsSidecar:
        """The side-car as the sweep reads it (see the module's docstring): a damaged one is a
        located UsageError (exit 2)."""
        from aorta_tui.registry.registry import load_sidecar_mitigations

        return cls.of(load_sidecar_mitigations(Path(path)), switches=switches)
