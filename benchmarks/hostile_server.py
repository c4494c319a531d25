"""A misbehaving "node" for bench_faults.py: huge, compressed or dripping answers on 127.0.0.1.

    python benchmarks/hostile_server.py [--size-mib 50] [--max-seconds 60] [--lifetime 1800]

It prints ``listening: http://127.0.0.1:PORT/`` and serves any path under a mode prefix,
so a node configured with base URL ``http://127.0.0.1:PORT/<mode>/`` gets that behaviour on
/health and on every chain:

- ``huge``: 200, chunked, streams ``--size-mib`` of a JSON string without a Content-Length
- ``declared``: the same body with its Content-Length (refused from the header alone)
- ``gzip``: ``Content-Encoding: gzip``, a small body that inflates to ``--size-mib``
- ``drip``: Content-Length 4096, then one byte every 0.2 s
- ``driphead``: the status line, then one header byte every 0.2 s, never finishing the headers

Every answer stops after ``--max-seconds`` or when the client goes away, and the whole server
stops after ``--lifetime`` seconds: nothing here runs unbounded.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BLOCK = b"a" * (64 * 1024)
DRIP_SECONDS = 0.2


class Hostile(BaseHTTPRequestHandler):
    server: HostileServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        mode = self.path.strip("/").split("/", 1)[0]
        handler = getattr(self, "mode_" + mode, None)
        try:
            if handler is None:
                self.send_error(404, f"unknown mode {mode!r}")
            else:
                handler()
        except OSError:
            pass  # the exporter gave up and closed: that is the point
        self.close_connection = True

    def mode_huge(self) -> None:
        self.start(Transfer_Encoding="chunked")
        for piece in self.body_pieces():
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")

    def mode_declared(self) -> None:
        self.start(Content_Length=str(self.server.size + len(b'{"pad": ""}')))
        for piece in self.body_pieces():
            self.wfile.write(piece)

    def mode_gzip(self) -> None:
        body = self.server.bomb()
        self.start(Content_Encoding="gzip", Content_Length=str(len(body)))
        self.wfile.write(body)

    def mode_drip(self) -> None:
        self.start(Content_Length="4096")
        deadline = time.monotonic() + self.server.max_seconds
        for _ in range(4096):
            if time.monotonic() > deadline:
                return
            self.wfile.write(b" ")
            time.sleep(DRIP_SECONDS)

    def mode_driphead(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
        deadline = time.monotonic() + self.server.max_seconds
        while time.monotonic() < deadline:
            self.wfile.write(b"a")
            time.sleep(DRIP_SECONDS)

    def start(self, **headers: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()

    def body_pieces(self) -> Iterator[bytes]:
        """``{"pad": "aaaa...."}`` in 64 KiB pieces, bounded in size and time."""
        yield b'{"pad": "'
        deadline = time.monotonic() + self.server.max_seconds
        for _ in range(self.server.size // len(BLOCK)):
            if time.monotonic() > deadline:
                return
            yield BLOCK
        yield b'"}'

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the benchmark prints what matters."""


class HostileServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, size: int, max_seconds: float) -> None:
        super().__init__(("127.0.0.1", 0), Hostile)
        self.size = size
        self.max_seconds = max_seconds
        self._bomb: bytes | None = None
        self._bomb_lock = threading.Lock()

    def bomb(self) -> bytes:
        """The gzip body, compressed once on first use."""
        with self._bomb_lock:
            if self._bomb is None:
                inflated = b'{"pad": "' + BLOCK * (self.size // len(BLOCK)) + b'"}'
                self._bomb = gzip.compress(inflated, compresslevel=9)
            return self._bomb


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=50, help="body size in MiB (50)")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="per answer (60)")
    parser.add_argument("--lifetime", type=float, default=1800.0, help="server lifetime (1800)")
    args = parser.parse_args(argv)
    server = HostileServer(args.size_mib * 1024 * 1024, args.max_seconds)
    timer = threading.Timer(args.lifetime, server.shutdown)
    timer.daemon = True
    timer.start()
    print(f"listening: http://127.0.0.1:{server.server_address[1]}/", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
