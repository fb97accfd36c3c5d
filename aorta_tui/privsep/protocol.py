"""The privileged helper's wire format: length-prefixed JSON frames, typed requests, typed refusals.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON (one object). A request
is ``{"verb": NAME, "args": {...}}``; a reply is ``{"ok": true, "result": {...}}`` or
``{"ok": false, "error": {"code": CODE, "message": TEXT}}``. A file descriptor (a bpftrace's
stdout, a new connection) travels beside a reply as SCM_RIGHTS ancillary data.

Every argument of every verb is checked here, on the root side, before anything runs: its type
(``bool`` is not an ``int``), its size, its range, and for names their membership of a fixed
set. The unprivileged side can send no program text, no path and no command: nothing it sends
is spliced into anything but a bounded integer or a name picked from a list.
"""

from __future__ import annotations

import array
import json
import re
import socket
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

HEADER = struct.Struct(">I")
MAX_REQUEST = 16 << 10  # the largest request a verb needs is a few hundred bytes
MAX_REPLY = 1 << 20  # a tracefs format file, a bounded stderr
MAX_FDS = 1
MAX_LIST = 16  # probe sets in one request
MAX_NAME = 64

# error codes of a refusal (the client raises them as typed errors)
MALFORMED = "malformed"  # not a frame, not JSON, not an object
TOO_LARGE = "too_large"
UNKNOWN_VERB = "unknown_verb"
BAD_ARGUMENT = "bad_argument"  # wrong type, out of range, unknown name, extra argument
REFUSED = "refused"  # well-formed, but not allowed (a pid that does not exist, no such trace)
FAILED = "failed"  # allowed, tried, and it did not work (bpftrace would not attach)
CODES = (MALFORMED, TOO_LARGE, UNKNOWN_VERB, BAD_ARGUMENT, REFUSED, FAILED)


class ProtocolError(Exception):
    """A request the helper refuses: ``code`` is one of :data:`CODES`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ConnectionClosed(Exception):
    """The other side closed the socket (or sent half a frame and closed)."""


# -- framing -------------------------------------------------------------------------------------


def encode(obj: Mapping[str, Any]) -> bytes:
    body = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    return HEADER.pack(len(body)) + body


def send(sock: socket.socket, obj: Mapping[str, Any], fds: tuple[int, ...] = ()) -> None:
    data = encode(obj)
    if fds:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        sent = sock.sendmsg([data], anc)
        data = data[sent:]
    if data:
        sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int, fds: list[int]) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        # close-on-exec from the start: a received descriptor never leaks into a child by accident
        chunk, anc, _flags, _addr = sock.recvmsg(n - len(buf), socket.CMSG_SPACE(MAX_FDS * 4),
                                                 socket.MSG_CMSG_CLOEXEC)
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(data[: len(data) - len(data) % got.itemsize])
                fds.extend(got)
        if not chunk:
            raise ConnectionClosed("the other side closed the connection")
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket, limit: int) -> tuple[Any, list[int]]:
    """One frame: (its JSON value, the descriptors that came with it). A frame over ``limit``
    raises TOO_LARGE after its body is skipped, so the next frame is read from its start."""
    fds: list[int] = []
    (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size, fds))
    if size > limit:
        _skip(sock, size, fds)
        raise ProtocolError(TOO_LARGE, f"frame of {size} bytes is over the limit of {limit}")
    body = _recv_exact(sock, size, fds)
    try:
        return json.loads(body.decode("utf-8")), fds
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(MALFORMED, f"frame is not UTF-8 JSON: {exc}") from None


def _skip(sock: socket.socket, size: int, fds: list[int]) -> None:
    left = size
    while left:
        left -= len(_recv_exact(sock, min(left, 1 << 16), fds))


def ok(result: Mapping[str, Any]) -> dict[str, Any]:
    return {"ok": True, "result": dict(result)}


def refusal(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message[:2000]}}


# -- argument checks -----------------------------------------------------------------------------

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass(frozen=True)
class Int:
    lo: int
    hi: int
    optional: bool = False

    def check(self, name: str, value: object) -> int | None:
        if value is None and self.optional:
            return None
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise ProtocolError(BAD_ARGUMENT, f"{name} must be an integer in {self.lo}..{self.hi}")
        return value


@dataclass(frozen=True)
class Float:
    lo: float
    hi: float

    def check(self, name: str, value: object) -> float:
        if not (type(value) is int or type(value) is float) or not self.lo <= value <= self.hi:
            raise ProtocolError(BAD_ARGUMENT, f"{name} must be a number in {self.lo}..{self.hi}")
        return float(value)


@dataclass(frozen=True)
class Bool:
    def check(self, name: str, value: object) -> bool:
        if type(value) is not bool:
            raise ProtocolError(BAD_ARGUMENT, f"{name} must be true or false")
        return value


@dataclass(frozen=True)
class OneOf:
    """A name from a fixed set (a callable gives the set, so a catalogue is read when needed)."""

    choices: tuple[str, ...] | Callable[[], tuple[str, ...]]

    def names(self) -> tuple[str, ...]:
        return self.choices() if callable(self.choices) else self.choices

    def check(self, name: str, value: object) -> str:
        if type(value) is not str or len(value) > MAX_NAME or value not in self.names():
            raise ProtocolError(BAD_ARGUMENT, f"{name} must be one of {', '.join(self.names())}")
        return value


@dataclass(frozen=True)
class Ident:
    """A C identifier (a tracepoint group or event): letters, digits, underscores."""

    def check(self, name: str, value: object) -> str:
        if type(value) is not str or not _IDENT_RE.match(value):
            raise ProtocolError(BAD_ARGUMENT, f"{name} must be an identifier of at most 128 characters")
        return value


@dataclass(frozen=True)
class ListOf:
    item: OneOf
    max_len: int = MAX_LIST

    def check(self, name: str, value: object) -> list[str]:
        if type(value) is not list or len(value) > self.max_len:
            raise ProtocolError(BAD_ARGUMENT, f"{name} must be a list of at most {self.max_len} names")
        out = [self.item.check(f"{name}[{i}]", v) for i, v in enumerate(value)]
        if len(set(out)) != len(out):
            raise ProtocolError(BAD_ARGUMENT, f"{name} names a set twice")
        return out


Check = Int | Float | Bool | OneOf | Ident | ListOf


def check_request(frame: object, schemas: Mapping[str, Mapping[str, Check]]) -> tuple[str, dict[str, Any]]:
    """(verb, checked arguments) of a request, or a ProtocolError saying what is wrong.

    Every argument of the verb's schema must be present and valid; anything more is refused
    (an unknown key is a request the helper does not understand, not one to half-follow)."""
    if type(frame) is not dict or set(frame) != {"verb", "args"}:
        raise ProtocolError(MALFORMED, 'a request is {"verb": NAME, "args": {...}} and nothing else')
    verb, args = frame["verb"], frame["args"]
    if type(verb) is not str or not _NAME_RE.match(verb) or verb not in schemas:
        shown = verb if type(verb) is str and len(verb) <= MAX_NAME else "?"
        raise ProtocolError(UNKNOWN_VERB, f"unknown verb {shown!r}; the helper does: {', '.join(sorted(schemas))}")
    if type(args) is not dict:
        raise ProtocolError(MALFORMED, "args must be an object")
    schema = schemas[verb]
    extra = sorted(set(args) - set(schema))
    if extra:
        raise ProtocolError(BAD_ARGUMENT, f"{verb} takes no argument {str(extra[0])[:MAX_NAME]!r}")
    missing = sorted(set(schema) - set(args))
    if missing:
        raise ProtocolError(BAD_ARGUMENT, f"{verb} needs {', '.join(missing)}")
    return verb, {key: check.check(key, args[key]) for key, check in schema.items()}
