"""The tests' receivers of what monitoring tools send: an HTTP server on a free loopback port,
served from a daemon thread, that hands each ``POST``'s path and body to the receiver and
answers the status it returns. Alertmanager's webhook (``tests/support/alertmanager.py``) and
vmalert's notifier (``tests/support/victoriametrics.py``) are two."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: How long stopping waits for the serving thread.
STOP_TIMEOUT_SECONDS = 10.0


class PostReceiver:
    """Serves until :meth:`stop`; ``url`` is its root, without a trailing slash. Subclasses
    say what a ``POST`` is worth in :meth:`accept` (under ``self.lock``, which they read
    their records under too)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        accept = self.accept

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(accept(self.path, body))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def accept(self, path: str, body: bytes) -> int:
        """Keep what ``body`` posted to ``path`` carries; the HTTP status to answer."""
        raise NotImplementedError

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=STOP_TIMEOUT_SECONDS)
