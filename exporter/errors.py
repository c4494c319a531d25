"""The exceptions of ledger-exporter, all under one base: catch ``LedgerExporterError`` for
any of them. Where callers (or the standard library) catch a built-in kind, the class is that
kind too, written in brackets below. The whole hierarchy, by the layer that raises it
(tests/test_errors.py keeps this drawing equal to the classes, their bases and homes):

* LedgerExporterError
  Configuration: the config files, the flags and their values
  + ConfigError                    a config file cannot be used; lists every problem
  + YamlSyntaxError                a config file is not valid YAML; names the line
  + TlsSettingError [SSLError]     this Python's ssl cannot apply a tls_server_config key
  + DurationError [ValueError]     not a Go duration (2s, 1m30s, 500ms) or out of range
  + InvalidListenAddressError [ValueError]   a listen address that is not host:port
  + DnsLookupError                 a dns_sd_configs name could not be looked up (no answer)
  Node answers and the transport to the nodes
  + TransferError                  libcurl could not complete a transfer (its CURLE_* code)
  + FetchError                     a request to a node failed; its reason is the metric label
    (in exporter.poll.results)
    + NotSentError                 the cycle's deadline passed before it was sent
      (in exporter.poll.client)
  + InvalidResponseError [ValueError]   JSON, but not of the shape the node API documents
    (in exporter.model.readings)
  State file and the files the exporter owns
  + NotAFileError [OSError]        the path is a directory, a link, a device...
  + FileChangedError [OSError]     the file changed while it was read
  + StateFileError                 the state file is corrupt, foreign or too large
  Web server: the exporter's own endpoints
  + BindError [OSError]            a listen address that cannot be bound (in use, no rights)
  + RequestRefusedError            a request refused before any handler (e.g. too large)
  + PasswordChecksBusyError        bcrypt is busy with other logins: this one is refused
  + ProbeRefusedError              a /probe request that cannot be served (bad target)
  + ReloadPendingError             a reload already waits to run

FetchError and NotSentError live beside the Reason and the client they carry, and
InvalidResponseError beside the readers that raise it; every other class is defined here,
and the modules import it from here.
"""

from __future__ import annotations

import errno
import socket
import ssl
from http import HTTPStatus


class LedgerExporterError(Exception):
    """The base of every exception ledger-exporter defines."""


# Configuration


class ConfigError(LedgerExporterError):
    """A config file cannot be used; ``problems`` lists every reason, one per line."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


class YamlSyntaxError(LedgerExporterError):
    """The file is not valid YAML; the message names the line."""


class TlsSettingError(LedgerExporterError, ssl.SSLError):
    """A setting this Python's ssl module cannot apply; ``key`` names it in the web config."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message

    def __str__(self) -> str:
        return self.message


class DurationError(LedgerExporterError, ValueError):
    """A duration is not in Go's syntax (``2s``, ``1m30s``, ``500ms``) or is out of range."""


class InvalidListenAddressError(LedgerExporterError, ValueError):
    """A listen address that is not of the form host:port (or whose port is out of range);
    one that is, but cannot be bound, is a :class:`BindError`."""


class DnsLookupError(LedgerExporterError):
    """A name of ``dns_sd_configs`` could not be looked up (timeout, server failure, no
    server): its last good records are kept. A name that does not exist is no error."""


# Node answers and the transport to the nodes


class TransferError(LedgerExporterError):
    """libcurl could not complete the transfer; ``code`` is the CURLE_* number (or NOT_SENT,
    SHUT_DOWN), ``message`` libcurl's error buffer, ``os_errno`` the socket error behind it,
    ``over_cap`` set when the engine aborted a body that grew past the size cap. For a TLS
    failure, ``verify_result`` is OpenSSL's X509_V_ERR_* code (0: none) and ``validity`` the
    node certificate's notBefore and notAfter as libcurl prints them, when a date failed."""

    def __init__(
        self,
        code: int,
        message: str,
        os_errno: int = 0,
        over_cap: bool = False,
        *,
        verify_result: int = 0,
        validity: tuple[str, str] | None = None,
        fresh_tls: bool = False,
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.os_errno = os_errno
        self.over_cap = over_cap
        self.verify_result = verify_result
        self.validity = validity
        self.fresh_tls = fresh_tls


# State file and the files the exporter owns


class NotAFileError(LedgerExporterError, OSError):
    """The path is not a regular file; ``kind`` says what it is (``NOT_A_FILE``)."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{path} is {kind}")
        self.kind = kind


class FileChangedError(LedgerExporterError, OSError):
    """The file changed while it was read (truncated, grown or replaced: ``cp backup FILE``
    truncates in place; on NFS another client's rename makes it stale): what was read is
    not one version of it, so it is neither judged corrupt nor used."""

    def __init__(self, detail: str) -> None:
        super().__init__(errno.EAGAIN, detail)


class StateFileError(LedgerExporterError):
    """The state file cannot be used; ``kind`` says how (unreadable, corrupt, foreign, too
    large), the message what an operator would look for."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


# Web server

#: Why a listen address cannot be bound, for the errors an operator can act on.
_BIND_PROBLEMS = {
    errno.EADDRINUSE: "address already in use",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
    errno.EADDRNOTAVAIL: "no such address on this machine",
}


class BindError(LedgerExporterError, OSError):
    """A listen address that cannot be bound: ``str()`` is ``'ADDRESS': why``, ``strerror``
    the why, ``address`` the address as given."""

    def __init__(self, address: str, error: OSError) -> None:
        if isinstance(error, socket.gaierror):
            reason = f"cannot resolve the host ({error.strerror or error})"
        else:
            reason = _BIND_PROBLEMS.get(error.errno or 0) or str(error.strerror or error).lower()
        super().__init__(error.errno or 0, reason)
        self.address = address

    def __str__(self) -> str:
        return f"{self.address!r}: {self.strerror}"


class RequestRefusedError(LedgerExporterError):
    """A request the server refuses itself, before any handler, and then closes: ``status``
    is the answer's, ``reason`` tells the client why."""

    def __init__(self, status: HTTPStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class PasswordChecksBusyError(LedgerExporterError):
    """bcrypt is busy with other logins (one running, one waiting): refuse this one now."""


class ProbeRefusedError(LedgerExporterError):
    """The probe request cannot be served; ``status`` is the HTTP answer, the message why."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class ReloadPendingError(LedgerExporterError):
    """A reload is already waiting to run: it will read the files after this request came."""
