"""The fixtures of every test; what they wrap lives in ``tests/support/`` (see tests/README.md).

Test modules import helpers from ``tests.support``, never from another test module or from
this file (an import-linter contract in pyproject.toml keeps it so).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# Before the modules are imported: their asserts explain themselves as a test's do.
pytest.register_assert_rewrite("tests.support")

from exporter import __version__  # noqa: E402
from exporter.poll.engine import Engine  # noqa: E402
from tests.support import generation  # noqa: E402
from tests.support.alertmanager import Alertmanagers  # noqa: E402
from tests.support.certs import Pki, make_pki  # noqa: E402
from tests.support.clock import Clock  # noqa: E402
from tests.support.fakenode import FakeNode, FakeNodes  # noqa: E402
from tests.support.programs import require_program  # noqa: E402
from tests.support.prometheus import PrometheusServers, Promtool  # noqa: E402
from tests.support.schedule import WeightedFileScheduling  # noqa: E402
from tests.support.victoriametrics import VictoriaMetrics  # noqa: E402

#: Hypothesis draws the same examples on every ``make test`` run; a campaign draws anew.
generation.load_profile()


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unknown under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` (``make test``) as tests/support/schedule.py has it: the heaviest
    files first, the promtool unit-test files spread over the workers."""
    if config.getvalue("dist") != "loadfile":
        return None
    return WeightedFileScheduling(config, log)


@pytest.fixture
def fake_node() -> Iterator[FakeNode]:
    """A fake node answering nothing yet (404s): ``fake_node.set(...)``; stopped after."""
    node = FakeNode().start()
    yield node
    node.stop()


@pytest.fixture
def fake_nodes() -> Iterator[FakeNodes]:
    """More fake nodes, or ones with options: ``fake_nodes.start(keep_alive=True)``; all
    stopped after the test."""
    nodes = FakeNodes()
    yield nodes
    nodes.stop_all()


@pytest.fixture
def health_node(fake_nodes: FakeNodes) -> FakeNode:
    """A keep-alive fake node answering ``/health`` (a node version): for tests of requests."""
    started = fake_nodes.start(keep_alive=True)
    started.set("/health", {"nodeVersion": "1.4.2"})
    return started


@pytest.fixture
def engine() -> Iterator[Engine]:
    """The HTTP engine with 8 slots, closed after the test (a test needing other slots or
    connections makes its own)."""
    running = Engine(8, f"ledger-exporter/{__version__}")
    yield running
    running.close()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """The session's test CA with a server, a client and a stranger certificate."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def promtool() -> Promtool:
    """Debian's promtool (``make tools`` installs it; the test fails without it)."""
    return Promtool(require_program("promtool"))


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[PrometheusServers]:
    """Real Prometheus servers for this test: ``prometheus.start({job: [address]})``; all
    stopped after it."""
    servers = PrometheusServers(tmp_path)
    yield servers
    servers.stop_all()


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[Alertmanagers]:
    """Real Alertmanager servers and webhook receivers for this test:
    ``alertmanager.webhook()``, ``alertmanager.start(config)``; all stopped after it."""
    servers = Alertmanagers(tmp_path)
    yield servers
    servers.stop_all()


@pytest.fixture
def victoriametrics(tmp_path: Path) -> Iterator[VictoriaMetrics]:
    """Real VictoriaMetrics processes for this test: ``victoriametrics.server([scrape_job(...)])``
    and ``victoriametrics.vmalert(server, rule_files)``; all stopped after it."""
    processes = VictoriaMetrics(tmp_path)
    yield processes
    processes.stop_all()


@pytest.fixture
def clock() -> Clock:
    """A hand-stepped clock for a test's simulator (and exporter)."""
    return Clock()
