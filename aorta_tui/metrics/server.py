"""The ``--metrics ADDR`` endpoint: parse and check the address, serve, stop.

prometheus_client's HTTP server answers each connection on its own daemon thread, so a slow
or malformed scrape holds only that thread: the tracer and the sweep never wait on it. The
registry's collectors read figures the engine already prepared (a swap under a short lock),
never the engine's own state.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aorta_tui.core.errors import UsageError
from aorta_tui.core.numerals import ascii_digits

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry

DEFAULT_PORT = 9477
DEFAULT_HOST = "127.0.0.1"
ADDR_HINT = f"e.g. --metrics {DEFAULT_PORT}, --metrics 127.0.0.1:{DEFAULT_PORT} or --metrics [::1]:{DEFAULT_PORT}"


@dataclass(frozen=True)
class MetricsAddress:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"


def parse_address(text: str) -> MetricsAddress:
    """``PORT``, ``HOST:PORT``, ``:PORT`` or ``[V6]:PORT``; the host defaults to 127.0.0.1."""
    raw = text.strip()
    host, port_text = DEFAULT_HOST, raw
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0 or not raw[end + 1:].startswith(":"):
            raise UsageError(f"--metrics {text!r}: an IPv6 address is written [ADDR]:PORT", hint=ADDR_HINT)
        host, port_text = raw[1:end], raw[end + 2:]
    elif ":" in raw:
        host, _, port_text = raw.rpartition(":")
        host = host or DEFAULT_HOST
    if not ascii_digits(port_text) or not 0 <= int(port_text) <= 65535:
        raise UsageError(f"--metrics {text!r}: the port must be a number from 0 to 65535", hint=ADDR_HINT)
    if not host or any(ch.isspace() for ch in host):
        raise UsageError(f"--metrics {text[:80]!r}: no host before the port", hint=ADDR_HINT)
    if len(host) > 253:  # no DNS name is longer; the resolver's idna codec raised on it
        raise UsageError(f"--metrics {text[:40]!r}...: the host is {len(host)} characters, longer "
                         "than any host name (253)", hint=ADDR_HINT)
    return MetricsAddress(host, int(port_text))


def _resolved(host: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(f"--metrics: cannot resolve host {host[:80]!r} ({exc.strerror})", hint=ADDR_HINT) from None
    except UnicodeError:  # a label of over 63 characters, or one the idna codec refuses
        raise UsageError(f"--metrics: {host[:80]!r} is not a host name (each dot-separated part "
                         "is 1 to 63 characters)", hint=ADDR_HINT) from None
    return sorted({str(info[4][0]) for info in infos})


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback one."""
    addresses = _resolved(host)
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def check_bind(address: MetricsAddress, public: bool) -> None:
    if not public and not is_loopback(address.host):
        raise UsageError(
            f"--metrics {address.host}:{address.port} would serve the metrics beyond this machine "
            "(a non-loopback address)",
            hint=f"add --metrics-public to mean it, or bind to loopback: --metrics 127.0.0.1:{address.port}")


class MetricsServer:
    """A registry served at ``address`` from a daemon thread until :meth:`stop`."""

    def __init__(self, address: MetricsAddress, registry: CollectorRegistry) -> None:
        self.address = address
        self.registry = registry
        self._httpd: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> MetricsServer:
        from prometheus_client import start_http_server

        try:
            self._httpd, self._thread = start_http_server(self.address.port, addr=self.address.host,
                                                          registry=self.registry)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(
                    f"--metrics {self.address.host}:{self.address.port}: the port is in use",
                    hint=(f"pick a free port (e.g. --metrics {self.address.host}:{self.address.port + 1}, "
                          "or port 0 for any free one), or stop what holds it: "
                          f"ss -ltnp 'sport = :{self.address.port}'")) from None
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise UsageError(f"--metrics {self.address.host}:{self.address.port}: not allowed to bind "
                                 f"({exc.strerror})", hint="use a port above 1023") from None
            raise UsageError(f"--metrics {self.address.host}:{self.address.port}: cannot bind ({exc.strerror})",
                             hint=ADDR_HINT) from None
        port = self._httpd.server_address[1]  # the real one when port 0 was asked for
        self.address = MetricsAddress(self.address.host, int(port))
        return self

    def stop(self, linger_s: float = 0.0) -> None:
        """Serve ``linger_s`` more seconds (a last scrape sees the final figures), then close
        the listening socket and end the thread."""
        if self._httpd is None:
            return
        if linger_s > 0:
            threading.Event().wait(linger_s)  # not a busy sleep; Ctrl-C still interrupts it
        httpd, self._httpd = self._httpd, None
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def serve(addr: str, *, public: bool, collectors: list[Any]) -> MetricsServer:
    """Check ``addr``, register ``collectors`` in a registry of their own, and serve it."""
    from prometheus_client import CollectorRegistry

    address = parse_address(addr)
    check_bind(address, public)
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return MetricsServer(address, registry).start()


