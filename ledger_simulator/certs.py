"""The simulator's own certificates, for serving https: a CA made at start and a server
certificate it signs for 127.0.0.1 and localhost, reissued while running by the
``cert_expiry`` fault (expired, or expiring in N days).

Made with the ``openssl`` command line tool (as the test suite makes its certificates), in a
directory of the simulator's: ``openssl ca`` is the one command of OpenSSL 3.0 that sets a
certificate's end date freely, in the past included. An exporter trusts the simulator by
pointing ``tls_config.ca_file`` at :attr:`SimCertificates.ca_file`.
"""

from __future__ import annotations

import math
import shutil
import ssl
import subprocess
import threading
import time
from pathlib import Path

from ledger_simulator.errors import SimulatorError

#: How long a certificate the simulator issues lasts unless told otherwise (``--tls.days``).
DEFAULT_DAYS = 90.0
#: What ``cert_expiry`` without a value makes: a certificate that expired a day ago.
EXPIRED_DAYS = -1.0
_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
_DAY = 86400.0


class CertificateError(SimulatorError):
    """The simulator's certificates could not be made (no ``openssl``, a bad lifetime)."""


def parse_days(value: object) -> float:
    """A ``cert_expiry`` value: the days until the certificate expires (0 or less: expired),
    as a number or its text; None: :data:`EXPIRED_DAYS`."""
    if value is None:
        return EXPIRED_DAYS
    try:
        days = float(value) if isinstance(value, int | float | str) else math.nan
    except ValueError:
        days = math.nan
    if isinstance(value, bool) or not math.isfinite(days) or abs(days) > 36500:
        raise CertificateError(
            f"cert_expiry takes the days until the certificate expires (e.g. 5, or -1 for "
            f"one expired yesterday), within 100 years; got {value!r}"
        )
    return days


def _stamp(unix: float) -> str:
    """A time as ``openssl ca -startdate/-enddate`` takes it (UTCTime until 2050)."""
    form = "%y%m%d%H%M%SZ" if unix < 2524608000 else "%Y%m%d%H%M%SZ"
    return time.strftime(form, time.gmtime(unix))


class SimCertificates:
    """The CA (made once) and the server certificates it issues, in ``directory``."""

    def __init__(self, directory: Path, days: float = DEFAULT_DAYS) -> None:
        self._openssl = shutil.which("openssl")
        if self._openssl is None:
            raise CertificateError(
                "serving https needs the openssl command line tool: install it (Debian: "
                "apt install openssl) or run the simulator without --tls"
            )
        self.days = parse_days(days)
        self.directory = directory
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:  # a file there, no such parent, no permission
            raise CertificateError(
                f"cannot make the certificates' directory {str(directory)!r}: "
                f"{error.strerror}; give --tls.dir a directory the simulator may write"
            ) from None
        self._lock = threading.Lock()
        self._issued = 0
        self.ca_file = str(directory / "ca.pem")
        self._ca_key = str(directory / "ca.key")
        self._run(
            "req", "-x509", *_KEY, "-days", "3650", "-subj", "/CN=ledger-simulator CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", self._ca_key, "-out", self.ca_file,
        )  # fmt: skip
        (directory / "ca.cnf").write_text(
            "[ca]\ndefault_ca = sim\n[sim]\n"
            f"database = {directory / 'index.txt'}\nserial = {directory / 'serial'}\n"
            f"new_certs_dir = {directory}\ndefault_md = sha256\npolicy = any\n"
            "unique_subject = no\ncopy_extensions = copy\n[any]\ncommonName = supplied\n"
        )
        (directory / "index.txt").write_text("")
        (directory / "serial").write_text("01\n")

    def _run(self, *args: str) -> None:
        assert self._openssl is not None
        try:
            subprocess.run(
                [self._openssl, *args], check=True, capture_output=True, timeout=60, text=True
            )
        except subprocess.CalledProcessError as error:
            raise CertificateError(f"openssl {args[0]} failed: {error.stderr.strip()}") from None

    def context(self, days: float | None = None) -> ssl.SSLContext:
        """A server context with a new certificate for 127.0.0.1 and localhost, valid from an
        hour ago for ``days`` (default: the configured lifetime; 0 or less: expired)."""
        lifetime = self.days if days is None else days
        now = time.time()
        end = now + lifetime * _DAY
        start = min(now - 3600, end - 3600)
        with self._lock:
            self._issued += 1
            name = f"server-{self._issued}"
            cert, key = self.directory / f"{name}.pem", self.directory / f"{name}.key"
            request = self.directory / f"{name}.csr"
            self._run(
                "req", "-new", *_KEY, "-subj", "/CN=ledger-simulator",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-addext", "basicConstraints=critical,CA:FALSE",
                "-addext", "extendedKeyUsage=serverAuth",
                "-keyout", str(key), "-out", str(request),
            )  # fmt: skip
            self._run(
                "ca", "-batch", "-config", str(self.directory / "ca.cnf"),
                "-cert", self.ca_file, "-keyfile", self._ca_key, "-in", str(request),
                "-out", str(cert), "-startdate", _stamp(start), "-enddate", _stamp(end),
                "-notext",
            )  # fmt: skip
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        return context
