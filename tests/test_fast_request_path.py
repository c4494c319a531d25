"""Issue 22's cheaper per-request path: the URL built without ``quote`` for plain names and
values, read exactly as ``quote`` writes them."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest

from exporter import __version__
from exporter.config.nodes import NodeConfig
from exporter.poll.client import NodeClient
from exporter.poll.engine import Engine


@pytest.fixture
def engine() -> Iterator[Engine]:
    running = Engine(2, f"ledger-exporter/{__version__}")
    yield running
    running.close()


@pytest.mark.parametrize(
    "text", ["height", "18337", "0", "", "a b", "a&b", "ü", "²", "-1", "a.b", "..", "\x00"]
)
def test_a_query_name_or_value_is_written_as_quote_writes_it(engine: Engine, text: str) -> None:
    client = NodeClient(engine, NodeConfig("n", "http://h/p/"), 1 << 20)
    url = client.url_for(["blockchains", "c1", "blocks"], ((text, text),))
    assert url == f"http://h/p/blockchains/c1/blocks?{quote(text, safe='')}={quote(text, safe='')}"
