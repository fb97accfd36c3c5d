"""The loop's every agent.json write, byte for byte, against what the loop wrote before its
state became typed values (issue 36 item 3).

Each case runs the real loop (builtin proposer, probe recipes on CPU, each iteration's sweep in
its own process) and records every write of agent.json, in order. The fixture
(``fixtures/loop-bytes/<case>.json``) holds the same record made by the loop of commit 4f6d99f,
when it still mutated a dict by key; what differs from run to run (the temporary directory, run
ids, the creation time) is normalised the same way on both sides.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from aorta_tui.agent import loop
from aorta_tui.core import atomic
from aorta_tui.core.errors import AortaError
from aorta_tui.sweep import matrix_doc

pytestmark = pytest.mark.slow  # real sweeps in child processes

FIXTURES = Path(__file__).parent / "fixtures" / "loop-bytes"
RECIPE = ("schema_version: 1\nmode: probe\nticket: T-AG\ntrials: 1\ntimeout_per_trial: 30\n"
          "mitigation_axis: [none]\ndiagnostic_axis: [none]\n")
CANDIDATES = ["amd_log_level_4", "hip_launch_blocking", "hsa_no_sdma", "xnack"]
PAIR = '[ "$HSA_ENABLE_SDMA" = 0 ] && [ "$HSA_XNACK" = 1 ] || exit 3'
# name -> (script, candidates, budget, per_iteration)
CASES: dict[str, tuple[str, list[str], int, int]] = {
    # two singles: one pair (the pairs' order follows the singles' timed ranking)
    "pairs_goal_met": (PAIR, ["hsa_no_sdma", "xnack"], 30, 4),
    "budget_spent": ("exit 3", CANDIDATES, 3, 2),
    "exhausted": ("exit 3", ["hsa_disable_cache", "hsa_enable_cache"], 20, 8),
    "baseline_meets_goal": ("exit 0", CANDIDATES, 5, 8),
}
# name -> what stops the first run as iteration 1's matrix is read (a resume then finishes it)
STOPS: dict[str, type[BaseException]] = {
    "interrupted_then_resumed": KeyboardInterrupt,
    "error_then_resumed": AortaError,
}
RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}")
CREATED = re.compile(r'"created": "[^"]*"')
# measured step times (and a proposal's reason quoting their ratio) differ from run to run
TIMES = re.compile(r'("step_time_(?:mean_s|p50_s|ratio)": )-?[0-9][0-9.e+-]*')
RATIO = re.compile(r"step time x[0-9.]+")


def _normalise(data: bytes, tmp: Path, ids: dict[str, str]) -> str:
    text = data.decode("utf-8").replace(str(tmp.resolve()), "<TMP>").replace(str(tmp), "<TMP>")
    text = CREATED.sub('"created": "<CREATED>"', text)
    text = RATIO.sub("step time x<R>", TIMES.sub(r'\1"<T>"', text))
    return RUN_ID.sub(lambda m: ids.setdefault(m.group(0), f"<RUN-{len(ids)}>"), text)


def _spy_writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every agent.json written from now on, as its bytes, in order."""
    writes: list[bytes] = []
    real = atomic.atomic_write_json

    def spy(path: str | os.PathLike[str], obj: object, **kw: object) -> Path:
        if Path(path).name == "agent.json":
            writes.append(atomic.json_bytes(obj))
        return real(path, obj, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic, "atomic_write_json", spy)
    return writes


def _start(tmp: Path, script: str, candidates: list[str], budget: int, per_iteration: int
           ) -> tuple[Path, dict[str, dict[str, str]]]:
    (tmp / "probe.yaml").write_text(RECIPE)
    req = loop.AgentRequest(recipe=tmp / "probe.yaml", command=["sh", "-c", script],
                            budget=budget, per_iteration=per_iteration, output=tmp / "out",
                            candidates=list(candidates), no_snapshot=True)
    return loop.start(req)


def record_case(tmp: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every agent.json the loop writes for ``case``, in order, normalised."""
    writes = _spy_writes(monkeypatch)
    agent_dir, secrets = _start(tmp, *CASES[case])
    loop.run(agent_dir, lambda _event: None, secrets=secrets)
    ids: dict[str, str] = {}
    return [_normalise(w, tmp, ids) for w in writes]


def record_stopped_case(tmp: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A loop stopped as it reads iteration 1 (Ctrl-C, or an error), then resumed to its end:
    every agent.json of both runs."""
    writes = _spy_writes(monkeypatch)
    agent_dir, secrets = _start(tmp, '[ "$HSA_ENABLE_SDMA" = 0 ] || exit 3',
                                ["hip_launch_blocking", "hsa_no_sdma"], 20, 1)
    real, reads = matrix_doc.read_matrix, []

    def stop_at_iteration_1(run_dir: str | os.PathLike[str]) -> matrix_doc.Matrix:
        reads.append(run_dir)
        if len(reads) == 2:
            raise STOPS[case]("stopped by the test")
        return real(run_dir)

    monkeypatch.setattr(matrix_doc, "read_matrix", stop_at_iteration_1)
    with pytest.raises(STOPS[case]):
        loop.run(agent_dir, lambda _event: None, secrets=secrets)
    monkeypatch.setattr(matrix_doc, "read_matrix", real)
    loop.run(agent_dir, lambda _event: None)  # --resume: the state read back from agent.json
    ids: dict[str, str] = {}
    return [_normalise(w, tmp, ids) for w in writes]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_agent_json_write_is_what_the_dict_loop_wrote(
        tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    got = record_case(tmp_path, case, monkeypatch)
    want = json.loads((FIXTURES / f"{case}.json").read_text(encoding="utf-8"))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"write {i} of {len(want)} differs"


@pytest.mark.parametrize("case", sorted(STOPS))
def test_a_stopped_and_resumed_loop_writes_what_the_dict_loop_wrote(
        tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    got = record_stopped_case(tmp_path, case, monkeypatch)
    want = json.loads((FIXTURES / f"{case}.json").read_text(encoding="utf-8"))
    assert [json.loads(w)["status"] for w in got][-1] == "goal_met"
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"write {i} of {len(want)} differs"
