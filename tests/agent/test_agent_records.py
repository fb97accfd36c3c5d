"""The agent's files besides agent.json as typed values (agent/records.py): the llm proposer's
``llm-NN.json`` and the two mitigations side-cars (``--env-candidate``'s and a probe
iteration's pairs). Each writer writes the bytes the untyped one did (its code copied below,
verbatim, with hypothesis-drawn inputs), a record reads back to itself, a damaged one is a
located UsageError (exit 2), an oversize one is refused unread; a side-car reads back, through
the sweep's own reader, to the value written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aorta_tui.agent import env_candidates, llm
from aorta_tui.agent.loop import PAIR_JOIN, pair_sidecar
from aorta_tui.agent.records import (
    LlmMessage,
    LlmRecord,
    LlmRequest,
    MitigationsSidecar,
    SidecarEntry,
)
from aorta_tui.agent.state import AgentState, Baseline, CellResult, LlmSettings
from aorta_tui.core.atomic import atomic_write_json, json_bytes
from aorta_tui.core.errors import ExitCode, UsageError
from aorta_tui.core.inputs import INPUT_LIMITS
from aorta_tui.core.secrets import MASK, is_secret_name, mask_env
from aorta_tui.recipe.checks import mitigation_env
from aorta_tui.registry.registry import Mitigation

_text = st.text(max_size=12)  # hypothesis draws no lone surrogate by default
_opt = st.none() | _text
_requests = st.builds(LlmRequest, model=_text, messages=st.lists(
    st.builds(LlmMessage, role=_text, content=_text), max_size=3).map(tuple))


# -- llm-NN.json --------------------------------------------------------------------------------

def _old_records(request: dict[str, Any], answer: str | None, message: str, raw: str
                 ) -> list[dict[str, Any]]:
    # verbatim: agent/loop.py _llm_propose before the type (the four objects it wrote)
    return [{"request": request, "answer": None},
            {"request": request, "answer": answer},
            {"request": request, "answer": answer,
             "not_a_proposal": message,
             "raw_answer": raw if answer is None else None},
            {"request": request, "answer": answer,
             "bad_proposal": message}]


@settings(max_examples=100, deadline=None)
@given(_requests, _opt, _text, _text)
def test_the_record_writer_writes_the_untyped_writers_bytes(
        request: LlmRequest, answer: str | None, message: str, raw: str) -> None:
    new = [LlmRecord(request, None), LlmRecord(request, answer),
           LlmRecord(request, answer, not_a_proposal=message,
                     raw_answer=raw if answer is None else None),
           LlmRecord(request, answer, bad_proposal=message)]
    old = _old_records(request.to_json(), answer, message, raw)
    assert [json_bytes(r.to_json()) for r in new] == [json_bytes(o) for o in old]


class _Registry:
    def __init__(self, mitigations: dict[str, Mitigation]) -> None:
        self.mitigations = mitigations

    def mitigation(self, name: str) -> Mitigation:
        return self.mitigations[name]


def _old_build_request(state: dict[str, Any], registry: Any, tried: dict[tuple[str, ...], Any],
                       slots: int) -> dict[str, Any]:
    # verbatim: agent/llm.py build_request before the type
    candidates = {n: mask_env(registry.mitigation(n).env) for n in state["candidates"]}
    keep = ("failure_rate", "error_rate", "trials", "step_time_ratio", "step_time_p50_s")
    tried_rows = [{"mitigations": list(k), **{f: v.get(f) for f in keep}} for k, v in tried.items()]
    user = {"goal": state["goal"], "slots": slots, "candidates": candidates,
            "tried": tried_rows, "baseline": {f: (state.get("baseline") or {}).get(f) for f in keep}}
    return {"model": state["llm"]["model"],
            "messages": [{"role": "system", "content": llm.SYSTEM},
                         {"role": "user", "content": json.dumps(user, sort_keys=True)}]}


_names = st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), min_size=1, max_size=3,
                  unique=True)
_figures = st.fixed_dictionaries({}, optional={
    "failure_rate": st.none() | st.floats(0, 1), "error_rate": st.floats(0, 1),
    "trials": st.integers(0, 9), "step_time_ratio": st.floats(0, 3)})


@settings(max_examples=100, deadline=None)
@given(_names, _text, _text, st.integers(0, 9), st.lists(_figures, max_size=3),
       st.none() | _figures)
def test_the_request_is_the_untyped_builders(names: list[str], goal: str, model: str, slots: int,
                                             figures: list[dict[str, Any]],
                                             baseline: dict[str, Any] | None) -> None:
    registry = _Registry({n: Mitigation(n, {"HF_TOKEN" if i else "V": n}) for i, n in
                          enumerate(names)})
    state = {"candidates": names, "goal": goal, "llm": {"model": model}, "baseline": baseline}
    tried = {(n,): f for n, f in zip(names, figures, strict=False)}  # some not tried yet
    # the same state and cells as the typed values the loop now hands it
    typed = AgentState(status="running", created="", proposer="llm",
                       llm=LlmSettings(model, None), goal=goal, budget=1, per_iteration=1,
                       trials_used=0, recipe="", recipe_source="", mode="probe", command=(),
                       output="", candidates=tuple(names), mitigation_files=(),
                       no_snapshot=False,
                       baseline=None if baseline is None else Baseline(
                           cell=None, run_dir=None, **_typed_figures(baseline)))
    typed_tried = {k: CellResult(cell=None, mitigations=k, run_dir=None, **_typed_figures(f))
                   for k, f in tried.items()}
    new = llm.build_request(typed, registry, typed_tried, slots)  # type: ignore[arg-type]
    assert json_bytes(new.to_json()) == json_bytes(_old_build_request(state, registry, tried, slots))


def _typed_figures(figures: dict[str, Any]) -> dict[str, Any]:
    names = ("trials", "failure_rate", "error_rate", "step_time_mean_s", "step_time_p50_s",
             "step_time_ratio")
    return {n: figures.get(n) for n in names}


_records = st.builds(LlmRecord, request=_requests, answer=_opt, not_a_proposal=_opt,
                     raw_answer=st.none(), bad_proposal=_opt, extra=st.dictionaries(
                         _text.filter(lambda k: k not in {"request", "answer", "not_a_proposal",
                                                          "raw_answer", "bad_proposal"}),
                         _opt, max_size=2))


@settings(max_examples=100, deadline=None)
@given(_records)
def test_any_record_reads_back_to_itself(record: LlmRecord) -> None:
    assert LlmRecord.from_json(json.loads(json_bytes(record.to_json())), "llm-01.json") == record


def _valid() -> dict[str, Any]:
    request = LlmRequest("m", (LlmMessage("system", "s"), LlmMessage("user", "u")))
    return LlmRecord(request, "{}", bad_proposal="why").to_json()


@pytest.mark.parametrize(("path", "value", "words"), [
    (("request",), None, "request: expected an object"),
    (("request", "model"), 3, "request.model: expected a string"),
    (("request", "messages"), {}, "request.messages: expected an array"),
    (("request", "messages", 1), "u", "request.messages[1]: expected an object"),
    (("answer",), 1, "answer: expected a string or null"),
    (("bad_proposal",), [], "bad_proposal: expected a string or null"),
])
def test_a_damaged_record_is_located(path: tuple[Any, ...], value: object, words: str) -> None:
    data = _valid()
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(UsageError) as got:
        LlmRecord.from_json(data, "a/llm-01.json")
    assert str(got.value).startswith(f"a/llm-01.json: {words}")
    assert got.value.exit_code == ExitCode.USAGE


def test_a_record_file_reads_back_to_its_bytes_and_an_oversize_one_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "llm-01.json"
    atomic_write_json(path, {**_valid(), "later": {"k": 1}})  # a newer writer's key: kept
    record = LlmRecord.read(path)
    assert record.extra == {"later": {"k": 1}} and record.bad_proposal == "why"
    assert json_bytes(record.to_json()) == path.read_bytes()
    monkeypatch.setitem(INPUT_LIMITS, "agent llm record", 64)
    with pytest.raises(UsageError, match="over the 64 B limit"):
        LlmRecord.read(path)


# -- the side-cars --------------------------------------------------------------------------------

_vars = st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True) | st.sampled_from(
    ["HF_TOKEN", "DB_PASSWORD"])
_settings = st.dictionaries(st.from_regex(r"env\.[A-Za-z0-9_.]{1,10}", fullmatch=True),
                            st.tuples(_vars, st.text(st.characters(min_codepoint=32,
                                                                   max_codepoint=0x2FFF),
                                                     max_size=8)), max_size=3)


def _old_env_sidecar(candidates: dict[str, tuple[str, str]]) -> bytes:
    # verbatim: agent/env_candidates.py write_sidecar before the type (the bytes it wrote)
    doc = {name: {"env": {var: MASK if is_secret_name(var) else value},
                  "description": f"agent candidate: sets {var}"}
           for name, (var, value) in candidates.items()}
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(_settings)
def test_the_env_sidecar_is_the_untyped_writers_bytes(candidates: dict[str, tuple[str, str]]
                                                      ) -> None:
    assert json_bytes(env_candidates.sidecar(candidates).to_json()) == _old_env_sidecar(candidates)


def _old_pair_sidecar(pairs: list[tuple[str, ...]], registry: Any) -> dict[str, Any]:
    # verbatim: agent/loop.py _write_pair_sidecar before the type (the object it wrote; its
    # registry, built there from the files, is the argument here)
    out = {}
    for pair in pairs:
        ms = [registry.mitigation(n) for n in pair]
        switches = sorted({s for m in ms for s in m.switches})
        out[PAIR_JOIN.join(pair)] = {"env": mitigation_env(ms), "switches": switches,
                                     "description": "agent: " + " + ".join(pair)}
    return out


_switch = st.sampled_from(["torch.tf32_off", "a", "b"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_vars, _text, st.lists(_switch, max_size=2)), min_size=2, max_size=4,
                unique_by=lambda t: t[0]), st.data())
def test_the_pair_sidecar_is_the_untyped_writers_bytes(specs: list[tuple[str, str, list[str]]],
                                                       data: st.DataObject) -> None:
    registry = _Registry({f"m{i}": Mitigation(f"m{i}", {var: value}, tuple(sw))
                          for i, (var, value, sw) in enumerate(specs)})
    names = sorted(registry.mitigations)
    pairs = data.draw(st.lists(st.lists(st.sampled_from(names), min_size=2, max_size=2,
                                        unique=True).map(tuple), max_size=3))
    new = pair_sidecar(pairs, registry)  # type: ignore[arg-type]
    assert json_bytes(new.to_json()) == json_bytes(_old_pair_sidecar(pairs, registry))


def test_the_sidecars_read_back_through_the_sweeps_reader(tmp_path: Path) -> None:
    settings = {"env.NCCL_ALGO.Ring": ("NCCL_ALGO", "Ring"), "env.HF_TOKEN.secret-1": ("HF_TOKEN", "x")}
    path = env_candidates.write_sidecar(tmp_path, settings)
    read = MitigationsSidecar.read(path, switches=False)
    assert read == env_candidates.sidecar(settings) and json_bytes(read.to_json()) == path.read_bytes()
    assert read.entries[1].env == {"HF_TOKEN": MASK}  # the value is never written
    pairs = MitigationsSidecar((SidecarEntry("a--b", {"A": "1", "B": "2"}, "agent: a + b",
                                             ("torch.tf32_off",)),))
    atomic_write_json(tmp_path / "iter-01.mitigations.json", pairs.to_json())
    assert MitigationsSidecar.read(tmp_path / "iter-01.mitigations.json", switches=True) == pairs
    (tmp_path / "bad.json").write_text('{"a--b": {"env": {"A": 1}}}')
    with pytest.raises(UsageError, match=r"bad\.json:1:\d+: entry a--b: env"):
        MitigationsSidecar.read(tmp_path / "bad.json", switches=True)
