"""What a few tests assert on inside the exporter's objects, state no public call reports
(the production code keeps no method only tests would call): each private name read once,
here."""

from __future__ import annotations

from exporter.poll.engine import Engine
from exporter.web.httpserver import ThreadedHTTPServer


def spare_handles(engine: Engine) -> int:
    """The idle curl handles ``engine`` keeps for reuse (a list's length: read from any
    thread)."""
    return len(engine._spare)


def open_connections(server: ThreadedHTTPServer) -> int:
    """The client connections ``server`` has open now (waiting, idle or being answered)."""
    with server._lock:
        return len(server._conns)
