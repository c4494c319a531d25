"""Generated node answers against the metric contract, over real sockets.

The fleets of ``tests/model/test_node_answers.py`` served by real HTTP servers (``FakeNode``, one
per node) and polled by the real engine (libcurl, the response size cap, the read budget),
then checked by the same oracle (``tests/support/contract_oracle.py``). Fewer examples: the
in-process suite tries thousands, this one proves the seam it uses changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import pytest
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings

from exporter import __version__
from exporter.expose.render import OPENMETRICS_END, Renderer, openmetrics_format, text_format
from exporter.poll.engine import Engine
from tests.support import generation
from tests.support.contract_oracle import Cycle, Request, check
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.scenarios import (
    CLOCKS,
    Answers,
    Fleet,
    captured_logs,
    config_of,
    fleets,
    hand_clocked_poller,
    samples,
)

EXAMPLES = 40


@pytest.fixture
def engine() -> Iterator[Engine]:
    running = Engine(64, f"ledger-exporter/{__version__}", 3)
    yield running
    running.close()


def encoded(request: Request) -> str:
    """The path the exporter sends for ``request``: each segment percent-encoded (``.`` and
    ``..`` too), then the query."""
    segments, query = request

    def segment(text: str) -> str:
        quoted = quote(text, safe="")
        return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted

    path = "/" + "/".join(segment(s) for s in segments)
    if query:
        path += "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in query)
    return path


def decoded(path: str) -> Request:
    parts = urlsplit(path)
    segments = tuple(unquote(s, errors="strict") for s in parts.path[1:].split("/"))
    return segments, tuple(parse_qsl(parts.query, keep_blank_values=True, errors="strict"))


def serve(node: FakeNode, answers: Answers) -> None:
    node.reset()
    for request, answer in answers.items():
        node.set(encoded(request), answer.body, answer.status)


def run_over_sockets(fleet: Fleet, nodes: list[FakeNode], engine: Engine) -> None:
    """Both cycles of ``fleet`` served by ``nodes`` and polled by ``engine``; the last
    exposition checked against the oracle and both parsers."""
    config = config_of(fleet.setup, [node.url for node in nodes])
    poller, clock = hand_clocked_poller(config, engine)
    renderer = Renderer()
    cycles: list[Cycle] = []
    names = [name for name, _ in fleet.setup.nodes]
    with captured_logs() as logs:
        try:
            for at, answers in zip(CLOCKS, fleet.answers, strict=True):
                clock[0] = at
                for name, node in zip(names, nodes, strict=False):
                    serve(node, answers[name])
                snapshot = poller.run_cycle()
                asked = {
                    name: [decoded(path) for path in node.paths]
                    for name, node in zip(names, nodes, strict=False)
                }
                cycles.append(Cycle(at, answers, asked))
                text = text_format(renderer, snapshot)
        finally:
            poller.stop()
    assert not logs.tracebacks(), logs.tracebacks()
    found = samples(text)
    openmetrics = openmetrics_format(renderer, snapshot) + OPENMETRICS_END
    assert samples(openmetrics, openmetrics=True) == found
    problems = check(fleet.setup, cycles, found)
    assert not problems, "\n".join([*problems, "--- the fleet:", fleet.show()])


@pytest.mark.integration
def test_fleets_over_sockets(fake_nodes: FakeNodes, engine: Engine) -> None:
    nodes = [fake_nodes.start() for _ in range(3)]

    @hypothesis_settings(
        generation.settings(EXAMPLES),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    )
    @given(fleets(most_nodes=3))
    def over_sockets(fleet: Fleet) -> None:
        run_over_sockets(fleet, nodes, engine)

    over_sockets()
