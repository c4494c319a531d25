"""A node's last TLS handshake outlives a reload that keeps its name and URL: its kept-alive
connection makes no new handshake to read, and the certificate series must not vanish with
the old config's clients."""

from __future__ import annotations

import ssl
from dataclasses import replace

from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig, TlsConfig
from exporter.poll.cycle import Poller
from tests.support.certs import Pki
from tests.support.documents import health_doc
from tests.support.fakenode import FakeNodes


def test_the_handshake_is_kept_across_a_reload(fake_nodes: FakeNodes, pki: Pki) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server.cert, pki.server.key)
    node = fake_nodes.start(keep_alive=True, tls=context)
    node.set("/health", health_doc([]))
    url = f"https://127.0.0.1:{node.port}/"
    config = Config(nodes=(NodeConfig("secure", url, tls=TlsConfig(pki.ca)),))
    poller = Poller(config, lambda snapshot: None)
    try:
        first = poller.run_cycle().nodes[0].transport
        assert first is not None and first.handshake is not None
        relabelled = replace(config.nodes[0], labels=(("site", "eu"),))
        poller.apply(replace(config, nodes=(relabelled,)))
        second = poller.run_cycle().nodes[0].transport
        assert node.connections_accepted == 1  # the same connection: no new handshake
        assert second is not None and second.handshake == first.handshake
        moved = replace(relabelled, url=f"https://localhost:{node.port}/")
        poller.apply(replace(config, nodes=(moved,)))
        third = poller.run_cycle().nodes[0].transport
        assert third is not None and third.handshake is not None  # read anew from localhost
        assert node.connections_accepted == 2
    finally:
        poller.stop()
