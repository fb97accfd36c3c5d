"""Issue 33 item 2: the helper refuses everything it was not built to do, with a typed error,
and goes on answering.

A real helper process (root, with the tool's verb families) is fed malformed frames, oversized
frames, JSON that is no request, unknown verbs, and requests of real verbs each made invalid in
one way: a wrong type, a missing or extra argument, a probe set outside the catalogue (program
text, a path), a pid or a knob outside its bounds. Every one is refused with its code, and a
ping right after still answers.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sudo_support import start_helper

from aorta_tui.privsep import protocol as P

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the helper is root's")

VALID: dict[str, dict[str, Any]] = {
    "trace_start": {"sets": ["ioctl"], "mode": "events", "pid": 1, "maps_pid": None, "heartbeat_ms": 200,
                    "interval_s": 1.0, "collector_launch_sets": [], "json_output": False,
                    "block_buffered": True, "perf_rb_pages": 64, "calibration": ""},
    "trace_poll": {"id": 1},
    "trace_stop": {"id": 1, "grace_s": 1.0},
    "tracefs_format": {"group": "syscalls", "event": "sys_enter_ioctl"},
    "tracefs_has": {"name": "available_events"},
    "gpu_read": {"backend": "nvidia", "device": 0},
    "gpu_apply": {"backend": "nvidia", "device": 0, "clock_level": 3, "power_limit_w": 300},
    "gpu_restore": {"backend": "nvidia", "device": 0},
    "snapshot_field": {"name": "tracefs_events"},
}


@pytest.fixture(scope="module")
def helper() -> Iterator[socket.socket]:
    mine, proc = start_helper()
    try:
        yield mine
    finally:
        mine.close()  # EOF: the helper ends
        proc.wait(timeout=30)


def _raw(sock: socket.socket, data: bytes) -> dict[str, Any]:
    sock.sendall(data)
    reply, fds = P.recv(sock, P.MAX_REPLY)
    assert fds == []
    return reply


def _ask(sock: socket.socket, frame: Any) -> dict[str, Any]:
    body = json.dumps(frame).encode()
    return _raw(sock, struct.pack(">I", len(body)) + body)


def _refused(reply: dict[str, Any], *codes: str) -> None:
    assert reply["ok"] is False, reply
    assert reply["error"]["code"] in (codes or P.CODES), reply
    assert isinstance(reply["error"]["message"], str) and reply["error"]["message"]


def _still_answers(sock: socket.socket) -> None:
    reply = _ask(sock, {"verb": "ping", "args": {}})
    assert reply["ok"] is True and reply["result"]["pong"] is True


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(body=st.binary(max_size=512).filter(lambda b: not _is_json(b)))
def test_a_frame_that_is_not_json_is_malformed(helper: socket.socket, body: bytes) -> None:
    _refused(_raw(helper, struct.pack(">I", len(body)) + body), P.MALFORMED)
    _still_answers(helper)


def _is_json(b: bytes) -> bool:
    try:
        json.loads(b.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    return True


@FUZZ
@given(extra=st.integers(min_value=1, max_value=64 << 10))
def test_an_oversized_frame_is_refused_and_skipped(helper: socket.socket, extra: int) -> None:
    size = P.MAX_REQUEST + extra
    _refused(_raw(helper, struct.pack(">I", size) + b"x" * size), P.TOO_LARGE)
    _still_answers(helper)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=12)


@FUZZ
@given(frame=JSON)
def test_json_that_is_not_a_request_is_refused(helper: socket.socket, frame: Any) -> None:
    _refused(_ask(helper, frame))
    _still_answers(helper)


@FUZZ
@given(verb=st.text(max_size=80).filter(lambda v: v not in VALID and v not in ("ping", "connect")),
       args=st.dictionaries(st.text(max_size=8), JSON, max_size=3))
def test_an_unknown_verb_is_refused(helper: socket.socket, verb: str, args: dict[str, Any]) -> None:
    _refused(_ask(helper, {"verb": verb, "args": args}), P.UNKNOWN_VERB)
    _still_answers(helper)


PROGRAM_TEXT = ['tracepoint:syscalls:sys_enter_execve { system("id") }', "BEGIN { exit(); }",
                "ioctl; kprobe:do_sys_open {}", "ioctl\n", "/etc/shadow", "../../etc/passwd",
                "/usr/bin/bpftrace", "cuda ", "IOCTL"]


def _defects() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """A valid request of a real verb with one thing wrong."""
    wrong_type = st.sampled_from(["3", 3.5, True, None, [], {}, [1], "x" * 200])  # over every name limit

    def retype(verb: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
        keys = sorted(VALID[verb])
        return st.tuples(st.sampled_from(keys), wrong_type).filter(
            lambda kv: not _accepts(verb, kv[0], kv[1])).map(lambda kv: (verb, {**VALID[verb], kv[0]: kv[1]}))

    def drop_or_add(verb: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
        drop = st.sampled_from(sorted(VALID[verb])).map(lambda k: (verb, {x: y for x, y in VALID[verb].items() if x != k}))
        add = st.sampled_from(["program", "path", "argv", "text"]).map(lambda k: (verb, {**VALID[verb], k: "x"}))
        return drop | add

    verbs = sorted(k for k, v in VALID.items() if v)
    sets = st.sampled_from(PROGRAM_TEXT).map(lambda t: ("trace_start", {**VALID["trace_start"], "sets": [t]}))
    pids = st.sampled_from([0, -1, 1 << 22 + 1, 2**63]).map(lambda p: ("trace_start", {**VALID["trace_start"], "pid": p}))
    beats = st.sampled_from([0, 9, 10_001]).map(lambda b: ("trace_start", {**VALID["trace_start"], "heartbeat_ms": b}))
    knobs = st.one_of(
        st.sampled_from([-1, 8, 100]).map(lambda c: ("gpu_apply", {**VALID["gpu_apply"], "clock_level": c})),
        st.sampled_from([0, 9, 5001, 10**9]).map(lambda w: ("gpu_apply", {**VALID["gpu_apply"], "power_limit_w": w})),
        st.sampled_from([-1, 64]).map(lambda d: ("gpu_read", {**VALID["gpu_read"], "device": d})),
        st.sampled_from(["fake:/tmp/x", "/usr/bin/nvidia-smi", "nvidia; id"]).map(
            lambda b: ("gpu_restore", {**VALID["gpu_restore"], "backend": b})),
    )
    names = st.one_of(
        st.sampled_from(["../../etc", "sys/enter", "a b", "", "x" * 200]).map(
            lambda g: ("tracefs_format", {**VALID["tracefs_format"], "group": g})),
        st.sampled_from(["../shadow", "/etc/shadow", "trace", "events"]).map(lambda n: ("tracefs_has", {"name": n})),
        st.sampled_from(["/dev/kmsg", "host.tracefs_events", "cpu_model"]).map(lambda n: ("snapshot_field", {"name": n})),
    )
    per_verb = st.sampled_from(verbs).flatmap(lambda v: retype(v) | drop_or_add(v))
    return per_verb | sets | pids | beats | knobs | names


def _schemas() -> dict[str, dict[str, P.Check]]:
    from aorta_tui.cli.privileged import load_verbs

    return {name: dict(verb.args) for family in load_verbs() for name, verb in family.verbs.items()}


SCHEMAS = _schemas()


def _accepts(verb: str, key: str, value: Any) -> bool:
    """True when the retyped value happens to be a valid one (3.5 seconds of interval, None for
    an optional number): only values the verb's schema refuses are defects."""
    try:
        SCHEMAS[verb][key].check(key, value)
    except P.ProtocolError:
        return False
    return True


@FUZZ
@given(request=_defects())
def test_a_real_verb_with_one_thing_wrong_is_a_bad_argument(helper: socket.socket,
                                                           request: tuple[str, dict[str, Any]]) -> None:
    verb, args = request
    _refused(_ask(helper, {"verb": verb, "args": args}), P.BAD_ARGUMENT)
    _still_answers(helper)


def test_a_descriptor_sent_to_the_helper_is_refused(helper: socket.socket) -> None:
    body = json.dumps({"verb": "ping", "args": {}}).encode()
    r, w = os.pipe()
    try:
        helper.sendmsg([struct.pack(">I", len(body)) + body],
                       [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", r))])
        reply, _ = P.recv(helper, P.MAX_REPLY)
    finally:
        os.close(r)
        os.close(w)
    _refused(reply, P.REFUSED)
    _still_answers(helper)


def test_a_connection_cut_mid_frame_leaves_the_helper_serving(helper: socket.socket) -> None:
    P.send(helper, {"verb": "connect", "args": {}})
    reply, fds = P.recv(helper, P.MAX_REPLY)
    assert reply["ok"] is True and len(fds) == 1
    second = socket.socket(fileno=fds[0])
    second.sendall(struct.pack(">I", 100) + b'{"verb": "pi')
    second.close()
    _still_answers(helper)
