"""Golden files: recorded node answers in, exact bytes out, compared or rewritten.

``tests/testdata/golden/<case>/`` holds a ``config.yml`` and the answers of each node under
``nodes/<host>/`` (``health.json``, ``health.html``, ``blockchains/<id>.json``; a query is a
folder, ``wallets/w1/blockchainId=c1.json``; a ``.status`` file holds ``<status> <body>``).
``serve_case`` serves them from a fake node (the config's ``<host>.test`` URLs pointed there,
a node without a folder refuses connections), ``poll_golden_case`` runs one polling cycle
over them at a fixed clock.

``assert_golden(actual, path)`` is how every golden test compares: equal, or a failure with
the diff; with ``UPDATE_GOLDEN=1`` in the environment it rewrites the file first, after a
deliberate change (review the diff).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from exporter.config.exporter import Config, load_config
from exporter.expose import metrics
from exporter.expose.render import CHUNK_LINES, Renderer, text_format
from exporter.model.snapshot import Snapshot
from exporter.model.watch_readings import WatchStatus
from exporter.poll.cycle import Poller
from tests.support.fakenode import FakeNode
from tests.support.ports import closed_port_url
from tests.support.testdata import TESTDATA

UPDATE = "UPDATE_GOLDEN"
GOLDEN = TESTDATA / "golden"
PROBE_GOLDEN = TESTDATA / "golden-probe"
#: The wall clock of every golden cycle.
CLOCK = 1_700_000_000.0
#: The daemon's cases (``expected.prom`` and ``expected.om`` of /metrics)...
CASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir() and not p.name.startswith("watch-"))
#: ...and the watch lists' (``expected.prom``: the watch series of one cycle).
WATCH_CASES = sorted(p.name for p in GOLDEN.iterdir() if p.name.startswith("watch-"))

_CONTENT_TYPES = {".json": "application/json", ".html": "text/html", ".status": "application/json"}
_QUERY_FOLDER = re.compile(r"/([^/=]+=[^/]*)$")


def assert_golden(actual: str, expected_file: Path) -> None:
    """``actual`` is ``expected_file``'s text; ``UPDATE_GOLDEN=1`` rewrites the file first."""
    if os.environ.get(UPDATE):
        expected_file.write_text(actual, encoding="utf-8")
    if not expected_file.is_file():
        pytest.fail(f"{expected_file} is missing: run the test with {UPDATE}=1 to write it")
    expected = expected_file.read_text(encoding="utf-8")
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            str(expected_file),
            "actual",
        )
        pytest.fail(
            f"{expected_file} differs ({UPDATE}=1 rewrites it after a deliberate change):\n"
            + "".join(diff)
        )


def serve_case(server: FakeNode, config: Config, case: Path) -> Config:
    """Serve each node folder of ``case`` under ``/<case>/<host>`` and point the config's
    URLs there."""
    nodes = []
    for node in config.nodes:
        parts = urlsplit(node.url if node.url.endswith("/") else node.url + "/")
        host = str(parts.hostname).removesuffix(".test")
        folder = case / "nodes" / host
        if not folder.is_dir():
            nodes.append(replace(node, url=closed_port_url()))
            continue
        prefix = f"/{case.name}/{host}{parts.path}"
        for path in sorted(folder.rglob("*.*")):
            body, status = path.read_text(), 200
            if path.suffix == ".status":
                code, _, body = body.partition(" ")
                status = int(code)
            relative = path.relative_to(folder).with_suffix("").as_posix()
            relative = _QUERY_FOLDER.sub(r"?\1", relative)  # wallets/w1/blockchainId=c1
            content_type = _CONTENT_TYPES[path.suffix]
            server.set(prefix + relative, body.encode(), status, content_type=content_type)
        nodes.append(replace(node, url=server.url.rstrip("/") + prefix))
    return replace(config, nodes=tuple(nodes))


def poll_golden_case(case: Path, server: FakeNode | None = None) -> Snapshot:
    """One polling cycle over the recorded answers of ``case``, at ``CLOCK``; served by
    ``server``, or by a fake node of its own."""
    own = server is None
    server = server or FakeNode().start()
    try:
        config = serve_case(server, load_config(str(case / "config.yml")), case)
        poller = Poller(config, lambda _: None, monotonic=lambda: CLOCK, wall=lambda: CLOCK)
        try:
            return poller.run_cycle()
        finally:
            poller.stop()
    finally:
        if own:
            server.stop()


def many_chunks_snapshot() -> Snapshot:
    """The documented case's nodes, CHUNK_LINES + 1 times over (renamed): every per-node
    family then spans several chunks of sample lines."""
    snapshot = poll_golden_case(GOLDEN / "documented")
    nodes = tuple(
        replace(node, name=f"{node.name}-{index}")
        for index in range(CHUNK_LINES + 1)
        for node in snapshot.nodes
    )
    return replace(snapshot, nodes=nodes, network=replace(snapshot.network, polled_peers=()))


def watch_exposition(status: WatchStatus) -> str:
    """The watch families of ``status``, as the writer writes them (a watch case's
    ``expected.prom``)."""
    snapshot = Snapshot(watch=status)
    return text_format(Renderer(), snapshot, metrics.WATCH_FAMILIES).decode()
