"""An app for the web server alone: the endpoints with nothing polled behind them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http import HTTPStatus

from exporter.config.web import WebConfig
from exporter.model.snapshot import Snapshot
from exporter.web.exposition import Exposition
from exporter.web.landing import StatusPage
from exporter.web.probe_endpoint import ProbeAnswer
from exporter.web.problems import Attention, Problem, attention
from exporter.web.server import ExporterServer


class StubApp:
    """``/metrics`` answers an empty exposition, the exporter is ready, reloads do nothing
    and ``/probe`` answers ``probe`` (404 by default): for tests of listeners, TLS and the
    server itself."""

    def __init__(self, probe: ProbeAnswer | None = None) -> None:
        self._probe = probe or ProbeAnswer(HTTPStatus.NOT_FOUND, b"no probes here\n")

    def exposition(self) -> Exposition:
        return Exposition(Snapshot())

    def ready(self) -> bool:
        return True

    def reload(self) -> None:
        return None

    def probe(self, query: str, timeout_header: str | None, openmetrics: bool) -> ProbeAnswer:
        return self._probe


@contextmanager
def served(web: WebConfig | None = None) -> Iterator[str]:
    """The exporter's server over a :class:`StubApp`, on a free loopback port: its URL."""
    server = ExporterServer("127.0.0.1:0", StubApp(), web)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def landing_page(snapshot: Snapshot, now: float | None = None, *, fired: bool = False) -> str:
    """The status page of ``snapshot`` as ``/`` serves it at ``now`` (``time.monotonic()``,
    the snapshot's clock). ``fired``: as if every problem listed had held past its alert's
    ``for`` (a page seen well into an incident); else as a first cycle sees it, each problem
    pending unless the snapshot's own times say it has held long enough."""
    found = None
    if fired:
        as_of = snapshot.completed_at if snapshot.completed_at is not None else time.monotonic()
        found = fired_lines(attention(snapshot, as_of))
    return StatusPage(snapshot, found=found).at(time.monotonic() if now is None else now).decode()


def fired_lines(found: Attention) -> Attention:
    """``found`` with every line's alert firing (the likely-cause lines, which mirror no
    alert yet, stay as they are)."""

    def fired(line: Problem) -> Problem:
        fires_in = line.fires_in if line.foreseen or line.fires_in is None else 0.0
        return replace(line, fires_in=fires_in, folded=tuple(map(fired, line.folded)))

    return Attention(
        tuple(map(fired, found.network)),
        {name: list(map(fired, own)) for name, own in (found.nodes or {}).items()},
        tuple(map(fired, found.watch)),
        tuple(map(fired, found.identity)),
        tuple(map(fired, found.maintenance)),
    )
