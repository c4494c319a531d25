"""Listening sockets of a layout, each able to go down (refuse connections) and come back up
on the same port without losing it."""

from __future__ import annotations

import ssl
import threading

from ledger_simulator.errors import SimulatorError
from ledger_simulator.http import Router, SimServer

POLL_SECONDS = 0.05  # how soon a serving loop notices stop()
BIND_ATTEMPTS = 50


class Listener:
    """One port: bound from the start; listening (and served by a thread) only while up.

    A bound socket that does not listen refuses connections, so ``down`` keeps the port
    reserved for the node while it is refused."""

    def __init__(
        self,
        host: str,
        port: int,
        router: Router,
        node: int | None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.router = router
        self.node = node
        self.tls = tls
        self.server = self._bind(port)
        self.port: int = self.server.server_address[1]
        self.thread: threading.Thread | None = None

    def _bind(self, port: int) -> SimServer:
        server = SimServer((self.host, port), self.router, self.node, self.tls)
        try:
            server.server_bind()
        except OSError:
            server.server_close()
            raise
        return server

    def serve_certificate(self, tls: ssl.SSLContext) -> None:
        """Present ``tls``'s certificate from now on, as a node restarted with a new one: open
        connections are cut, so every client makes a new handshake and sees it."""
        self.tls = tls
        self.server.tls = tls
        self.server.cut_connections()

    def up(self) -> None:
        """Listen and serve (no-op when already up)."""
        if self.thread is not None:
            return
        self.server.server_activate()
        name = "sim-admin" if self.node is None else f"sim-node-{self.node + 1}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(POLL_SECONDS,), name=name, daemon=True
        )
        self.thread.start()

    def down(self) -> None:
        """Stop serving, cut open connections and hold the port without listening."""
        if self.thread is None:
            return
        self._stop_serving()
        self.server = self._bind(self.port)

    def close(self) -> None:
        """Stop serving and release the port."""
        if self.thread is not None:
            self._stop_serving()
        else:
            self.server.server_close()

    def _stop_serving(self) -> None:
        assert self.thread is not None
        self.server.shutdown()
        self.thread.join()
        self.thread = None
        self.server.cut_connections()
        self.server.server_close()


def bind_layout(
    host: str, port: int, node_count: int, router: Router, tls: ssl.SSLContext | None = None
) -> dict[int | None, Listener]:
    """Bind the admin port (key None) and, for the ports layout, node i's port PORT+1+i.

    With port 0 a free admin port is chosen and the attempt repeated until the node ports
    above it are free too."""
    if port and port + node_count > 65535:
        raise SimulatorError(f"ports {port}..{port + node_count} exceed 65535: choose a lower port")
    error: OSError | None = None
    for _ in range(BIND_ATTEMPTS if port == 0 else 1):
        listeners: dict[int | None, Listener] = {}
        try:
            admin = Listener(host, port, router, None, tls)
            listeners[None] = admin
            for node in range(node_count):
                listeners[node] = Listener(host, admin.port + node + 1, router, node, tls)
            return listeners
        except OSError as failure:
            error = failure
            for listener in listeners.values():
                listener.close()
        except OverflowError as failure:
            error = OSError(str(failure))
            for listener in listeners.values():
                listener.close()
    raise SimulatorError(
        f"cannot listen on {host}:{port or 'a free port'}"
        f"{f' and the {node_count} ports above it' if node_count else ''}: {error}; "
        "choose another --listen-address"
    )
