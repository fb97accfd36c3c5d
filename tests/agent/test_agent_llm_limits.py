"""Issue 35's agent cases, each against a real HTTP server on loopback (http.server in a
thread): an endless body and a gzip bomb are cut at the body cap (counted decompressed), a
redirect to another origin is refused and named (nothing reaches the other host), a server's
5,000,000-character name is not echoed whole, agent.json never stays `running` after an
error, and `--env-candidate` values of secret-named variables never reach the server, the
terminal or the run. The failures are exit 3 with the recipe's runs kept."""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from aorta_tui.agent.records import LlmRecord
from tests.agent.test_agent_llm import RECIPE, SCRIPT, _agent_dir
from tests.agent.test_agent_llm_hostile import completion
from tests.engine_support import aorta

pytest.importorskip("openai")

BOMB = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)  # 64 KB that inflates to 64 MiB


class Server:
    """Answers each POST with ``answer(handler)``; keeps the bodies it was sent."""

    def __init__(self, answer) -> None:
        self.bodies: list[bytes] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                host.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
                with contextlib.suppress(OSError):  # the client hung up: what a body cap does
                    answer(self)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve():
    made: list[Server] = []

    def make(answer) -> Server:
        made.append(Server(answer))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _endless(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.end_headers()  # no length: the body ends when the connection does, which it never does
    chunk = b"[" * (1024 * 1024)
    for _ in range(100_000):
        h.wfile.write(chunk)


def _bomb(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Encoding", "gzip")
    h.send_header("Content-Length", str(len(BOMB)))
    h.end_headers()
    h.wfile.write(BOMB)


def _answer(body: bytes):
    def send(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return send


def _run(tmp_path: Path, url: str, *extra: str):
    (tmp_path / "probe.yaml").write_text(RECIPE)
    return aorta("agent", "probe.yaml", "--no-snapshot", "--proposer", "llm", "--llm-model", "m",
                 "--llm-base-url", url, "--candidates", "hsa_no_sdma,xnack", "--yes",
                 "--budget", "10", *extra, "--", "sh", "-c", SCRIPT, cwd=tmp_path, timeout=180,
                 env={"OPENAI_API_KEY": "k", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})


def _kept_and_recorded(tmp_path: Path) -> dict:
    state = json.loads((_agent_dir(tmp_path) / "agent.json").read_text())
    assert state["status"] == "error" and state["stop_reason"], state["status"]
    assert list((tmp_path / "aorta-out").glob("*/*/journal.jsonl"))  # the baseline's run kept
    return state


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
@pytest.mark.parametrize("answer,says", [(_endless, "its body is over"), (_bomb, "its body is over")],
                         ids=["endless", "gzip_bomb"])
def test_a_body_past_the_cap_is_not_read(tmp_path, serve, answer, says):
    server = serve(answer)
    proc = _run(tmp_path, server.url)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert says in proc.stderr and "Traceback" not in proc.stderr
    _kept_and_recorded(tmp_path)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_redirect_to_another_origin_is_refused_and_named(tmp_path, serve):
    other = serve(_answer(completion('{"cells": [["xnack"]], "reasons": ["r"]}')))

    def redirect(h: BaseHTTPRequestHandler) -> None:
        h.send_response(307)
        h.send_header("Location", other.url + "/chat/completions")
        h.send_header("Content-Length", "0")
        h.end_headers()
    server = serve(redirect)
    proc = _run(tmp_path, server.url)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "redirected the request to http://127.0.0.1:" in proc.stderr
    assert "not followed" in proc.stderr
    assert other.bodies == []  # the request body never reached the other host
    _kept_and_recorded(tmp_path)


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_a_huge_name_from_the_server_is_not_echoed_whole(tmp_path, serve):
    name = "A" * 5_000_000
    server = serve(_answer(completion(json.dumps({"cells": [[name]], "reasons": ["r"]}))))
    proc = _run(tmp_path, server.url)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "not a candidate" in proc.stderr and len(proc.stderr) < 2000
    assert "'" + "A" * 79 + "…'" in proc.stderr  # clipped to 80 characters
    state = _kept_and_recorded(tmp_path)
    assert len(state["stop_reason"]) <= 500
    record = LlmRecord.read(_agent_dir(tmp_path) / "llm-01.json")  # the one reader
    assert record.bad_proposal is not None
    assert "not a candidate" in record.bad_proposal and len(record.bad_proposal) < 500


def _answers(*bodies: bytes):
    """Each POST gets the next body (the last one again once they run out)."""
    left = list(bodies)

    def send(h: BaseHTTPRequestHandler) -> None:
        _answer(left.pop(0) if len(left) > 1 else left[0])(h)
    return send


# the probe writes a hash of each secret it saw to a file outside the run: the trial got the
# value without the value ever being printed, so any copy of it in the run came from the tool
SEEN_SCRIPT = ('for v in "HF_TOKEN=${HF_TOKEN:-}" "DB_PASSWORD=${DB_PASSWORD:-}"; do '
               'case "$v" in *=) ;; *) printf "%s %s\\n" "${v%%=*}" "$(printf %s "${v#*=}" | '
               'sha256sum | cut -c1-64)" >> "$SEEN" ;; esac; done; '
               '[ "$HSA_ENABLE_SDMA" = 0 ] || exit 3')


def _seen_run(tmp_path: Path, *args: str):
    (tmp_path / "probe.yaml").write_text(RECIPE)
    command = () if "--resume" in args else ("--", "sh", "-c", SEEN_SCRIPT)  # a resume has it
    return aorta("agent", *args, *command, cwd=tmp_path, timeout=180,
                 env={"OPENAI_API_KEY": "k", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1",
                      "SEEN": str(tmp_path / "seen.txt")})


def _no_copy_anywhere(tmp_path: Path, values: tuple[str, ...], *outputs: str) -> None:
    import base64
    import tarfile

    out = tmp_path / "aorta-out"
    runs = sorted(p.parent for p in out.glob("*/*/journal.jsonl"))
    for i, run in enumerate(runs):  # and no bundle of any of its runs
        archive = tmp_path / f"b{i}.tar.gz"
        made = aorta("bundle", str(run), "-o", str(archive), cwd=tmp_path, timeout=180)
        assert made.returncode == 0, made.stderr[-2000:]
        outputs += (made.stdout + made.stderr,)
        with tarfile.open(archive) as tar:
            blobs = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
            blobs += [m.name.encode() for m in tar.getmembers()]
        for value in values:
            for form in (value.encode(), base64.b64encode(value.encode())):
                assert not any(form in b for b in blobs), (value, archive)
    for value in values:
        assert not any(value in text for text in outputs)
        for p in out.rglob("*"):
            assert value not in p.name
            if p.is_file():
                assert value.encode() not in p.read_bytes(), p


@pytest.mark.slow  # >= 1.5 s measured (scripts/test.sh --fast)
def test_env_candidate_secrets_never_leave_memory(tmp_path, serve):
    import hashlib

    token, password = "hf_" + "Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2J3", "dbPassw0rd-ZX81-secret"
    server = serve(_answers(
        completion('{"cells": [["env.HF_TOKEN.secret-1"]], "reasons": ["r"]}'),
        b"not a completion",  # the agent stops (exit 3) here: a resume needs the values again
        completion('{"cells": [["env.DB_PASSWORD.secret-1", "xnack"]], "reasons": ["r"]}'),
        completion('{"cells": [], "reasons": [], "note": "stop"}')))
    secrets = ("--env-candidate", f"HF_TOKEN={token}", "--env-candidate", f"DB_PASSWORD={password}")
    common = ("--no-snapshot", "--proposer", "llm", "--llm-model", "m", "--llm-base-url",
              server.url, "--candidates", "hsa_no_sdma,xnack", "--yes", "--budget", "10")
    first = _seen_run(tmp_path, "probe.yaml", *common, *secrets)
    assert first.returncode == 3, first.stderr[-2000:]
    assert "--env-candidate HF_TOKEN=... --env-candidate DB_PASSWORD=..." in first.stdout
    agent_dir = _agent_dir(tmp_path)
    state = json.loads((agent_dir / "agent.json").read_text())
    assert state["status"] == "error"
    assert state["secret_candidates"] == {"env.HF_TOKEN.secret-1": "HF_TOKEN",
                                          "env.DB_PASSWORD.secret-1": "DB_PASSWORD"}
    sidecar = json.loads((agent_dir / "env-candidates.mitigations.json").read_text())
    assert sidecar["env.HF_TOKEN.secret-1"]["env"] == {"HF_TOKEN": "<masked: secret>"}

    # a resume without the values says which are needed and how to give them; nothing runs
    bare = aorta("agent", "--resume", str(agent_dir), cwd=tmp_path, timeout=60)
    assert bare.returncode == 2, bare.stderr[-2000:]
    assert f"--resume {agent_dir}: the value of HF_TOKEN" in bare.stderr
    assert "is needed again" in bare.stderr and "--env-candidate HF_TOKEN=..." in bare.stderr
    assert json.loads((agent_dir / "agent.json").read_text())["status"] == "error"

    resumed = _seen_run(tmp_path, "--resume", str(agent_dir), "--yes", *secrets)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    state = json.loads((agent_dir / "agent.json").read_text())
    assert state["status"] == "exhausted"
    assert [c["mitigations"] for it in state["iterations"][1:] for c in it["cells"]] == [
        ["env.HF_TOKEN.secret-1"], ["env.DB_PASSWORD.secret-1", "xnack"]]
    # the trials saw the values (hashes written outside the run), singly and in a pair
    seen = set((tmp_path / "seen.txt").read_text().splitlines())
    assert seen == {f"HF_TOKEN {hashlib.sha256(token.encode()).hexdigest()}",
                    f"DB_PASSWORD {hashlib.sha256(password.encode()).hexdigest()}"}
    sent = b"".join(server.bodies)
    assert b"env.HF_TOKEN.secret-1" in sent and b"env.DB_PASSWORD.secret-1" in sent
    for value in (token, password):
        assert value.encode() not in sent
    _no_copy_anywhere(tmp_path, (token, password), first.stdout + first.stderr,
                      bare.stdout + bare.stderr, resumed.stdout + resumed.stderr)
