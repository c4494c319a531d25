"""``--web.config.file``: validation, bcrypt basic auth and the TLS context served with.

Invalid cases are ``testdata/webconfig/invalid-*.yml``, each beginning with one
``# error: <problem>`` line per expected problem, in order. Certificates come from the
session's test CA (the ``pki`` fixture), and TLS is checked with real handshakes over
loopback sockets.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

import bcrypt
import pytest

from exporter.config.web import TlsServerConfig, WebConfig, load_web_config
from exporter.errors import ConfigError, PasswordChecksBusyError
from tests.support.certs import Pki
from tests.support.testdata import TESTDATA, expected_problems
from tests.support.waiting import wait_until

WEB_TESTDATA = TESTDATA / "webconfig"
INVALID_FILES = sorted(WEB_TESTDATA.glob("invalid-*.yml"))
PASSWORD = "correct horse battery staple"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()


def write(directory: Path, text: str) -> str:
    path = directory / "web.yml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_invalid_testdata_is_there_and_annotated() -> None:
    assert len(INVALID_FILES) >= 15
    for path in INVALID_FILES:
        assert expected_problems(path), f"{path.name} has no '# error:' line"


@pytest.mark.parametrize("path", INVALID_FILES, ids=lambda path: path.stem)
def test_invalid_web_config_reports_every_problem(path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_web_config(str(path))
    assert caught.value.problems == expected_problems(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_missing_web_config_file(tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    with pytest.raises(ConfigError) as caught:
        load_web_config(str(path))
    assert caught.value.problems == [
        f"cannot read the file: [Errno 2] No such file or directory: '{path}'"
    ]


HASH_2Y = HASH.replace("$2b$", "$2y$", 1)
TLS_FILES = "tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
Case = Callable[[Pki], tuple[str, WebConfig]]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(lambda pki: ("", WebConfig()), id="empty-file"),
        pytest.param(lambda pki: ("# nothing configured\n", WebConfig()), id="comments-only"),
        pytest.param(
            lambda pki: (
                f"basic_auth_users:\n  alice: '{HASH}'\n  bob: '{HASH_2Y}'\n",
                WebConfig(basic_auth_users={"alice": HASH, "bob": HASH_2Y}),
            ),
            id="basic-auth-users",
        ),
        pytest.param(
            lambda pki: (
                TLS_FILES.format(cert=pki.server.cert, key=pki.server.key),
                WebConfig(tls=TlsServerConfig(pki.server.cert, pki.server.key)),
            ),
            id="tls-defaults",
        ),
        pytest.param(
            lambda pki: (
                TLS_FILES.format(cert=pki.server.cert, key=pki.server.key)
                + "  client_auth_type: RequireAndVerifyClientCert\n"
                + f"  client_ca_file: {pki.stranger.cert}\n"
                + "  min_version: TLS13\n  max_version: TLS13\n",
                WebConfig(
                    tls=TlsServerConfig(
                        pki.server.cert,
                        pki.server.key,
                        "RequireAndVerifyClientCert",
                        pki.stranger.cert,
                        "TLS13",
                        "TLS13",
                    )
                ),
            ),
            id="tls-client-certificates",
        ),
        pytest.param(
            lambda pki: (
                TLS_FILES.format(cert=pki.server.cert, key=pki.server.key)
                + "  client_auth_type: RequestClientCert\n",
                WebConfig(
                    tls=TlsServerConfig(pki.server.cert, pki.server.key, "RequestClientCert")
                ),
            ),
            id="tls-request-client-cert-without-ca",
        ),
        pytest.param(
            lambda pki: (
                TLS_FILES.format(cert=pki.server.cert, key=pki.server.key)
                + f"basic_auth_users:\n  alice: '{HASH}'\n",
                WebConfig(
                    tls=TlsServerConfig(pki.server.cert, pki.server.key),
                    basic_auth_users={"alice": HASH},
                ),
            ),
            id="tls-and-basic-auth",
        ),
        pytest.param(
            lambda pki: (
                "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
                "    Strict-Transport-Security: max-age=31536000\n",
                WebConfig(
                    headers={
                        "X-Frame-Options": "deny",
                        "Strict-Transport-Security": "max-age=31536000",
                    }
                ),
            ),
            id="http-headers",
        ),
        pytest.param(
            lambda pki: (
                "http_server_config:\n  headers:\n    X-Frame-Options: DENY\n"
                "    X-Content-Type-Options: NoSniff\n"
                "    Content-Security-Policy: \"default-src 'none';\\tbase-uri 'none'\"\n",
                WebConfig(
                    headers={
                        "X-Frame-Options": "DENY",
                        "X-Content-Type-Options": "NoSniff",
                        "Content-Security-Policy": "default-src 'none';\tbase-uri 'none'",
                    }
                ),
            ),
            id="http-headers-any-case-and-tabs",
        ),
    ],
)
def test_valid_web_config(case: Case, pki: Pki, tmp_path: Path) -> None:
    text, expected = case(pki)
    assert load_web_config(write(tmp_path, text)) == expected


@pytest.mark.parametrize(
    "pick",
    [
        lambda pki: (pki.server.cert, pki.stranger.key),  # key of another certificate
        lambda pki: ("/dev/null", pki.server.key),  # readable but no certificate in it
        lambda pki: (pki.server.key, pki.server.cert),  # swapped
    ],
    ids=["mismatched-key", "empty-cert", "swapped"],
)
def test_certificates_that_cannot_be_loaded(
    pick: Callable[[Pki], tuple[str, str]], pki: Pki, tmp_path: Path
) -> None:
    cert, key = pick(pki)
    text = f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
    with pytest.raises(ConfigError) as caught:
        load_web_config(write(tmp_path, text))
    assert len(caught.value.problems) == 1
    # the line of cert_file, so a log line of a failed reload says where to look
    assert caught.value.problems[0].startswith(
        "line 2: tls_server_config: cannot load the certificate and key"
    )


# --- basic auth ---


def test_check_password_accepts_the_right_password() -> None:
    config = WebConfig(basic_auth_users={"alice": HASH})
    assert config.check_password("alice", PASSWORD)


@pytest.mark.parametrize(
    ("user", "password"),
    [
        ("alice", "wrong"),
        ("alice", ""),
        ("alice", PASSWORD + " "),
        ("alice", PASSWORD.upper()),
        ("mallory", PASSWORD),
        ("", PASSWORD),
        ("Alice", PASSWORD),
    ],
)
def test_check_password_refuses(user: str, password: str) -> None:
    config = WebConfig(basic_auth_users={"alice": HASH})
    assert not config.check_password(user, password)


@pytest.mark.parametrize("prefix", ["$2a$", "$2y$"])
def test_check_password_other_bcrypt_prefixes(prefix: str) -> None:
    config = WebConfig(basic_auth_users={"alice": HASH.replace("$2b$", prefix, 1)})
    assert config.check_password("alice", PASSWORD)
    assert not config.check_password("alice", "wrong")


def test_check_password_with_a_malformed_hash_refuses_without_raising() -> None:
    # load_web_config refuses such hashes; a WebConfig built in code must still not crash.
    config = WebConfig(basic_auth_users={"alice": "$2b$garbage"})
    assert not config.check_password("alice", PASSWORD)


class CountingCheckpw:
    """bcrypt.checkpw, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = bcrypt.checkpw

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.calls += 1
        return self.real(password, hashed)


def test_verified_password_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = CountingCheckpw()
    monkeypatch.setattr(bcrypt, "checkpw", spy)
    config = WebConfig(basic_auth_users={"alice": HASH, "bob": HASH})
    assert config.check_password("alice", PASSWORD)
    assert config.check_password("alice", PASSWORD)
    assert config.check_password("alice", PASSWORD)
    assert spy.calls == 1  # the cache answered the second and third time
    assert config.check_password("bob", PASSWORD)
    assert spy.calls == 2  # same password and hash, another user: not the same entry


def test_failed_password_is_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = CountingCheckpw()
    monkeypatch.setattr(bcrypt, "checkpw", spy)
    config = WebConfig(basic_auth_users={"alice": HASH})
    assert not config.check_password("alice", "wrong")
    assert not config.check_password("alice", "wrong")
    assert spy.calls == 2
    assert config.check_password("alice", PASSWORD)
    assert not config.check_password("alice", "wrong")
    assert spy.calls == 4


def test_cache_does_not_outlive_a_changed_hash() -> None:
    config = WebConfig(basic_auth_users={"alice": HASH})
    assert config.check_password("alice", PASSWORD)
    new_hash = bcrypt.hashpw(b"new password", bcrypt.gensalt(4)).decode()
    config.basic_auth_users["alice"] = new_hash
    assert not config.check_password("alice", PASSWORD)
    assert config.check_password("alice", "new password")


def test_repr_hides_password_hashes() -> None:
    config = WebConfig(basic_auth_users={"alice": HASH})
    assert config.check_password("alice", PASSWORD)
    assert HASH not in repr(config)
    assert "alice" not in repr(config)


# --- TLS ---


def test_no_tls_means_plain_http() -> None:
    assert WebConfig().ssl_context() is None


@pytest.mark.parametrize(
    ("client_auth_type", "verify_mode"),
    [
        ("NoClientCert", ssl.CERT_NONE),
        ("RequestClientCert", ssl.CERT_OPTIONAL),
        ("RequireAnyClientCert", ssl.CERT_REQUIRED),
        ("VerifyClientCertIfGiven", ssl.CERT_OPTIONAL),
        ("RequireAndVerifyClientCert", ssl.CERT_REQUIRED),
    ],
)
def test_ssl_context_client_auth(client_auth_type: str, verify_mode: int, pki: Pki) -> None:
    tls = TlsServerConfig(pki.server.cert, pki.server.key, client_auth_type, pki.ca)
    context = WebConfig(tls=tls).ssl_context()
    assert context is not None
    assert context.verify_mode == verify_mode
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_ssl_context_versions(pki: Pki) -> None:
    context = WebConfig(
        tls=TlsServerConfig(pki.server.cert, pki.server.key, min_version="TLS13")
    ).ssl_context()
    assert context is not None
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    tls = TlsServerConfig(pki.server.cert, pki.server.key, max_version="TLS12")
    context = WebConfig(tls=tls).ssl_context()
    assert context is not None
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> str:
    """Connect over loopback, exchange a few bytes, return the TLS version; raises on failure."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)

    def serve() -> None:
        try:
            connection, _ = listener.accept()
            connection.settimeout(5)
            with server.wrap_socket(connection, server_side=True) as tls:
                tls.sendall(b"ok")
                tls.recv(2)
        except (OSError, ssl.SSLError):
            pass  # the client sees the failure too, and reports it

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with (
            socket.create_connection(listener.getsockname(), timeout=5) as raw,
            client.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            assert tls.recv(2) == b"ok"
            tls.sendall(b"ok")
            return str(tls.version())
    finally:
        thread.join(5)
        listener.close()


def client_context(pki: Pki, with_certificate: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki.ca)
    if with_certificate:
        context.load_cert_chain(pki.client.cert, pki.client.key)
    return context


def server_context(config: WebConfig) -> ssl.SSLContext:
    context = config.ssl_context()
    assert context is not None
    return context


def test_tls_handshake_with_the_configured_certificate(pki: Pki) -> None:
    server = server_context(WebConfig(tls=TlsServerConfig(pki.server.cert, pki.server.key)))
    assert handshake(server, client_context(pki)) in ("TLSv1.2", "TLSv1.3")


def test_tls_handshake_refused_by_a_client_not_trusting_it(pki: Pki) -> None:
    server = server_context(WebConfig(tls=TlsServerConfig(pki.server.cert, pki.server.key)))
    client = ssl.create_default_context(cafile=pki.stranger.cert)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server, client)


def test_tls13_minimum_refuses_tls12_clients(pki: Pki) -> None:
    server = server_context(
        WebConfig(tls=TlsServerConfig(pki.server.cert, pki.server.key, min_version="TLS13"))
    )
    assert handshake(server, client_context(pki)) == "TLSv1.3"
    old_client = client_context(pki)
    old_client.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises(ssl.SSLError):
        handshake(server, old_client)


def test_tls12_maximum_is_kept(pki: Pki) -> None:
    server = server_context(
        WebConfig(tls=TlsServerConfig(pki.server.cert, pki.server.key, max_version="TLS12"))
    )
    assert handshake(server, client_context(pki)) == "TLSv1.2"


def test_required_client_certificate(pki: Pki) -> None:
    tls = TlsServerConfig(pki.server.cert, pki.server.key, "RequireAndVerifyClientCert", pki.ca)
    server = server_context(WebConfig(tls=tls))
    assert handshake(server, client_context(pki, with_certificate=True))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        handshake(server, client_context(pki))


# --- exporter-toolkit's hardening ---


def test_unknown_user_costs_one_bcrypt_comparison_as_a_wrong_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = CountingCheckpw()
    monkeypatch.setattr(bcrypt, "checkpw", spy)
    config = WebConfig(basic_auth_users={"alice": HASH})
    assert not config.check_password("mallory", "wrong")
    assert spy.calls == 1  # the same work as for a known user: no enumeration by timing
    assert not config.check_password("mallory", PASSWORD)  # alice's password, wrong user
    assert not config.check_password("mallory", PASSWORD)  # and never cached as verified
    assert spy.calls == 3
    assert not config.check_password("alice", "wrong")
    assert spy.calls == 4


class CostRecordingCheckpw:
    """bcrypt.checkpw, recording the cost of each hash it is given."""

    def __init__(self) -> None:
        self.costs: list[int] = []
        self.real = bcrypt.checkpw

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.costs.append(int(hashed.split(b"$")[2]))
        return self.real(password, hashed)


def test_an_unknown_user_costs_a_comparison_at_the_highest_cost_in_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cheap = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    dear = bcrypt.hashpw(b"pw", bcrypt.gensalt(6)).decode()
    config = WebConfig(basic_auth_users={"alice": cheap, "bob": dear, "carol": cheap})
    spy = CostRecordingCheckpw()
    monkeypatch.setattr(bcrypt, "checkpw", spy)
    made: list[bytes] = []
    real_hashpw = bcrypt.hashpw

    def hashpw(password: bytes, salt: bytes) -> bytes:
        made.append(salt)
        return real_hashpw(password, salt)

    monkeypatch.setattr(bcrypt, "hashpw", hashpw)
    assert not config.check_password("mallory", "pw")
    assert not config.check_password("bob", "wrong")
    assert not config.check_password("alice", "wrong")
    assert not config.check_password("eve", "pw")
    assert spy.costs == [6, 6, 4, 6]  # an unknown user: as dear as the dearest known one
    assert len(made) == 1  # the stand-in hash is made once for the config


def test_bcrypt_runs_one_at_a_time_one_more_waits_and_the_rest_are_refused_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = WebConfig(basic_auth_users={"alice": HASH})
    assert config.check_password("alice", PASSWORD)  # verified before the flood
    release, running, most = threading.Event(), [0], [0]
    guard = threading.Lock()
    real = bcrypt.checkpw

    def slow_checkpw(password: bytes, hashed: bytes) -> bool:
        with guard:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(30)
        with guard:
            running[0] -= 1
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", slow_checkpw)
    outcomes: list[bool | str] = []

    def login(index: int) -> None:
        try:
            outcomes.append(config.check_password("alice", f"wrong {index}"))
        except PasswordChecksBusyError:
            outcomes.append("busy")

    threads = [threading.Thread(target=login, args=(i,)) for i in range(6)]
    try:
        for thread in threads:
            thread.start()
        wait_until(  # refused while bcrypt is held up
            lambda: outcomes.count("busy") >= 4, message=lambda: f"not refused: {outcomes}"
        )
        assert config.check_password("alice", PASSWORD)  # a remembered login does not wait
    finally:
        release.set()
        for thread in threads:
            thread.join(30)
    assert sorted(outcomes, key=str) == [False, False, "busy", "busy", "busy", "busy"]
    assert most[0] == 1


def unrelated_client(pki: Pki, with_certificate: bool) -> ssl.SSLContext:
    """A client trusting the server, holding (or not) a certificate nobody vouches for."""
    context = ssl.create_default_context(cafile=pki.ca)
    if with_certificate:
        context.load_cert_chain(pki.stranger.cert, pki.stranger.key)
    return context


@pytest.mark.parametrize(
    ("client_auth_type", "with_certificate", "accepted"),
    [
        ("RequestClientCert", True, True),
        ("RequestClientCert", False, True),
        ("RequireAnyClientCert", True, True),
        ("RequireAnyClientCert", False, False),
        ("NoClientCert", True, True),
    ],
)
def test_unverified_client_certificates_as_go_does(
    pki: Pki, client_auth_type: str, with_certificate: bool, accepted: bool
) -> None:
    server = server_context(
        WebConfig(tls=TlsServerConfig(pki.server.cert, pki.server.key, client_auth_type))
    )
    client = unrelated_client(pki, with_certificate)
    if accepted:
        assert handshake(server, client)
    else:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            handshake(server, client)


def test_require_any_client_cert_ignores_the_ca_file(pki: Pki) -> None:
    # Go never verifies for RequireAnyClientCert, even with a client_ca_file given.
    tls = TlsServerConfig(pki.server.cert, pki.server.key, "RequireAnyClientCert", pki.ca)
    server = server_context(WebConfig(tls=tls))
    assert handshake(server, unrelated_client(pki, with_certificate=True))


def test_verify_if_given_still_refuses_an_unverified_certificate(pki: Pki) -> None:
    tls = TlsServerConfig(pki.server.cert, pki.server.key, "VerifyClientCertIfGiven", pki.ca)
    server = server_context(WebConfig(tls=tls))
    assert handshake(server, unrelated_client(pki, with_certificate=False))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        handshake(server, unrelated_client(pki, with_certificate=True))
