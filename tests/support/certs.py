"""One test certificate authority per session and the certificates it issues, made by the
``openssl`` command line tool once (the ``pki`` session fixture), as httpx's suite does with
one CA for every TLS test."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2")
RSA_KEY = ("-newkey", "rsa:2048", "-nodes", "-days", "2")
FOR_LOOPBACK = "subjectAltName=IP:127.0.0.1,DNS:localhost"


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, as PEM files."""

    cert: str
    key: str


@dataclass(frozen=True)
class Pki:
    """The session's CA and what it issued. A client that trusts ``ca`` accepts ``server``
    (127.0.0.1 and localhost); a server that verifies against ``ca`` accepts ``client``;
    ``stranger`` is self-signed for 127.0.0.1 and trusted by nobody. ``issue`` makes more
    (other names, usages, key types) from the same CA."""

    ca: str
    server: KeyPair
    client: KeyPair
    stranger: KeyPair
    ca_pair: KeyPair
    directory: Path

    def issue(
        self,
        name: str,
        *extensions: str,
        rsa: bool = False,
        self_signed: bool = False,
    ) -> KeyPair:
        """A new certificate ``name`` with ``extensions`` (``subjectAltName=...``,
        ``extendedKeyUsage=...``), signed by the CA unless ``self_signed``; RSA or EC."""
        signer = None if self_signed else self.ca_pair
        key = RSA_KEY if rsa else EC_KEY
        return _request(self.directory, name, f"/CN={name}", *extensions, signed_by=signer, key=key)

    def issue_dated(self, name: str, not_before: str, not_after: str, *extensions: str) -> KeyPair:
        """A server certificate for 127.0.0.1 and localhost, signed by the CA, valid from
        ``not_before`` to ``not_after`` (``YYYYMMDDHHMMSSZ``; ``openssl ca``, the one command
        that sets both dates): an expired or a not yet valid certificate; ``extensions`` are
        added as ``openssl req -addext`` takes them."""
        return _dated(self.directory, self.ca_pair, name, not_before, not_after, *extensions)


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed to make the test certificates"
    subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)


def _request(
    directory: Path,
    name: str,
    subject: str,
    *extensions: str,
    signed_by: KeyPair | None = None,
    key: tuple[str, ...] = EC_KEY,
) -> KeyPair:
    """``openssl req -x509``: a new key and its certificate, self-signed or ``signed_by``."""
    pair = KeyPair(str(directory / f"{name}.pem"), str(directory / f"{name}.key"))
    signer = ["-CA", signed_by.cert, "-CAkey", signed_by.key] if signed_by else []
    added = [arg for extension in extensions for arg in ("-addext", extension)]
    _openssl(
        "req",
        "-x509",
        *key,
        *signer,
        "-subj",
        subject,
        *added,
        "-keyout",
        pair.key,
        "-out",
        pair.cert,
    )
    return pair


def _dated(
    directory: Path,
    ca: KeyPair,
    name: str,
    not_before: str,
    not_after: str,
    *extensions: str,
) -> KeyPair:
    """``openssl ca`` with a throwaway database: a leaf certificate with set dates."""
    work = directory / f"{name}.ca"
    work.mkdir()
    (work / "index.txt").write_text("")
    (work / "serial").write_text("01\n")
    (work / "ca.cnf").write_text(
        "[ca]\ndefault_ca = test\n[test]\n"
        f"database = {work / 'index.txt'}\nserial = {work / 'serial'}\n"
        f"new_certs_dir = {work}\ndefault_md = sha256\npolicy = any\n"
        "unique_subject = no\ncopy_extensions = copy\n[any]\ncommonName = supplied\n"
    )
    pair = KeyPair(str(directory / f"{name}.pem"), str(directory / f"{name}.key"))
    request = str(work / "request.csr")
    _openssl("req", "-new", *EC_KEY[:4], "-nodes", "-subj", f"/CN={name}",
             "-addext", FOR_LOOPBACK, *(arg for extension in extensions
                                        for arg in ("-addext", extension)),
             "-keyout", pair.key, "-out", request)  # fmt: skip
    _openssl("ca", "-batch", "-config", str(work / "ca.cnf"), "-cert", ca.cert, "-keyfile",
             ca.key, "-in", request, "-out", pair.cert, "-startdate", not_before,
             "-enddate", not_after, "-notext")  # fmt: skip
    return pair


def _issue(directory: Path, ca: KeyPair, name: str, usage: str) -> KeyPair:
    """A leaf certificate for 127.0.0.1 and localhost, for ``usage``, signed by ``ca``."""
    return _request(
        directory,
        name,
        f"/CN={name}",
        FOR_LOOPBACK,
        "basicConstraints=critical,CA:FALSE",
        f"extendedKeyUsage={usage}",
        signed_by=ca,
    )


def make_pki(directory: Path) -> Pki:
    """A CA, a server and a client certificate it signed, and a stranger, in ``directory``."""
    ca = _request(
        directory,
        "ca",
        "/CN=ledger-exporter test CA",
        "basicConstraints=critical,CA:TRUE",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    return Pki(
        ca=ca.cert,
        server=_issue(directory, ca, "server", "serverAuth"),
        client=_issue(directory, ca, "client", "clientAuth"),
        stranger=_request(directory, "stranger", "/CN=127.0.0.1", FOR_LOOPBACK),
        ca_pair=ca,
        directory=directory,
    )
