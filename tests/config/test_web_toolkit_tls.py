"""exporter-toolkit's remaining web config keys over real TLS sockets: ``cipher_suites``,
``prefer_server_cipher_suites``, ``curve_preferences``, ``client_allowed_sans``, and
``http_server_config.http2``; and a node_exporter-style web config that ``--config.check``
accepts and that serves as written.

Certificates come from the ``openssl`` command line tool, once per module: a test CA, a
server certificate for 127.0.0.1 signed by it (EC P-256, so the ECDSA suites apply), and
client certificates with each kind of SAN Go compares (DNS, IP, e-mail, URI).
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from exporter.config.tls import certificate_sans
from exporter.config.web import TlsServerConfig, WebConfig, load_web_config
from exporter.errors import ConfigError
from exporter.web.server import ExporterServer
from tests.support.certs import Pki
from tests.support.ports import free_port
from tests.support.testdata import REPO, TESTDATA
from tests.support.waiting import wait_until
from tests.support.webapp import StubApp

NODE_EXPORTER_STYLE = TESTDATA / "webconfig" / "node-exporter-style.yml"
NODE_EXPORTER_CERT = str(TESTDATA / "webconfig" / "node-exporter-style.crt")
NODE_EXPORTER_KEY = str(TESTDATA / "webconfig" / "node-exporter-style.key")
NODE_EXPORTER_PASSWORD = "not-a-real-password"  # of the file's bcrypt hash (test data only)

#: The client certificates made for the tests: name -> subjectAltName extension value.
CLIENTS = {
    "prometheus-dns": "DNS:prometheus.example",
    "other-dns": "DNS:other.example,DNS:also-other.example",
    "ip": "IP:10.1.2.3",
    "ipv6": "IP:2001:db8::1",
    "email": "email:ops@example.com",
    "uri": "URI:spiffe://cluster/ns/monitoring/sa/prometheus",
}
ALLOWED_SANS = (
    "prometheus.example",
    "10.1.2.3",
    "2001:db8::1",
    "ops@example.com",
    "spiffe://cluster/ns/monitoring/sa/prometheus",
)


class Certs:
    """The certificates these tests use, issued by the session's test CA (``pki``): a server
    (EC and RSA), a client per SAN kind, one without a SAN, and a self-signed stranger."""

    def __init__(self, pki: Pki) -> None:
        self.ca = pki.ca
        loopback = "subjectAltName=DNS:localhost,IP:127.0.0.1"
        self._pairs = {"server": pki.issue("toolkit-server", loopback)}
        # RSA: in TLS 1.2 an ECDSA certificate's own curve must be among the client's groups,
        # which would blur what curve_preferences alone decides
        self._pairs["server-rsa"] = pki.issue("toolkit-server-rsa", loopback, rsa=True)
        for name, san in CLIENTS.items():
            self._pairs[name] = pki.issue(
                f"toolkit-{name}", f"subjectAltName={san}", "extendedKeyUsage=clientAuth"
            )
        self._pairs["no-san"] = pki.issue("toolkit-no-san", "extendedKeyUsage=clientAuth")
        # a client certificate no CA here signed, with an allowed SAN (for the unverified modes)
        self._pairs["stranger"] = pki.issue(
            "toolkit-stranger", "subjectAltName=DNS:prometheus.example", self_signed=True
        )

    def path(self, name: str, suffix: str) -> str:
        """The ``crt`` or ``key`` file of certificate ``name``."""
        pair = self._pairs[name]
        return pair.cert if suffix == "crt" else pair.key


@pytest.fixture(scope="module")
def certs(pki: Pki) -> Certs:
    return Certs(pki)


@contextmanager
def serving(web: WebConfig) -> Iterator[int]:
    """An HTTPS server on a free loopback port with ``web``; its port."""
    server = ExporterServer("127.0.0.1:0", StubApp(), web)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def server_tls(certs: Certs, name: str = "server", **settings: object) -> WebConfig:
    cert, key = certs.path(name, "crt"), certs.path(name, "key")
    return WebConfig(tls=TlsServerConfig(cert, key, **settings))  # type: ignore[arg-type]


def client_context(
    certs: Certs,
    cert: str | None = None,
    ciphers: str | None = None,
    curve: str | None = None,
    tls12: bool = False,
) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(certs.ca)
    if cert is not None:
        context.load_cert_chain(certs.path(cert, "crt"), certs.path(cert, "key"))
    if tls12:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if ciphers is not None:
        context.set_ciphers(ciphers)
    if curve is not None:
        context.set_ecdh_curve(curve)  # OpenSSL 3: the client offers this group only
    return context


def get_metrics(port: int, context: ssl.SSLContext, headers: str = "") -> tuple[str, str]:
    """GET /metrics over TLS: (the negotiated cipher, the status line); ssl.SSLError or
    OSError when the handshake fails, ``(cipher, "")`` when the server closes unanswered."""
    request = f"GET /metrics HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n"
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        cipher = tls.cipher()
        try:
            tls.sendall(request.encode())
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
        except (ssl.SSLError, OSError):
            answer = b""
    return (cipher[0] if cipher else ""), answer.split(b"\r\n", 1)[0].decode()


def refused(port: int, context: ssl.SSLContext) -> bool:
    """The connection ends without an answer (in the handshake, or right after it)."""
    try:
        return get_metrics(port, context)[1] == ""
    except (ssl.SSLError, OSError):
        return True


# --- cipher_suites and prefer_server_cipher_suites -----------------------------------------

AES128 = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
CHACHA = "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
OPENSSL = {AES128: "ECDHE-ECDSA-AES128-GCM-SHA256", CHACHA: "ECDHE-ECDSA-CHACHA20-POLY1305"}


@pytest.mark.parametrize(
    ("offered", "answered"),
    [
        ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
        ("ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305"),
        ("ECDHE-ECDSA-AES256-GCM-SHA384", None),  # not in the list: no handshake
        ("ECDHE-ECDSA-AES256-SHA", None),
    ],
)
def test_cipher_suites_limit_tls12(certs: Certs, offered: str, answered: str | None) -> None:
    with serving(server_tls(certs, cipher_suites=(AES128, CHACHA))) as port:
        context = client_context(certs, ciphers=offered, tls12=True)
        if answered is None:
            assert refused(port, context)
        else:
            assert get_metrics(port, context) == (answered, "HTTP/1.1 200 OK")


def test_cipher_suites_leave_tls13_alone_as_go_does(certs: Certs) -> None:
    with serving(server_tls(certs, cipher_suites=(AES128,))) as port:
        cipher, status = get_metrics(port, client_context(certs))
    assert cipher.startswith("TLS_") and status == "HTTP/1.1 200 OK"


def test_tls13_suites_only_mean_no_tls12(certs: Certs) -> None:
    """Go refuses every TLS 1.2 handshake when no TLS 1.2 suite is listed; so do we."""
    with serving(server_tls(certs, cipher_suites=("TLS_AES_128_GCM_SHA256",))) as port:
        assert refused(port, client_context(certs, tls12=True))
        assert get_metrics(port, client_context(certs))[1] == "HTTP/1.1 200 OK"


@pytest.mark.parametrize(("prefer", "chosen"), [(True, AES128), (False, CHACHA)])
def test_prefer_server_cipher_suites(certs: Certs, prefer: bool, chosen: str) -> None:
    """Server order AES-128, ChaCha20; the client prefers ChaCha20: the server's list wins
    when preferred (the default), the client's otherwise."""
    web = server_tls(certs, cipher_suites=(AES128, CHACHA), prefer_server_cipher_suites=prefer)
    client_order = f"{OPENSSL[CHACHA]}:{OPENSSL[AES128]}"
    with serving(web) as port:
        cipher, status = get_metrics(port, client_context(certs, ciphers=client_order, tls12=True))
    assert (cipher, status) == (OPENSSL[chosen], "HTTP/1.1 200 OK")


# --- curve_preferences ---------------------------------------------------------------------


@pytest.mark.parametrize("tls12", [True, False], ids=["tls12", "tls13"])
@pytest.mark.parametrize(
    ("curves", "offered", "accepted"),
    [
        (("CurveP384",), "secp384r1", True),
        (("CurveP384",), "prime256v1", False),
        (("CurveP384",), "X25519", False),
        (("X25519", "CurveP256"), "prime256v1", True),
        (("X25519", "CurveP256"), "X25519", True),
        (("X25519", "CurveP256"), "secp521r1", False),
        (("CurveP521",), "secp521r1", True),
    ],
)
def test_curve_preferences_are_the_groups_offered(
    certs: Certs, curves: tuple[str, ...], offered: str, accepted: bool, tls12: bool
) -> None:
    with serving(server_tls(certs, "server-rsa", curve_preferences=curves)) as port:
        context = client_context(certs, curve=offered, tls12=tls12)
        if accepted:
            assert get_metrics(port, context)[1] == "HTTP/1.1 200 OK"
        else:
            assert refused(port, context)


# --- client_allowed_sans -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("auth", "client", "allowed"),
    [
        ("RequireAndVerifyClientCert", "prometheus-dns", True),
        ("RequireAndVerifyClientCert", "ip", True),
        ("RequireAndVerifyClientCert", "ipv6", True),
        ("RequireAndVerifyClientCert", "email", True),
        ("RequireAndVerifyClientCert", "uri", True),
        ("RequireAndVerifyClientCert", "other-dns", False),
        ("RequireAndVerifyClientCert", "no-san", False),
        ("VerifyClientCertIfGiven", "prometheus-dns", True),
        ("VerifyClientCertIfGiven", None, False),  # no certificate: no allowed SAN
        ("RequestClientCert", "stranger", True),  # unverified, as Go's, but its SAN is checked
        ("RequestClientCert", "other-dns", False),
        ("RequestClientCert", None, False),
        ("RequireAnyClientCert", "stranger", True),
    ],
)
def test_client_allowed_sans(certs: Certs, auth: str, client: str | None, allowed: bool) -> None:
    web = server_tls(
        certs,
        client_auth_type=auth,
        client_ca_file=certs.ca if "Verify" in auth else None,
        client_allowed_sans=ALLOWED_SANS,
    )
    with serving(web) as port:
        context = client_context(certs, cert=client)
        if allowed:
            assert get_metrics(port, context)[1] == "HTTP/1.1 200 OK"
        else:
            assert refused(port, context)


def test_without_an_allow_list_any_verified_client_is_served(certs: Certs) -> None:
    web = server_tls(certs, client_auth_type="RequireAndVerifyClientCert", client_ca_file=certs.ca)
    with serving(web) as port:
        assert get_metrics(port, client_context(certs, cert="other-dns"))[1] == "HTTP/1.1 200 OK"


def _der(path: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(Path(path).read_text())


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("prometheus-dns", {"prometheus.example"}),
        ("other-dns", {"other.example", "also-other.example"}),
        ("ip", {"10.1.2.3"}),
        ("ipv6", {"2001:db8::1"}),
        ("email", {"ops@example.com"}),
        ("uri", {"spiffe://cluster/ns/monitoring/sa/prometheus"}),
        ("server", {"localhost", "127.0.0.1"}),
        ("no-san", set()),
    ],
)
def test_certificate_sans_as_go_lists_them(certs: Certs, name: str, expected: set[str]) -> None:
    assert certificate_sans(_der(certs.path(name, "crt"))) == expected


@pytest.mark.parametrize(
    "mangle",
    [
        lambda der: der[: len(der) // 2],
        lambda der: b"\x30\x85" + der[2:],
        lambda der: b"\x04" + der[1:],
        lambda der: der + b"\x00",
        lambda der: b"",
        lambda der: b"\x30",
    ],
    ids=["truncated", "long-length", "not-a-sequence", "trailing", "empty", "one-byte"],
)
def test_a_malformed_certificate_is_an_error_not_a_crash(certs: Certs, mangle: object) -> None:
    der = mangle(_der(certs.path("prometheus-dns", "crt")))  # type: ignore[operator]
    with pytest.raises(ValueError, match=r"\w"):  # a reason, never another exception
        certificate_sans(der)


# --- a node_exporter-style web config ------------------------------------------------------


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_EXPORTER_")}


def test_config_check_accepts_a_node_exporter_style_web_config() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "--config.check",
         f"--config.file={REPO / 'config' / 'example.yml'}",
         f"--web.config.file={NODE_EXPORTER_STYLE}"],
        capture_output=True, text=True, env=_clean_env(), timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == (
        f"{NODE_EXPORTER_STYLE}: OK, TLS, client certificates: RequireAndVerifyClientCert, "
        "2 allowed client SAN(s), 1 basic auth user(s), http2 ignored: HTTP/1.1 is served"
    )


def _node_exporter_client(tls12: bool = False, cert: bool = True) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(NODE_EXPORTER_CERT)
    if cert:  # the test certificate is its own CA, and its SAN 127.0.0.1 is allowed
        context.load_cert_chain(NODE_EXPORTER_CERT, NODE_EXPORTER_KEY)
    if tls12:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    return context


AUTH = "Authorization: Basic {}\r\n".format(
    base64.b64encode(f"prometheus:{NODE_EXPORTER_PASSWORD}".encode()).decode()
)


def test_a_node_exporter_style_web_config_serves_as_written(certs: Certs) -> None:
    web = load_web_config(str(NODE_EXPORTER_STYLE))
    with serving(web) as port:
        cipher, status = get_metrics(port, _node_exporter_client(tls12=True), AUTH)
        assert (cipher, status) == ("ECDHE-ECDSA-AES128-GCM-SHA256", "HTTP/1.1 200 OK")
        assert get_metrics(port, _node_exporter_client(), AUTH)[1] == "HTTP/1.1 200 OK"
        assert get_metrics(port, _node_exporter_client())[1] == "HTTP/1.1 401 Unauthorized"
        assert refused(port, _node_exporter_client(cert=False))
        # a certificate from another CA: not verified, whatever its SAN
        other = _node_exporter_client(cert=False)
        other.load_cert_chain(certs.path("stranger", "crt"), certs.path("stranger", "key"))
        assert refused(port, other)


@pytest.mark.integration
def test_the_exporter_says_once_that_http2_is_not_served(tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text("nodes: [{name: n, url: 'http://127.0.0.1:9/'}]\n")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", f"--config.file={config}",
         f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={NODE_EXPORTER_STYLE}"],
        stderr=subprocess.PIPE, text=True, env=_clean_env(), cwd=REPO,
    )  # fmt: skip
    try:
        wait_until(
            lambda: get_metrics(port, _node_exporter_client(), AUTH)[1] == "HTTP/1.1 200 OK",
            timeout=30,
            message="the exporter did not serve over TLS",
            ignoring=(OSError,),
        )
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert stderr.count("HTTP/2 is not served") == 1, stderr
    assert "tls=true" in stderr


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ("curve_preferences: [X25519]", "curve_preferences"),
        ("client_auth_type: RequestClientCert", "client_auth_type"),
    ],
)
def test_a_setting_this_python_cannot_apply_is_an_error_naming_it(
    certs: Certs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, key: str
) -> None:
    """Where OpenSSL's SSL_CTX cannot be reached safely (another Python's object layout), the
    key that needs it is refused, by name, rather than silently not applied."""

    def unreachable(context: ssl.SSLContext) -> None:
        raise ssl.SSLError("this Python's ssl module does not hold its SSL_CTX where expected")

    monkeypatch.setattr("exporter.config.tls._ssl_ctx", unreachable)
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {certs.path('server', 'crt')}\n"
        f"  key_file: {certs.path('server', 'key')}\n  {setting}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_web_config(str(web))
    (problem,) = caught.value.problems
    assert problem.startswith(f"tls_server_config.{key}: ")
    assert "does not hold its SSL_CTX where expected" in problem
