"""``--web.config.file``: TLS and basic auth for the exporter's own endpoints.

The format is the Prometheus exporter-toolkit's ``web-config.yml`` (the keys this exporter
supports are listed below), so operators reuse what they already run for node_exporter.
Passwords are bcrypt hashes, as in exporter-toolkit; a verified pair is remembered by a salted
digest so a scrape every few seconds does not pay bcrypt's deliberate cost each time.
"""

from __future__ import annotations

import hashlib
import os
import re
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any

from exporter.schema import ConfigError, Reader, locate, read_document

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
# A modular-crypt bcrypt hash as htpasswd and Python's bcrypt write it: cost and 53 characters.
_BCRYPT_HASH = re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}", re.ASCII)
_TLS_KEYS = (
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "min_version",
    "max_version",
)


@dataclass(frozen=True)
class TlsServerConfig:
    """Certificate, key and client-certificate policy for serving HTTPS."""

    cert_file: str
    key_file: str
    client_auth_type: str = "NoClientCert"
    client_ca_file: str | None = None
    min_version: str = "TLS12"
    max_version: str | None = None


@dataclass(frozen=True)
class WebConfig:
    """How the exporter serves its endpoints: plain or TLS, open or behind basic auth."""

    tls: TlsServerConfig | None = None
    basic_auth_users: dict[str, str] = field(default_factory=dict, repr=False)
    headers: dict[str, str] = field(default_factory=dict)
    _verified: set[bytes] = field(default_factory=set, repr=False, compare=False)
    _salt: bytes = field(default_factory=lambda: os.urandom(16), repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context, or None to serve plain HTTP."""
        if self.tls is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = _TLS_VERSIONS[self.tls.min_version]
        if self.tls.max_version:
            context.maximum_version = _TLS_VERSIONS[self.tls.max_version]
        context.load_cert_chain(self.tls.cert_file, self.tls.key_file)
        context.verify_mode = _CLIENT_AUTH[self.tls.client_auth_type]
        if self.tls.client_ca_file:
            context.load_verify_locations(self.tls.client_ca_file)
        return context

    def check_password(self, user: str, password: str) -> bool:
        """True when ``password`` matches the user's bcrypt hash."""
        hashed = self.basic_auth_users.get(user)
        if hashed is None:
            return False
        digest = hashlib.sha256(self._salt + f"{user}\0{password}\0{hashed}".encode()).digest()
        with self._lock:
            if digest in self._verified:
                return True
        import bcrypt  # noqa: PLC0415 - only needed when basic auth is configured

        try:
            matches = bcrypt.checkpw(password.encode(), hashed.encode())
        except ValueError:  # a malformed hash ("Invalid salt") refuses, never crashes a request
            return False
        if not matches:
            return False
        with self._lock:
            self._verified.add(digest)
        return True


def load_web_config(path: str) -> WebConfig:
    """Read and validate a web config file; raises ConfigError listing every problem."""
    text, source = read_document(path)
    reader = _WebReader(locate(text, source), source)
    config = reader.web_config()
    if reader.problems:
        raise ConfigError(source, reader.problems)
    try:
        config.ssl_context()
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(
            source, [f"tls_server_config: cannot load certificates: {error}"]
        ) from None
    return config


class _WebReader(Reader):
    def web_config(self) -> WebConfig:
        keys = ("tls_server_config", "basic_auth_users", "http_server_config")
        data = self.mapping(self.located.data or {}, (), keys)
        tls = self.tls(data["tls_server_config"]) if "tls_server_config" in data else None
        users = self.users(data.get("basic_auth_users", {}))
        headers: dict[str, str] = {}
        if "http_server_config" in data:
            server = self.mapping(data["http_server_config"], ("http_server_config",), ("headers",))
            raw = server.get("headers", {})
            if not isinstance(raw, dict):
                self.problem(("http_server_config", "headers"), "must map header names to values")
                raw = {}
            headers = {
                k: self.string(v, ("http_server_config", "headers", k)) for k, v in raw.items()
            }
        return WebConfig(tls, users, headers)

    def tls(self, value: Any) -> TlsServerConfig:
        path = ("tls_server_config",)
        data = self.mapping(value, path, _TLS_KEYS, required=("cert_file", "key_file"))
        files = {key: self.readable_file(data.get(key), (*path, key)) for key in _TLS_KEYS[:2]}
        auth = data.get("client_auth_type", "NoClientCert")
        if not isinstance(auth, str) or auth not in _CLIENT_AUTH:
            self.problem((*path, "client_auth_type"), f"must be one of {', '.join(_CLIENT_AUTH)}")
            auth = "NoClientCert"
        ca_file = self.readable_file(data.get("client_ca_file"), (*path, "client_ca_file"))
        if auth in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert") and not ca_file:
            self.problem(path, f"client_auth_type {auth} needs client_ca_file")
        versions = {}
        for key in ("min_version", "max_version"):
            version = data.get(key, "TLS12" if key == "min_version" else None)
            if version is not None and (
                not isinstance(version, str) or version not in _TLS_VERSIONS
            ):
                self.problem((*path, key), f"must be one of {', '.join(_TLS_VERSIONS)}")
                version = None
            versions[key] = version
        low, high = versions["min_version"], versions["max_version"]
        if low and high and _TLS_VERSIONS[low].value > _TLS_VERSIONS[high].value:
            self.problem((*path, "min_version"), "must not be above max_version")
        return TlsServerConfig(
            files["cert_file"] or "",
            files["key_file"] or "",
            auth,
            ca_file,
            versions["min_version"] or "TLS12",
            versions["max_version"],
        )

    def users(self, value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            self.problem(("basic_auth_users",), "must map user names to bcrypt hashes")
            return {}
        users = {}
        for user, hashed in value.items():
            text = self.string(hashed, ("basic_auth_users", user))
            if text and not _BCRYPT_HASH.fullmatch(text):
                self.problem(("basic_auth_users", user), "must be a bcrypt hash ($2b$...)")
            users[str(user)] = text
        return users
