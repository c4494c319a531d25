"""A node's TLS failures told apart (``reason="certificate"`` for a certificate that fails
verification, ``reason="tls"`` for a failed handshake, never ``connection``): an expired, a not
yet valid, a self-signed certificate, one for another host name, a client certificate demanded,
a protocol mismatch, and a node that speaks only HTTP/2, over real sockets with certificates
made here; then end to end: the exporter's log line, status page, error counter and
``/probe?debug=true`` say which. Never an insecure retry: the node never sees a request."""

from __future__ import annotations

import ssl
import warnings
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml

from exporter.config.nodes import NodeConfig, TlsConfig
from exporter.errors import TransferError
from exporter.model.reasons import Reason
from exporter.poll.client import NodeClient, classify
from exporter.poll.engine import Engine
from exporter.poll.results import FetchError
from tests.support.certs import KeyPair, Pki
from tests.support.documents import health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.http import fetch
from tests.support.node_get import get_document
from tests.support.processes import ready_exporter
from tests.support.waiting import wait_until

#: An HTTP/2 server's first bytes: an empty SETTINGS frame, then GOAWAY (PROTOCOL_ERROR), what
#: an h2-only server sends to a client that opened with an HTTP/1.1 request.
HTTP2_PREFACE = bytes.fromhex("000000040000000000") + bytes.fromhex("000008070000000000")
HTTP2_PREFACE += bytes.fromhex("0000000000000001")


def _server(pair: KeyPair, **settings: object) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.cert, pair.key)
    for name, value in settings.items():
        setattr(context, name, value)
    return context


def _demanding(pki: Pki) -> ssl.SSLContext:
    """A TLS 1.3 server that demands a client certificate issued by the test CA."""
    context = _server(pki.server)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(pki.ca)
    return context


def _expired(pki: Pki) -> KeyPair:
    return pki.issue_dated("expired", "20200101000000Z", "20210101000000Z")


def _not_yet_valid(pki: Pki) -> KeyPair:
    return pki.issue_dated("future", "20980101000000Z", "20991231000000Z")


def _elsewhere(pki: Pki) -> KeyPair:
    return pki.issue("elsewhere", "subjectAltName=DNS:elsewhere.example")


#: Each case: how the node serves (given the session's PKI), the scheme of its URL, and what
#: the failure's detail must start with (one of the ``|``-separated texts); the first four
#: are the node's certificate failing verification (VERIFIED), the others handshakes.
CASES: dict[str, tuple[Callable[[Pki], ssl.SSLContext | None], str, str]] = {
    "expired": (
        lambda pki: _server(_expired(pki)),
        "https",
        "the node's certificate has expired (notAfter 2021-01-01T00:00:00Z)",
    ),
    "not yet valid": (
        lambda pki: _server(_not_yet_valid(pki)),
        "https",
        "the node's certificate is not yet valid (notBefore 2098-01-01T00:00:00Z)",
    ),
    "self-signed": (
        lambda pki: _server(pki.stranger),
        "https",
        "the node's certificate is self-signed",
    ),
    "host name mismatch": (
        lambda pki: _server(_elsewhere(pki)),
        "https",
        "host name mismatch: the node's certificate is not for the host in its URL",
    ),
    "client certificate required": (  # the alert, or the server's reset that overtook it
        _demanding,
        "https",
        "client certificate required: the node demands one|the node reset the connection "
        "right after the TLS handshake, before any answer: it may demand a client certificate",
    ),
    "plain HTTP on https": (
        lambda pki: None,
        "https",
        "protocol mismatch: the node does not answer TLS on this port",
    ),
}


VERIFIED = ("expired", "not yet valid", "self-signed", "host name mismatch")


def _reason(case: str) -> Reason:
    return Reason.CERTIFICATE if case in VERIFIED else Reason.TLS


@pytest.fixture(scope="module")
def pki_nodes(pki: Pki) -> dict[str, ssl.SSLContext | None]:
    """Each case's server context, made once (the dated certificates take a second)."""
    return {case: serve(pki) for case, (serve, _, _) in CASES.items()}


def _start(fake_nodes: FakeNodes, context: ssl.SSLContext | None) -> FakeNode:
    node = fake_nodes.start(tls=context)
    node.set("/health", health_doc([]))
    return node


def _url(node: FakeNode, scheme: str) -> str:
    return f"{scheme}://127.0.0.1:{node.port}/"


def _fetch_error(engine: Engine, url: str, pki: Pki) -> FetchError:
    client = NodeClient(engine, NodeConfig("n", url, tls=TlsConfig(pki.ca)), 1 << 20)
    try:
        get_document(client, ["health"], client.now() + 10)
    except FetchError as error:
        return error
    raise AssertionError("the request succeeded")


@pytest.mark.parametrize("case", list(CASES))
def test_tls_failures_are_told_apart(
    case: str,
    engine: Engine,
    fake_nodes: FakeNodes,
    pki: Pki,
    pki_nodes: dict[str, ssl.SSLContext | None],
) -> None:
    _, scheme, detail = CASES[case]
    node = _start(fake_nodes, pki_nodes[case])
    error = _fetch_error(engine, _url(node, scheme), pki)
    assert error.reason is _reason(case)
    assert error.detail.startswith(tuple(detail.split("|"))), error.detail
    assert node.paths == []  # no request went out, and none insecurely


def test_a_tls_server_sharing_no_version_is_a_protocol_mismatch(
    engine: Engine, fake_nodes: FakeNodes, pki: Pki
) -> None:
    """A node that speaks only TLS 1.0 and 1.1 (libcurl's OpenSSL asks for 1.2 at least)."""
    with warnings.catch_warnings():  # the old versions are deprecated: that is the point
        warnings.simplefilter("ignore", DeprecationWarning)
        context = _server(
            pki.server,
            minimum_version=ssl.TLSVersion.TLSv1,
            maximum_version=ssl.TLSVersion.TLSv1_1,
        )
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    node = _start(fake_nodes, context)
    error = _fetch_error(engine, _url(node, "https"), pki)
    assert error.reason is Reason.TLS
    assert error.detail.startswith("protocol mismatch: "), error.detail


@pytest.mark.parametrize("tls", [False, True])
def test_an_http2_only_node_says_so(
    tls: bool, engine: Engine, fake_nodes: FakeNodes, pki: Pki
) -> None:
    """A node answering an HTTP/1.1 request with an HTTP/2 server preface: over TLS without
    ALPN or in clear text (h2c); libcurl offers h2 by ALPN, so an h2 node that negotiates it
    is served as HTTP/2."""
    node = fake_nodes.start(tls=_server(pki.server) if tls else None)
    node.raw("/health", HTTP2_PREFACE)
    error = _fetch_error(engine, node.url, pki)
    assert error.reason is Reason.CONNECTION
    assert "speaks only HTTP/2" in error.detail, error.detail
    assert "transfer failed" not in error.detail


@pytest.mark.integration
def test_the_log_status_page_metrics_and_probe_debug_say_which(
    tmp_path: Path,
    fake_nodes: FakeNodes,
    pki: Pki,
    pki_nodes: dict[str, ssl.SSLContext | None],
) -> None:
    shown = ("expired", "client certificate required", "host name mismatch")
    nodes = {case: _start(fake_nodes, pki_nodes[case]) for case in shown}
    names = {case: case.replace(" ", "-") for case in shown}
    tls = {"ca_file": pki.ca}
    config = tmp_path / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "scrape_interval": "2s",
                "scrape_timeout": "2s",
                "nodes": [
                    {"name": names[case], "url": _url(node, "https"), "tls_config": tls}
                    for case, node in nodes.items()
                ],
                "probe": {
                    "allowed_targets": [r"https://127\.0\.0\.1:\d+/"],
                    "modules": {"default": {"tls_config": tls}},
                    "debug": True,  # off by default: its log tells open ports from closed
                },
            }
        )
    )
    with ready_exporter(config) as exporter:
        metrics = fetch(exporter.base + "/metrics").text
        page = fetch(exporter.base + "/").text
        expired = nodes["expired"]
        debug = fetch(
            exporter.base + "/probe?" + urlencode({"target": expired.url, "debug": "true"}),
            timeout=20,
        ).text
        wait_until(lambda: exporter.log().count(" is down") >= len(shown), message=exporter.log)
        log = exporter.log()
    for case in shown:
        _, _, detail = CASES[case]
        name = names[case]
        line = next(x for x in log.splitlines() if f'msg="node {name} is down"' in x)
        reason = _reason(case).value
        said = detail.split("|")
        assert any(f'reason={reason} error="{text}' in line for text in said), line
        shown_page = page.replace("&#x27;", "'")
        assert any(f"{reason}: {text}" in shown_page for text in said), case
        sample = (
            f'ledger_node_scrape_errors_total{{endpoint="health",node="{name}",reason="{reason}"}}'
        )
        assert f"{sample} 0.0" not in metrics and sample in metrics, case
        assert f'node="{name}",reason="connection"}} 0.0' in metrics
    assert (
        "certificate: the node's certificate has expired (notAfter 2021-01-01T00:00:00Z)" in debug
    )
    for node in nodes.values():
        assert node.paths == []


@pytest.mark.parametrize(
    ("code", "message", "detail"),
    [  # libcurl 8's error buffer, as seen from the servers above and their TLS 1.2 variants
        (
            56,
            "OpenSSL SSL_read: OpenSSL/3.6.5: error:0A00045C:SSL routines::tlsv13 alert "
            "certificate required, errno 0",
            "client certificate required: the node demands one",
        ),
        (
            35,
            "TLS connect error: error:0A000410:SSL routines::ssl/tls alert handshake failure",
            "the node refused the handshake (handshake_failure alert): it may demand a client",
        ),
        (
            35,
            "TLS connect error: error:0A00042E:SSL routines::tlsv1 alert protocol version",
            "protocol mismatch: the node and the exporter share no TLS version",
        ),
        (
            35,
            "TLS connect error: error:0A000418:SSL routines::tlsv1 alert unknown ca",
            "the node does not trust the exporter's client certificate",
        ),
        (
            35,
            "TLS connect error: error:0A0000FF:SSL routines::something new",
            "TLS handshake failed (something new)",
        ),
        (56, "Recv failure: Connection reset by peer", None),  # no new TLS connection
    ],
)
def test_the_handshake_alert_in_libcurls_error_buffer_says_which(
    code: int, message: str, detail: str | None
) -> None:
    error = classify(TransferError(code, message), "/health", 10)
    if detail is None:
        assert error.reason is Reason.CONNECTION
    else:
        assert (error.reason, error.detail[: len(detail)]) == (Reason.TLS, detail)


def test_a_certificate_with_bytes_that_are_not_utf8_fails_alone(
    engine: Engine, fake_nodes: FakeNodes, pki: Pki
) -> None:
    """An expired certificate carrying bytes that are not UTF-8 in a field libcurl prints (a
    Netscape comment here) once ended the engine thread as its dates were read: every node
    then read down until a restart. It fails alone, with its dates, and the engine goes on."""
    comment = "nsComment=DER:16:03:ff:fe:fd"  # an IA5String of three bytes beyond ASCII
    odd = pki.issue_dated("odd-comment", "20200101000000Z", "20210101000000Z", comment)
    hostile = _start(fake_nodes, _server(odd))
    error = _fetch_error(engine, _url(hostile, "https"), pki)
    assert error.reason is Reason.CERTIFICATE
    assert error.detail.startswith("the node's certificate has expired"), error.detail
    healthy = _start(fake_nodes, None)
    client = NodeClient(engine, NodeConfig("ok", _url(healthy, "http")), 1 << 20)
    assert get_document(client, ["health"], client.now() + 10) == health_doc([])
