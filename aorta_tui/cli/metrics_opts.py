"""``--metrics ADDR`` / ``--metrics-public`` / ``--metrics-linger``: one definition for every
command that offers them (trace queue, sweep run / --batch, policy sweep, queue sweep)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from aorta_tui.cli.common import err, seconds

if TYPE_CHECKING:
    from aorta_tui.core.events import Event, EventBus
    from aorta_tui.metrics.server import MetricsServer

_R = TypeVar("_R")  # what the metered engine call returns

METRICS_OPT = typer.Option(
    None, "--metrics", metavar="ADDR",
    help="Serve OpenMetrics for Prometheus at ADDR while running: PORT or HOST:PORT (host 127.0.0.1 "
         "unless given; the documented port is 9477; 0 picks a free one). See docs/metrics.md.")
METRICS_PUBLIC_OPT = typer.Option(
    False, "--metrics-public",
    help="Allow --metrics on a non-loopback address (the metrics are then readable from the network).")
METRICS_LINGER_OPT = typer.Option(
    0.0, "--metrics-linger", metavar="S", parser=seconds(at_least=0.0),
    help="Keep serving --metrics S seconds after the run ends, so a last scrape sees the final figures.")


@dataclass(frozen=True)
class MetricsRequest:
    addr: str | None = None
    public: bool = False
    linger_s: float = 0.0


@contextlib.contextmanager
def serving(addr: str | None, public: bool, linger_s: float, collectors: list[Any]) -> Iterator[Any]:
    """Serve ``collectors`` at ``addr`` for the block (nothing when ``addr`` is None); the
    listener is closed when the block ends, however it ends."""
    if addr is None:
        yield None
        return
    from aorta_tui.metrics.server import serve

    server = serve(addr, public=public, collectors=collectors)
    err(f"metrics at {server.address.url}")
    linger = linger_s
    try:
        yield server
    except KeyboardInterrupt:  # Ctrl-C means now, not after the linger
        linger = 0.0
        raise
    finally:
        server.stop(linger)


@contextlib.contextmanager
def sweep_metrics_serving(req: MetricsRequest | None, bus: EventBus,
                          planned: dict[str, int] | None = None) -> Iterator[MetricsServer | None]:
    """A run's progress served for the block: a :class:`SweepMetrics` sink on ``bus``."""
    if req is None or req.addr is None:
        yield None
        return
    from aorta_tui.metrics.sweep_metrics import SweepMetrics

    sink = SweepMetrics(planned=planned)
    with serving(req.addr, req.public, req.linger_s, [sink]) as server:
        bus.add(sink)
        try:
            yield server
        finally:
            sink.close()  # however the run ended, the linger says "ended" (as metered does)


def metered(go: Callable[[Callable[[Event], None]], _R], req: MetricsRequest
            ) -> Callable[[Callable[[Event], None]], _R]:
    """``go(on_event)`` with the run's progress served at ``req.addr`` while it runs (the
    engines of `policy sweep` and `queue sweep` take one event callback)."""
    if req.addr is None:
        return go

    def run(on_event: Callable[[Event], None]) -> _R:
        from aorta_tui.metrics.sweep_metrics import SweepMetrics

        sink = SweepMetrics()

        def both(event: Event) -> None:
            sink.emit(event)
            on_event(event)

        with serving(req.addr, req.public, req.linger_s, [sink]):
            try:
                return go(both)
            finally:
                sink.close()
    return run
