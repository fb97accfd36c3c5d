"""The unprivileged side: one connection to the helper, shared by this process's threads.

:func:`current` is the connection when the tool runs under ``sudo`` (installed by
:mod:`aorta_tui.privsep.boot`, or inherited by one of the tool's own commands started by it,
see :func:`child_connection`), and ``None`` otherwise: then whoever needs root does it itself
when it is root (root without sudo: unchanged behaviour), or says it needs root.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from aorta_tui.core.errors import EnvironmentProblem, UsageError
from aorta_tui.core.numerals import ascii_digits
from aorta_tui.privsep import protocol

FD_ENV = "AORTA_TUI_PRIVSEP_FD"  # a connection handed to one of the tool's own child commands


class HelperRefused(EnvironmentProblem):
    """The helper said no (``code`` is the protocol's error code), or it is gone."""

    def __init__(self, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"the privileged helper refused: {message}", hint=hint)
        self.code = code


class HelperArgumentError(UsageError, HelperRefused):
    """A request the helper found malformed: a bug or an out-of-bounds value (exit 2)."""


class Client:
    def __init__(self, sock: socket.socket, *, helper_pid: int | None = None) -> None:
        self.sock = sock
        self.helper_pid = helper_pid
        self._lock = threading.Lock()

    def call_with_fds(self, verb: str, **args: object) -> tuple[dict[str, Any], list[int]]:
        """Send one request, wait for its reply: (result, descriptors that came with it)."""
        with self._lock:
            try:
                protocol.send(self.sock, {"verb": verb, "args": args})
                reply, fds = protocol.recv(self.sock, protocol.MAX_REPLY)
            except (OSError, protocol.ConnectionClosed, protocol.ProtocolError) as exc:
                raise HelperRefused("gone", f"no answer to {verb}: {exc}",
                                    hint="the helper ended; start the tool again with sudo") from None
        if type(reply) is not dict or type(reply.get("ok")) is not bool:
            _close(fds)
            raise HelperRefused(protocol.MALFORMED, f"the helper's reply to {verb} is not a reply")
        if not reply["ok"]:
            _close(fds)
            err = reply.get("error") or {}
            code, message = str(err.get("code", "?")), str(err.get("message", ""))
            cls = HelperArgumentError if code in (protocol.BAD_ARGUMENT, protocol.UNKNOWN_VERB) else HelperRefused
            raise cls(code, message)
        return dict(reply.get("result") or {}), fds

    def call(self, verb: str, **args: object) -> dict[str, Any]:
        result, fds = self.call_with_fds(verb, **args)
        _close(fds)
        return result

    def child_connection(self) -> int:
        """A new connection's descriptor (inheritable) for one of the tool's own child commands:
        pass it with ``pass_fds`` and ``{FD_ENV: str(fd)}`` in its environment; close it here
        once the child started."""
        _result, fds = self.call_with_fds("connect")
        if len(fds) != 1:
            _close(fds)
            raise HelperRefused(protocol.MALFORMED, "connect answered without a connection")
        os.set_inheritable(fds[0], True)
        return fds[0]

    def close(self) -> None:
        self.sock.close()


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


_current: Client | None = None
_from_env_checked = False
_install_lock = threading.Lock()


def install(c: Client | None) -> None:
    global _current, _from_env_checked
    with _install_lock:
        _current = c
        _from_env_checked = True


def current() -> Client | None:
    """The helper's connection, or None when the tool runs without one."""
    global _current, _from_env_checked
    with _install_lock:
        if not _from_env_checked:
            _from_env_checked = True
            _current = _from_environment()
        return _current


def _from_environment() -> Client | None:
    """A connection handed down by the tool's parent process (``FD_ENV``). The variable is
    removed at once, so the commands this one starts (trials) neither see nor inherit it."""
    raw = os.environ.pop(FD_ENV, None)
    if raw is None or not ascii_digits(raw):
        return None
    fd = int(raw)
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None
    if sock.family != socket.AF_UNIX:
        sock.detach()
        return None
    os.set_inheritable(fd, False)
    return Client(sock)
