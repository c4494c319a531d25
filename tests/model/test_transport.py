"""A node's transport as the snapshot holds it: which kind of request a path is, the phases
written per kind (no ``tls`` phase over http), the handshake as libcurl prints it read into
label values, and the info labels bounded by ``max_label_value_length`` (the series not
written, the drop counted once per handshake)."""

from __future__ import annotations

from exporter.bounds import Bounds, DropKind
from exporter.config.nodes import NodeConfig
from exporter.model.readings import read_health
from exporter.model.transport import (
    ENDPOINT_KINDS,
    NO_PHASES,
    PHASES,
    Handshake,
    TransportStatus,
    endpoint_kind,
)
from exporter.poll.client import TransportRecord
from exporter.poll.engine import Response, _common_name, _expiry
from exporter.poll.history import History
from exporter.poll.results import NodeResult
from tests.support.documents import health_doc


def test_each_path_is_its_kind_of_request() -> None:
    paths = [
        ["health"],
        ["blockchains", "c1"],
        ["blockchains", "c1", "blocks"],
        ["blockchains", "c1", "contracts", "0xab"],
        ["blockchains", "c1", "contracts", "0xab", "state"],
        ["wallets", "0xcd"],
    ]
    assert [ENDPOINT_KINDS[endpoint_kind(path)] for path in paths] == list(ENDPOINT_KINDS)


def test_the_last_answer_of_each_kind_is_kept_and_http_has_no_tls_phase() -> None:
    record = TransportRecord(https=False)
    assert list(TransportStatus().phase_rows()) == []
    record.note(0, Response(200, b"{}", phases=(0.001, 0.002, 0.0, 0.003, 0.004)))
    record.note(1, Response(200, b"{}", phases=(1.0, 1.0, 1.0, 1.0, 1.0)))
    record.note(1, Response(500, b"{}", phases=(0.0, 0.0, 0.0, 0.25, 0.5)))
    rows = list(record.status().phase_rows())
    assert rows == [
        ("health", "resolve", 0.001),
        ("health", "connect", 0.002),
        ("health", "processing", 0.003),
        ("health", "transfer", 0.004),
        ("blockchain", "resolve", 0.0),
        ("blockchain", "connect", 0.0),
        ("blockchain", "processing", 0.25),
        ("blockchain", "transfer", 0.5),
    ]
    secure = TransportRecord(https=True)
    secure.note(0, Response(200, b"{}", phases=(0.0,) * len(PHASES)))
    assert [phase for _, phase, _ in secure.status().phase_rows()] == list(PHASES)


def test_names_and_dates_are_read_as_libcurl_prints_them() -> None:
    assert _common_name(b"CN = srv") == "srv"
    assert _common_name(b"C = DE, O = Acme, CN = node-1.example") == "node-1.example"
    assert _common_name(b'O = x, CN = "a, b"') == "a, b"
    assert _common_name(b"O = no common name") == ""
    assert _expiry(b"Dec  3 09:45:17 2026 GMT") == 1796291117.0
    assert _expiry(b"not a date") is None


def _up(handshake: Handshake) -> NodeResult:
    transport = TransportStatus(handshake, phases=NO_PHASES, https=True)
    health = read_health(health_doc([]))
    return NodeResult(NodeConfig("n", "https://x/"), health, None, [], 0.1, transport=transport)


def test_a_label_over_the_bound_drops_the_info_series_and_is_counted_once() -> None:
    long_name = Handshake(1.0e9, "TLSv1.3", "TLS_AES_128_GCM_SHA256", "CA", "x" * 80, "ab" * 32)
    history = History()
    bounds = Bounds(label_value_length=64)
    for _ in range(2):
        (node,) = history.record([_up(long_name)], 1.0, bounds)
        assert node.transport is not None and not node.transport.info_fits
        assert node.dropped[list(DropKind).index(DropKind.LABEL_VALUE)] == 1  # not 2
    fits = long_name._replace(subject_cn="node-1")
    (node,) = history.record([_up(fits)], 2.0, bounds)
    assert node.transport is not None and node.transport.info_fits
