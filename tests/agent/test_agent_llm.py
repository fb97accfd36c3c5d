"""The llm proposer against a local OpenAI-compatible stub server: its proposals run after the
checks, its prompts and answers are saved, a bad suggestion runs nothing (exit 3)."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from aorta_tui.agent.records import LlmRecord
from tests.engine_support import aorta

# slow tier (scripts/test.sh --fast leaves it out): real processes, tmux or Slurm
pytestmark = pytest.mark.slow

pytest.importorskip("openai")

RECIPE = """\
schema_version: 1
mode: probe
ticket: T-LLM
trials: 1
timeout_per_trial: 30
mitigation_axis: [none]
diagnostic_axis: [none]
"""
SCRIPT = '[ "$HSA_ENABLE_SDMA" = 0 ] || exit 3'


class Stub:
    """Answers each chat completion with the next canned answer; keeps the requests."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append({"path": self.path, "body": body})
                content = stub.answers.pop(0) if stub.answers else '{"cells": []}'
                reply = json.dumps({
                    "id": "stub", "object": "chat.completion", "created": 0,
                    "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def stub():
    made: list[Stub] = []

    def make(answers: list[str]) -> Stub:
        made.append(Stub(answers))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _run(tmp_path: Path, url: str, *extra: str):
    (tmp_path / "probe.yaml").write_text(RECIPE)
    return aorta("agent", "probe.yaml", "--no-snapshot", "--proposer", "llm", "--llm-model",
                 "stub-model", "--llm-base-url", url, "--candidates",
                 "hip_launch_blocking,hsa_no_sdma,xnack", *extra, "--", "sh", "-c", SCRIPT,
                 cwd=tmp_path, env={"OPENAI_API_KEY": "sk-stub", "NO_PROXY": "127.0.0.1",
                                    "no_proxy": "127.0.0.1"})


def _agent_dir(tmp_path: Path) -> Path:
    (d,) = list((tmp_path / "aorta-out" / "T-LLM").glob("agent-*"))
    return d


def test_the_llm_proposals_run_and_are_recorded(tmp_path, stub):
    server = stub(['{"cells": [["hip_launch_blocking"]], "reasons": ["serialise launches"]}',
                   '```json\n{"cells": [["hsa_no_sdma"]], "reasons": ["no SDMA copies"]}\n```'])
    proc = _run(tmp_path, server.url, "--yes", "--budget", "10")
    assert proc.returncode == 0, proc.stderr
    d = _agent_dir(tmp_path)
    state = json.loads((d / "agent.json").read_text())
    assert state["status"] == "goal_met" and state["recommendation"]["mitigations"] == ["hsa_no_sdma"]
    assert state["iterations"][2]["reasons"] == ["no SDMA copies"]
    assert len(server.requests) == 2 and server.requests[0]["path"] == "/v1/chat/completions"
    for n in (1, 2):
        rec = json.loads((d / f"llm-{n:02d}.json").read_text())
        assert rec["answer"] and rec["request"]["model"] == "stub-model"
        sent = json.loads(rec["request"]["messages"][1]["content"])
        assert set(sent["candidates"]) == {"hip_launch_blocking", "hsa_no_sdma", "xnack"}
    # the second prompt shows what the first proposal did; the command is never sent
    sent = json.loads(server.requests[1]["body"]["messages"][1]["content"])
    assert [t["mitigations"] for t in sent["tried"]] == [[], ["hip_launch_blocking"]]
    assert "exit 3" not in json.dumps(server.requests)


@pytest.mark.parametrize("answer, needle", [
    ('{"cells": [["no_such_mitigation"]]}', "not a candidate"),
    ('{"cells": [["hsa_disable_cache"]]}', "not a candidate"),
    ("I think you should try xnack", "not JSON"),
    ('{"cells": [["xnack"], ["xnack"]]}', "again"),
])
def test_a_bad_suggestion_runs_nothing(tmp_path, stub, answer, needle):
    server = stub([answer])
    proc = _run(tmp_path, server.url, "--yes", "--budget", "10")
    assert proc.returncode == 3, proc.stderr  # the server's answer, not the user's input
    assert needle in proc.stderr and "nothing was run" in proc.stderr
    d = _agent_dir(tmp_path)
    record = LlmRecord.read(d / "llm-01.json")  # the one reader: a well-typed record
    assert record.answer == answer and needle in (record.bad_proposal or "")
    state = json.loads((d / "agent.json").read_text())
    assert state["status"] == "error" and needle in state["stop_reason"]
    assert len(list((tmp_path / "aorta-out" / "T-LLM").glob("2*"))) == 1  # the baseline only


def test_a_server_that_does_not_answer_is_exit_3(tmp_path):
    proc = _run(tmp_path, "http://127.0.0.1:9/v1", "--yes", "--budget", "10")
    assert proc.returncode == 3, proc.stderr
    assert "did not answer" in proc.stderr


def agent_on_a_terminal(tmp_path, url: str, reply: bytes, *options: str):
    """`agent probe.yaml --proposer llm` with a terminal on stdin whose input holds ``reply``
    (the approval gate's answer), against the model server at ``url``."""
    import pty
    import subprocess
    import sys

    (tmp_path / "probe.yaml").write_text(RECIPE)
    master, slave = pty.openpty()
    os.write(master, reply)  # the answer waits in the terminal's input
    try:
        return subprocess.run(
            [sys.executable, "-m", "aorta_tui", "agent", "probe.yaml", "--no-snapshot", *options,
             "--proposer", "llm", "--llm-model", "m", "--llm-base-url", url, "--candidates",
             "hsa_no_sdma", "--budget", "5", "--", "sh", "-c", SCRIPT], cwd=tmp_path, stdin=slave,
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "k", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.parametrize("reply, status, runs", [(b"n\n", "declined", 1), (b"y\n", "goal_met", 2)])
def test_the_approval_gate_asks_on_a_terminal(tmp_path, stub, reply, status, runs):
    server = stub(['{"cells": [["hsa_no_sdma"]], "reasons": ["no SDMA copies"]}'])
    proc = agent_on_a_terminal(tmp_path, server.url, reply)
    assert proc.returncode == 0, proc.stderr
    assert "hsa_no_sdma: no SDMA copies" in proc.stdout and "run these cells?" in proc.stdout
    state = json.loads((_agent_dir(tmp_path) / "agent.json").read_text())
    assert state["status"] == status
    assert len(list((tmp_path / "aorta-out" / "T-LLM").glob("2*"))) == runs


def test_with_json_the_approval_gate_asks_on_stderr_and_stdout_is_the_events(tmp_path, stub):
    # `agent --json` promises event lines alone on stdout: the gate's question went there too
    from aorta_tui.core.events import RunFinished, event_from_dict

    server = stub(['{"cells": [["hsa_no_sdma"]], "reasons": ["no SDMA copies"]}'])
    proc = agent_on_a_terminal(tmp_path, server.url, b"y\n", "--json")
    assert proc.returncode == 0, proc.stderr
    events = [event_from_dict(json.loads(line)) for line in proc.stdout.splitlines()]
    assert isinstance(events[-1], RunFinished)  # every line of stdout is an event
    assert events[-1].summary["result"]["status"] == "goal_met"
    assert "run these cells? [y/N]" in proc.stderr and "hsa_no_sdma: no SDMA copies" in proc.stderr


def test_without_the_client_library_the_error_names_the_extra(tmp_path):
    import subprocess
    import sys

    (tmp_path / "probe.yaml").write_text(RECIPE)
    code = ("import sys; sys.modules['openai'] = None; sys.argv = ['aorta-tui', 'agent', "
            "'probe.yaml', '--proposer', 'llm', '--llm-model', 'm', '--yes', '--', 'true']; "
            "from aorta_tui.cli.main import run; run()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert "aorta-tui[agent-llm]" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.yaml"]
