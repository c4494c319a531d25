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

and, for answers that are small enough to be read but costly to decode and read (issue 23), a
``/health`` listing ``--chains`` chains, each chain (and block) answering at once with:

- ``durations``: two Go durations of 1.8 million ``0s`` parts each (6.9 MiB)
- ``arrays``: council, peers and vote sessions of 10^5 elements each (4.1 MiB; the
  ``/health`` lists 10^5 network peers)
- ``strings``: a list of 2.4 million empty strings (6.9 MiB)

Every answer stops after ``--max-seconds`` or when the client goes away, and the whole server
stops after ``--lifetime`` seconds: nothing here runs unbounded.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BLOCK = b"a" * (64 * 1024)
DRIP_SECONDS = 0.2
ELEMENTS = 100_000


def costly_documents() -> dict[str, bytes]:
    """The chain answers of the costly modes, each under the default 8 MiB cap."""
    durations = {"blockHeight": 1, "consensus": dict.fromkeys(
        ("consensusTimeout", "txMaxTimeTrigger"), "0s" * 1_800_000
    )}  # fmt: skip
    arrays = {
        "blockHeight": 1,
        "councilMembers": [f"k{i}" for i in range(ELEMENTS)],
        "blockchainPeers": [f"p{i}" for i in range(ELEMENTS)],
        "voteSessions": {f"s{i}": {"round": i} for i in range(ELEMENTS)},
    }
    strings = {"blockHeight": 1, "pad": [""] * 2_400_000}
    return {
        name: json.dumps(document, separators=(",", ":")).encode()
        for name, document in (("durations", durations), ("arrays", arrays), ("strings", strings))
    }


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

    def mode_durations(self) -> None:
        self.costly("durations")

    def mode_arrays(self) -> None:
        self.costly("arrays")

    def mode_strings(self) -> None:
        self.costly("strings")

    def costly(self, mode: str) -> None:
        """The mode's costly document for a chain or block, a /health listing the chains."""
        if self.path.split("?")[0].endswith("/health"):
            peers = [f"n{i}" for i in range(ELEMENTS if mode == "arrays" else 4)]
            chains = [f"c{i}" for i in range(self.server.chains)]
            health = {"nodeVersion": "1.4.2", "blockchains": chains}
            body = json.dumps(health | {"network": {"peerCount": 4, "networkPeers": peers}})
            self.send_body(body.encode())
        else:
            self.send_body(self.server.costly[mode])

    def send_body(self, body: bytes) -> None:
        self.start(Content_Length=str(len(body)))
        self.wfile.write(body)

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

    def __init__(self, size: int, max_seconds: float, chains: int = 4) -> None:
        super().__init__(("127.0.0.1", 0), Hostile)
        self.size = size
        self.max_seconds = max_seconds
        self.chains = chains
        self.costly = costly_documents()
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
    parser.add_argument("--chains", type=int, default=4, help="chains of the costly modes (4)")
    args = parser.parse_args(argv)
    server = HostileServer(args.size_mib * 1024 * 1024, args.max_seconds, args.chains)
    timer = threading.Timer(args.lifetime, server.shutdown)
    timer.daemon = True
    timer.start()
    print(f"listening: http://127.0.0.1:{server.server_address[1]}/", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
