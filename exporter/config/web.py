"""``--web.config.file``: TLS and basic auth for the exporter's own endpoints.

The format is the Prometheus exporter-toolkit's ``web-config.yml`` (the keys this exporter
supports are listed below), so operators reuse what they already run for node_exporter.
Passwords are bcrypt hashes, as in exporter-toolkit; a verified pair is remembered by a salted
digest so a scrape every few seconds does not pay bcrypt's deliberate cost each time (and never
waits behind anyone's bcrypt). An unknown user costs a bcrypt comparison at the highest cost in
the file (no user enumeration by timing). One bcrypt comparison runs at a time and at most one
more waits; beyond that a login is refused at once, so a flood of wrong passwords holds two
request threads, not the server. As in exporter-toolkit, only the security headers it allows
may be set (and ``Referrer-Policy``); every answer carries :data:`DEFAULT_HEADERS` unless the
file sets them otherwise. ``RequestClientCert`` and ``RequireAnyClientCert`` accept client
certificates unverified. ``cipher_suites``, ``curve_preferences``,
``prefer_server_cipher_suites`` and ``client_allowed_sans`` have exporter-toolkit's meaning
(:mod:`exporter.config.tls`); HTTP/2 is not served (``http_server_config.http2`` is
accepted, the server speaks HTTP/1.1). The toolkit's keys this exporter cannot honour are
refused by name, saying what to do instead.
"""

from __future__ import annotations

import datetime
import difflib
import hashlib
import os
import re
import ssl
import threading
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from exporter.config.schema import NOT_SHOWN, Reader, checking, locate, read_document
from exporter.config.tls import (
    GO_CIPHER_SUITES,
    GO_CURVES,
    INSECURE_CIPHER_SUITES,
    TLS13_CIPHER_SUITES,
    ServerContext,
    accept_unverified_client_certificates,
    certificate_not_after,
    peer_refusal,
    set_cipher_suites,
    set_curves,
)
from exporter.config.yamlsource import Path
from exporter.errors import ConfigError, PasswordChecksBusyError, TlsSettingError
from exporter.text import FIELD_VALUE

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
# Go's tls.RequestClientCert and RequireAnyClientCert ask for a certificate without verifying it.
_UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert")
# exporter-toolkit's allow-list: the headers that may be set, and their values where fixed.
_ALLOWED_HEADERS: dict[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
    # beyond exporter-toolkit's list, so that each default below can be changed
    "Referrer-Policy": (
        "no-referrer", "no-referrer-when-downgrade", "origin", "origin-when-cross-origin",
        "same-origin", "strict-origin", "strict-origin-when-cross-origin", "unsafe-url",
    ),
}  # fmt: skip
#: Sent with every answer unless ``http_server_config.headers`` sets the header otherwise:
#: the status page needs nothing but its own inline style (no script, image, font, frame or
#: form), is never framed, never sniffed as another type, and leaks no URL by its links.
DEFAULT_HEADERS: dict[str, str] = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_TLS_VERSIONS = {
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
# A modular-crypt bcrypt hash as htpasswd and Python's bcrypt write it: cost and 53 characters.
_BCRYPT_HASH = re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}", re.ASCII)
_USER_NAME = re.compile(r"[^\s:$]+")
_BCRYPT_COST = re.compile(r"\$2[aby]\$(\d\d)\$", re.ASCII)
BCRYPT_WAITING = 1  # logins waiting for bcrypt while one runs; more are refused at once


class _BcryptQueue:
    """One bcrypt computation at a time, at most ``waiting`` more in line, and the stand-in
    hash unknown users are compared with (made once, at the highest cost in the file)."""

    def __init__(self, waiting: int = BCRYPT_WAITING) -> None:
        self._lock = threading.Lock()
        self._turn = threading.Lock()
        self._inside = 0
        self._most = 1 + waiting
        self._stand_in: tuple[int, bytes] | None = None  # (cost, hash)

    @contextmanager
    def turn(self) -> Iterator[None]:
        with self._lock:
            if self._inside >= self._most:
                raise PasswordChecksBusyError("too many logins are being checked")
            self._inside += 1
        try:
            with self._turn:
                yield
        finally:
            with self._lock:
                self._inside -= 1

    def stand_in(self, hashes: list[str]) -> bytes:
        """A hash of a random password at the highest cost among ``hashes``; call in turn()."""
        import bcrypt  # noqa: PLC0415 - only needed when basic auth is configured

        costs = [int(found[1]) for text in hashes if (found := _BCRYPT_COST.match(text))]
        cost = min(max(costs, default=4), 31)
        if self._stand_in is None or self._stand_in[0] != cost:
            password = os.urandom(16).hex().encode()
            self._stand_in = (cost, bcrypt.hashpw(password, bcrypt.gensalt(max(cost, 4))))
        return self._stand_in[1]


_TLS_KEYS = (
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "min_version",
    "max_version",
    "cipher_suites",
    "prefer_server_cipher_suites",
    "curve_preferences",
    "client_allowed_sans",
)
_TOP_KEYS = ("tls_server_config", "basic_auth_users", "http_server_config")
_HTTP_KEYS = ("headers", "http2")
#: exporter-toolkit's keys this exporter cannot honour, and what to do instead.
_INLINE = "inline PEM is not supported: put it in a file and set {}"
_UNSUPPORTED_TLS = {
    "cert": _INLINE.format("cert_file"),
    "key": _INLINE.format("key_file"),
    "client_ca": _INLINE.format("client_ca_file"),
}
_UNSUPPORTED_TOP = {
    "rate_limit": "not supported: the server bounds connections, request threads and "
    "password checks itself (docs/security.md, Connections); "
    "rate-limit in a proxy if you need more",
}
#: client_auth_type values that ask the client for a certificate.
_ASKING = (
    "RequestClientCert",
    "RequireAnyClientCert",
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
)


@dataclass(frozen=True)
class TlsServerConfig:
    """Certificate, key and client-certificate policy for serving HTTPS, and exporter-toolkit's
    cipher suite, curve and client SAN settings (Go names, as in the file)."""

    cert_file: str
    key_file: str
    client_auth_type: str = "NoClientCert"
    client_ca_file: str | None = None
    min_version: str = "TLS12"
    max_version: str | None = None
    cipher_suites: tuple[str, ...] = ()
    prefer_server_cipher_suites: bool = True
    curve_preferences: tuple[str, ...] = ()
    client_allowed_sans: tuple[str, ...] = ()


@dataclass(frozen=True)
class WebConfig:
    """How the exporter serves its endpoints: plain or TLS, open or behind basic auth.
    ``http2`` is the file's ``http_server_config.http2`` (None when not given): HTTP/2 is
    never served, the value is kept to say so once."""

    tls: TlsServerConfig | None = None
    basic_auth_users: dict[str, str] = field(default_factory=dict, repr=False)
    headers: dict[str, str] = field(default_factory=dict)
    http2: bool | None = None
    _verified: set[bytes] = field(default_factory=set, repr=False, compare=False)
    _salt: bytes = field(default_factory=lambda: os.urandom(16), repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _bcrypt: _BcryptQueue = field(default_factory=_BcryptQueue, repr=False, compare=False)
    #: The TLS context once made, so that the one checked by load_web_config is the one
    #: served (the files may change on disk in between), and its certificate's notAfter.
    _made: list[ssl.SSLContext] = field(default_factory=list, repr=False, compare=False)
    _not_after: list[datetime.datetime] = field(default_factory=list, repr=False, compare=False)

    def watched_paths(self) -> tuple[str, ...]:
        """The files this web config names (certificate, key, client CA): what
        ``--config.auto-reload-interval`` follows on disk beside the file itself."""
        tls = self.tls
        if tls is None:
            return ()
        return tuple(name for name in (tls.cert_file, tls.key_file, tls.client_ca_file) if name)

    def certificate_not_after(self) -> datetime.datetime | None:
        """The notAfter of the served certificate (the first of ``cert_file``, read when the
        TLS context was made); None without TLS. Raises ValueError or OSError when it cannot
        be read."""
        if self.tls is None:
            return None
        if not self._not_after:
            self._not_after.append(read_not_after(self.tls.cert_file))
        return self._not_after[0]

    def answer_headers(self) -> dict[str, str]:
        """The headers of every answer: :data:`DEFAULT_HEADERS`, each replaced by the file's
        ``http_server_config.headers`` where it names the header, and the file's others."""
        return {**DEFAULT_HEADERS, **self.headers}

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context, or None to serve plain HTTP. Raises OSError or
        ssl.SSLError (TlsSettingError naming the key) when it cannot be made."""
        tls = self.tls
        if tls is None:
            return None
        if self._made:
            return self._made[0]
        context = ServerContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = _TLS_VERSIONS[tls.min_version]
        if tls.max_version:
            context.maximum_version = _TLS_VERSIONS[tls.max_version]
        context.load_cert_chain(tls.cert_file, tls.key_file)
        context.verify_mode = _CLIENT_AUTH[tls.client_auth_type]
        if tls.client_ca_file:
            context.load_verify_locations(tls.client_ca_file)
        if tls.client_auth_type in _UNVERIFIED_CLIENT_AUTH:
            accept_unverified_client_certificates(context)
        if tls.cipher_suites:
            set_cipher_suites(context, tls.cipher_suites)
        if not tls.prefer_server_cipher_suites:
            context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
        else:
            context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        if tls.curve_preferences:
            set_curves(context, tls.curve_preferences)
        context.allowed_sans = frozenset(tls.client_allowed_sans)
        self._made.append(context)
        return context

    def summary(self) -> str:
        """What ``--config.check`` says of this web config, in one line."""
        parts = ["plain HTTP" if self.tls is None else "TLS"]
        if self.tls is not None and self.tls.client_auth_type != "NoClientCert":
            parts.append(f"client certificates: {self.tls.client_auth_type}")
        if self.tls is not None and self.tls.client_allowed_sans:
            parts.append(f"{len(self.tls.client_allowed_sans)} allowed client SAN(s)")
        if self.basic_auth_users:
            parts.append(f"{len(self.basic_auth_users)} basic auth user(s)")
        if self.http2:
            parts.append("http2 ignored: HTTP/1.1 is served")
        return ", ".join(parts)

    @staticmethod
    def refuse_peer(sock: ssl.SSLSocket) -> str | None:
        """Why a client whose TLS handshake is done may not go on (``client_allowed_sans``
        of the settings its connection was made with), or None."""
        return peer_refusal(sock)

    def check_password(self, user: str, password: str) -> bool:
        """True when ``password`` matches the user's bcrypt hash.

        A remembered success answers at once, whatever bcrypt is doing. Otherwise one bcrypt
        comparison, an unknown user's against a stand-in hash as costly as the dearest user's,
        so the answer takes as long as for a wrong password. Raises PasswordChecksBusyError when
        bcrypt already has one login running and one waiting."""
        known = self.basic_auth_users.get(user)
        digest = hashlib.sha256(self._salt + f"{user}\0{password}\0{known}".encode()).digest()
        with self._lock:
            if known is not None and digest in self._verified:
                return True
        import bcrypt  # noqa: PLC0415 - only needed when basic auth is configured

        with self._bcrypt.turn():  # one at a time: a flood of logins costs one core at most
            try:
                hashed = known.encode() if known is not None else self._stand_in()
                matches = bcrypt.checkpw(password.encode(), hashed)
            except ValueError:  # a malformed hash ("Invalid salt") refuses, never crashes
                return False
        if not matches or known is None:
            return False
        with self._lock:
            self._verified.add(digest)
        return True

    def _stand_in(self) -> bytes:
        return self._bcrypt.stand_in(list(self.basic_auth_users.values()))


def load_web_config(path: str) -> WebConfig:
    """Read and validate a web config file; raises ConfigError listing every problem."""
    text, source = read_document(path)
    reader = _WebReader(locate(text, source), source)
    with checking(source):
        config = reader.web_config()
    if reader.problems:
        raise ConfigError(source, reader.problems)
    try:
        config.certificate_not_after()  # first: a certificate renewed meanwhile is seen next
        config.ssl_context()
    except TlsSettingError as error:
        raise ConfigError(source, [f"tls_server_config.{error.key}: {error}"]) from None
    except (OSError, ssl.SSLError, ValueError) as error:
        line = reader.located.line_of(("tls_server_config", "cert_file"))
        where = f"line {line}: " if line is not None else ""
        raise ConfigError(
            source,
            [
                f"{where}tls_server_config: cannot load the certificate and key (cert_file,"
                f" key_file, client_ca_file): {error}"
            ],
        ) from None
    return config


class _WebReader(Reader):
    """Reads a web config document; ``basic_auth_users`` and all it holds are secrets."""

    def secret(self, path: Path) -> bool:
        return path[:1] == ("basic_auth_users",)

    def secret_key(self, path: Path) -> bool:
        """A user name is shown unless it holds white space, ':' or '$', as a flow mapping's
        ``{alice $2b$...}`` (a missing colon) or a password run into it would."""
        if len(path) != 2 or path[0] != "basic_auth_users":
            return len(path) > 2 and self.secret(path)
        return not _USER_NAME.fullmatch(str(path[1]))

    def toolkit_mapping(
        self,
        value: Any,
        path: Path,
        allowed: tuple[str, ...],
        unsupported: dict[str, str],
        required: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """``mapping``, with exporter-toolkit's keys this exporter cannot honour refused by
        name (``unsupported``: key -> what to do instead) rather than as unknown keys."""
        if isinstance(value, dict):
            for key in value:
                if key in unsupported:
                    self.problem((*path, key), unsupported[key])
            value = {key: item for key, item in value.items() if key not in unsupported}
        return self.mapping(value, path, allowed, required)

    def web_config(self) -> WebConfig:
        data = self.toolkit_mapping(self.located.data or {}, (), _TOP_KEYS, _UNSUPPORTED_TOP)
        tls = self.tls(data["tls_server_config"]) if "tls_server_config" in data else None
        users = self.users(data.get("basic_auth_users", {}))
        headers: dict[str, str] = {}
        http2: bool | None = None
        if "http_server_config" in data:
            path = ("http_server_config",)
            server = self.mapping(data["http_server_config"], path, _HTTP_KEYS)
            raw = server.get("headers", {})
            if not isinstance(raw, dict):
                self.problem(("http_server_config", "headers"), "must map header names to values")
                raw = {}
            headers = {str(k): self.header(k, v) for k, v in raw.items()}
            if "http2" in server:
                http2 = self.flag(server["http2"], (*path, "http2"))
        return WebConfig(tls, users, headers, http2)

    def flag(self, value: Any, path: Path) -> bool:
        """A YAML boolean (``true``/``false``)."""
        if not isinstance(value, bool):
            self.problem(path, f"must be true or false{self.instead(path, value)}")
            return False
        return value

    def names(self, value: Any, path: Path, known: tuple[str, ...], refused: str = "") -> list[str]:
        """A list of names each one of ``known`` (a name of ``refused`` says why it is not);
        problems for the others, each at its position."""
        if not isinstance(value, list):
            self.problem(path, f"must be a list{self.instead(path, value)}")
            return []
        names = []
        for index, name in enumerate(value):
            where = (*path, index)
            if isinstance(name, str) and name in known:
                names.append(name)
            elif isinstance(name, str) and refused and name in INSECURE_CIPHER_SUITES:
                self.problem(where, f"{name} {refused}")
            else:
                close = difflib.get_close_matches(str(name), known, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                names_are = (
                    f"use one of {', '.join(known)}"
                    if len(known) <= 6
                    else "use Go's names, as crypto/tls's CipherSuites() lists them"
                )
                self.problem(where, f"unknown name {self.quote(where, name)}; {hint}{names_are}")
        return names

    def header(self, name: Any, value: Any) -> str:
        """A header exporter-toolkit lets one set, with a value that cannot split the answer
        and that http.server can write (visible ASCII: it encodes headers as Latin-1)."""
        path = ("http_server_config", "headers", str(name))
        text = self.string(value, path)
        allowed = _ALLOWED_HEADERS.get(str(name))
        if allowed is None:
            self.problem(
                path, f"cannot be configured; allowed headers: {', '.join(_ALLOWED_HEADERS)}"
            )
        elif text and not FIELD_VALUE.fullmatch(text):
            wrong = next(c for c in text if not FIELD_VALUE.fullmatch(c))
            named = f"U+{ord(wrong):04X} {unicodedata.name(wrong, '')}".rstrip()
            self.problem(path, f"must be visible ASCII, spaces and tabs only, not {named}")
        elif text and allowed and text.lower() not in allowed:  # as browsers compare them
            self.problem(path, f"must be one of {', '.join(allowed)}{self.instead(path, text)}")
        return text

    def tls(self, value: Any) -> TlsServerConfig:
        path = ("tls_server_config",)
        data = self.toolkit_mapping(
            value, path, _TLS_KEYS, _UNSUPPORTED_TLS, required=("cert_file", "key_file")
        )
        files = {key: self.readable_file(data.get(key), (*path, key)) for key in _TLS_KEYS[:2]}
        # A key left out (or refused) takes TlsServerConfig's default: stated there, once.
        auth = data.get("client_auth_type", TlsServerConfig.client_auth_type)
        if not isinstance(auth, str) or auth not in _CLIENT_AUTH:
            self.problem((*path, "client_auth_type"), f"must be one of {', '.join(_CLIENT_AUTH)}")
            auth = TlsServerConfig.client_auth_type
        ca_file = self.readable_file(data.get("client_ca_file"), (*path, "client_ca_file"))
        if auth in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert") and not ca_file:
            self.problem(path, f"client_auth_type {auth} needs client_ca_file")
        versions = {}
        for key in ("min_version", "max_version"):
            version = data.get(key, getattr(TlsServerConfig, key))
            if version is not None and (
                not isinstance(version, str) or version not in _TLS_VERSIONS
            ):
                self.problem((*path, key), f"must be one of {', '.join(_TLS_VERSIONS)}")
                version = None
            versions[key] = version
        low, high = versions["min_version"], versions["max_version"]
        if low and high and _TLS_VERSIONS[low].value > _TLS_VERSIONS[high].value:
            self.problem((*path, "min_version"), "must not be above max_version")
        suites, curves, sans = self.toolkit_lists(data, auth, high)
        prefer = data.get(
            "prefer_server_cipher_suites", TlsServerConfig.prefer_server_cipher_suites
        )
        return TlsServerConfig(
            files["cert_file"] or "",
            files["key_file"] or "",
            auth,
            ca_file,
            versions["min_version"] or TlsServerConfig.min_version,
            versions["max_version"],
            tuple(suites),
            self.flag(prefer, (*path, "prefer_server_cipher_suites")),
            tuple(curves),
            tuple(sans),
        )

    def toolkit_lists(
        self, data: dict[str, Any], auth: str, max_version: str | None
    ) -> tuple[list[str], list[str], list[str]]:
        """``cipher_suites``, ``curve_preferences`` and ``client_allowed_sans``, checked."""
        path = ("tls_server_config",)
        suites = curves = sans = []
        if "cipher_suites" in data:
            where = (*path, "cipher_suites")
            known = (*GO_CIPHER_SUITES, *TLS13_CIPHER_SUITES)
            refused = "is insecure (Go's tls.InsecureCipherSuites), so exporter-toolkit refuses it"
            suites = self.names(data["cipher_suites"], where, known, refused)
            only_tls13 = suites and not any(name in GO_CIPHER_SUITES for name in suites)
            if only_tls13 and max_version == "TLS12":
                self.problem(where, "lists TLS 1.3 suites only, but max_version is TLS12")
        if "curve_preferences" in data:
            where = (*path, "curve_preferences")
            curves = self.names(data["curve_preferences"], where, tuple(GO_CURVES))
        if "client_allowed_sans" in data:
            where = (*path, "client_allowed_sans")
            sans = self.strings(data["client_allowed_sans"], where)
            if sans and auth not in _ASKING:
                self.problem(
                    where,
                    f"needs a client_auth_type that asks for a client certificate (such as "
                    f"RequireAndVerifyClientCert), not {auth}",
                )
        return suites, curves, sans

    def strings(self, value: Any, path: Path) -> list[str]:
        """A list of non-empty strings."""
        if not isinstance(value, list):
            self.problem(path, f"must be a list{self.instead(path, value)}")
            return []
        found = []
        for index, item in enumerate(value):
            if isinstance(item, str) and item:
                found.append(item)
            else:
                where = (*path, index)
                self.problem(where, f"must be a non-empty string{self.instead(where, item)}")
        return found

    def users(self, value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            self.problem(("basic_auth_users",), "must map user names to bcrypt hashes")
            return {}
        users = {}
        for user, hashed in value.items():
            path = ("basic_auth_users", user)
            if not (isinstance(hashed, str) and _BCRYPT_HASH.fullmatch(hashed)):
                self.problem(path, f"must be a bcrypt hash ($2b$...) {NOT_SHOWN}")
            users[str(user)] = hashed if isinstance(hashed, str) else ""
        return users


#: A reload to a server certificate that expires within this many days logs a warning:
#: two weeks leaves time to renew it before clients refuse it.
EXPIRY_WARNING_DAYS = 14
_PEM_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----"
)


def read_not_after(cert_file: str) -> datetime.datetime:
    """The notAfter of the first PEM certificate in ``cert_file`` (the one a TLS server
    sends); ValueError or OSError when there is none to read."""
    with open(cert_file, encoding="ascii", errors="replace") as pem:
        found = _PEM_CERTIFICATE.search(pem.read(1 << 20))
    if found is None:
        raise ValueError("no PEM certificate")
    return certificate_not_after(ssl.PEM_cert_to_DER_cert(found.group()))


def reload_warnings(
    before: WebConfig | None, after: WebConfig, path: str, now: datetime.datetime
) -> list[tuple[str, dict[str, str]]]:
    """What a reload from ``before`` to ``after`` (read from ``path``) should warn of, as log
    messages and their fields: TLS turned off (the listeners now serve plain HTTP), or a
    server certificate that has expired or expires within EXPIRY_WARNING_DAYS. The reload
    goes ahead all the same: the operator asked for it."""
    warnings: list[tuple[str, dict[str, str]]] = []
    if before is not None and before.tls is not None and after.tls is None:
        message = "web config reload turns TLS off: the listeners now serve plain HTTP"
        warnings.append((message, {"file": path}))
    if after.tls is None:
        return warnings
    cert_file = after.tls.cert_file
    try:
        not_after = after.certificate_not_after() or now
    except (OSError, ValueError) as error:  # the context was made from it: seldom
        message = "the web config's server certificate's expiry date cannot be read"
        warnings.append((message, {"file": cert_file, "error": str(error)}))
        return warnings
    fields = {"file": cert_file, "not_after": not_after.strftime("%Y-%m-%dT%H:%M:%SZ")}
    if not_after <= now:
        message = "the web config's server certificate has expired: clients will refuse it"
        warnings.append((message, fields))
    elif not_after - now < datetime.timedelta(days=EXPIRY_WARNING_DAYS):
        days = (not_after - now).total_seconds() / 86400
        message = f"the web config's server certificate expires in under {EXPIRY_WARNING_DAYS} days"
        warnings.append((message, {**fields, "days_left": f"{days:.1f}"}))
    return warnings
