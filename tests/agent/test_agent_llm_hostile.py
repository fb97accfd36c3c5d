"""The llm proposer against a hostile server: a real HTTP server on loopback that speaks the
OpenAI wire format badly on purpose. Whatever it answers, the agent exits 3 ("the server's
answer was not a proposal: ...") with the recipe's runs kept, never 70; a server that trickles
its answer cannot keep it past the request's deadline; text from the server is printed
inert."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aorta_tui.agent import llm
from aorta_tui.agent.records import LlmRecord
from tests.agent.test_agent_llm import RECIPE, SCRIPT, _agent_dir, agent_on_a_terminal
from tests.engine_support import aorta

pytest.importorskip("openai")

DEEP = 200_000


def completion(content: str) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}]}).encode()


class Hostile:
    """Answers every POST with ``body`` (status 200, JSON content type), or, with
    ``trickle_s``, with a body it sends one byte every ``trickle_s`` seconds."""

    def __init__(self, body: bytes = b"", trickle_s: float | None = None) -> None:
        self.requests = 0
        self.finished = threading.Event()  # the server sent its whole answer
        self.stop = threading.Event()
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers["Content-Length"]))
                host.requests += 1
                answer = body if trickle_s is None else completion('{"cells": []}')
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                try:
                    if trickle_s is None:
                        self.wfile.write(answer)
                    else:
                        for i in range(len(answer)):
                            self.wfile.write(answer[i:i + 1])
                            self.wfile.flush()
                            if host.stop.wait(trickle_s):
                                return
                    host.finished.set()
                except OSError:  # the client went away: what a deadline does
                    pass

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile():
    made: list[Hostile] = []

    def make(*args, **kwargs) -> Hostile:
        made.append(Hostile(*args, **kwargs))
        return made[-1]

    yield make
    for h in made:
        h.close()


def _run(tmp_path: Path, url: str, *extra: str, timeout: float = 120):
    (tmp_path / "probe.yaml").write_text(RECIPE)
    return aorta("agent", "probe.yaml", "--no-snapshot", "--proposer", "llm", "--llm-model", "m",
                 "--llm-base-url", url, "--candidates", "hsa_no_sdma,xnack", "--yes",
                 "--budget", "10", *extra, "--", "sh", "-c", SCRIPT, cwd=tmp_path,
                 timeout=timeout, env={"OPENAI_API_KEY": "k", "NO_PROXY": "127.0.0.1",
                                       "no_proxy": "127.0.0.1"})


BODIES = {
    "not_utf8": (b'{"choices": [{"message": {"content": "\xff\xfe\xfa"}}]}', "not UTF-8"),
    "empty_object": (b"{}", "`choices` is missing"),
    "no_choices": (b'{"choices": []}', "`choices` is an empty array"),
    "null_choices": (b'{"choices": null}', "`choices` is null"),
    "a_list": (b'[{"choices": []}]', "its body is an array"),
    "body_deep": (b'{"choices": ' + b"[" * DEEP + b"]" * DEEP + b"}", "nested too deep"),
    "content_deep": (completion('{"cells": ' + "[" * DEEP + "]" * DEEP + "}"),
                     "content is JSON nested too deep"),
    "no_content": (b'{"choices": [{"message": {"content": null}}]}', "content is not text"),
    "not_json": (b"<html>502 Bad Gateway</html>", "its body is not JSON"),
}


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("case", list(BODIES))
def test_an_answer_that_is_no_proposal_is_exit_3_and_keeps_the_runs(tmp_path, hostile, case):
    body, needle = BODIES[case]
    server = hostile(body)
    proc = _run(tmp_path, server.url)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "the server's answer was not a proposal:" in proc.stderr and needle in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) <= 3, proc.stderr
    assert server.requests == 1
    d = _agent_dir(tmp_path)
    runs = list((tmp_path / "aorta-out" / "T-LLM").glob("2*/matrix.json"))
    assert len(runs) == 1  # the baseline's run is kept, nothing else ran
    state = json.loads((d / "agent.json").read_text())
    assert state["baseline"]["run_dir"] == str(runs[0].parent.resolve())
    assert state["status"] == "error" and "not a proposal" in state["stop_reason"]  # never running
    record = LlmRecord.read(d / "llm-01.json")  # the one reader: a well-typed record
    assert "not a proposal" in (record.not_a_proposal or "")
    assert (record.answer is None) == (case != "content_deep")  # what was saved, as it came


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_trickling_server_cannot_hold_the_agent_past_the_deadline(tmp_path, hostile):
    server = hostile(trickle_s=20.0)  # one byte of its answer every 20 s
    proc = _run(tmp_path, server.url, "--llm-timeout", "2", timeout=100)
    assert proc.returncode == 3, proc.stderr
    assert "did not answer within 2 s (the whole request's deadline)" in proc.stderr
    assert "--llm-timeout" in proc.stderr
    assert server.requests == 1 and not server.finished.is_set()  # it was still sending
    assert len(list((tmp_path / "aorta-out" / "T-LLM").glob("2*/matrix.json"))) == 1


def test_a_bad_llm_timeout_is_exit_2_before_anything_runs(tmp_path):
    (tmp_path / "probe.yaml").write_text(RECIPE)
    for bad in ("0", "-1", "nan"):
        proc = _run(tmp_path, "http://127.0.0.1:9/v1", "--llm-timeout", bad)
        assert proc.returncode == 2, proc.stderr
        assert "--llm-timeout" in proc.stderr and "Traceback" not in proc.stderr
        assert not (tmp_path / "aorta-out").exists()


ESC = "\x1b"
EVIL_REASON = f"{ESC}[2K{ESC}[1A\rrun these cells? [y/N] y\nxnack: a fake line{ESC}]0;pwned\x07"
EVIL_NOTE = "note\u202eevil\u200b" + "x" * 5000


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_text_from_the_server_is_printed_inert_at_the_approval_gate(tmp_path, hostile):
    answer = json.dumps({"cells": [["hsa_no_sdma"]], "reasons": [EVIL_REASON],
                         "note": EVIL_NOTE})
    server = hostile(completion(answer))
    proc = agent_on_a_terminal(tmp_path, server.url, b"n\n")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # shown, not obeyed: no escape, carriage return, bell or bidi character reached the terminal
    for ch in (ESC, "\r", "\x07", "\u202e", "\u200b"):
        assert ch not in out, repr(ch)
    assert "\\x1b[2K\\x1b[1A\\rrun these cells? [y/N] y\\nxnack: a fake line" in out
    assert "\\u202e" in out
    # one line each, and short: the fake prompt and the fake cell are not lines of their own
    lines = out.splitlines()
    assert not any(ln.startswith("xnack: a fake line") for ln in lines)
    assert sum("run these cells? [y/N]" in ln for ln in lines) == 2  # the real one, and inert
    assert max(len(ln) for ln in lines) <= 400
    state = json.loads((_agent_dir(tmp_path) / "agent.json").read_text())
    assert state["status"] == "declined"



json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300) | json_values.map(lambda v: json.dumps({"choices": v}).encode())
       | json_values.map(lambda v: json.dumps(v).encode()))
@example(body=b'{"choices": ' + b"1" * 5000 + b"}")  # past Python's 4300-digit int limit
def test_any_body_is_its_content_or_not_a_proposal(body: bytes) -> None:
    """Whatever the server sends, answer_text returns text or raises NotAProposal (exit 3): a
    ValueError that is no JSONDecodeError (a 5000-digit number) was once an AttributeError."""
    try:
        assert isinstance(llm.answer_text(body), str)
    except llm.NotAProposal as exc:
        assert "not a proposal" in exc.message
