"""HTTP access to one node's JSON API: bounded in time and size, every failure classified.

Requests go through the shared :class:`~exporter.poll.engine.Engine` (one thread for all nodes);
a request never outlives its deadline and never reads more than the response size cap, and
with a :class:`ReadBudget` a node's answers cost the engine's thread at most so much CPU.
A failure names the URL path that answered badly, never the host's credentials.
"""

from __future__ import annotations

import copy
import errno
import re
import time
from array import array
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

import pycurl

from exporter.config.nodes import NodeConfig
from exporter.errors import TransferError
from exporter.model.answers import decode_json
from exporter.model.reasons import Reason
from exporter.model.transport import (
    NO_PHASES,
    PHASES,
    Handshake,
    TransportStatus,
    endpoint_kind,
)
from exporter.poll.engine import NOT_SENT, SHUT_DOWN, UNSENDABLE, Engine, Profile, Request, Response
from exporter.poll.results import FetchError, RequestTrace, TracedRequest, describe


class ReadBudget:
    """CPU time one poll of a node may spend decoding and reading its answers. Answers are
    read on the engine's one thread, which every node's requests share: once the budget is
    spent, the node's further answers in that poll are refused unread (``too_large``), so a
    node whose answers are costly to read holds the others up at most this long, plus the
    one answer that spent it (a thread of its own would not help: under the GIL, a busy
    decoding thread slows the engine's every socket callback instead)."""

    __slots__ = ("_spent", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._spent = 0.0

    @property
    def spent(self) -> bool:
        """Nothing is left: answers are no longer read."""
        return self._spent >= self.seconds

    def charge(self, seconds: float) -> None:
        """Count ``seconds`` of CPU spent reading an answer."""
        self._spent += seconds


class NotSentError(FetchError):
    """The deadline passed before the request could be sent (it waited in the queue):
    a timeout, but not one the node caused."""

    def __init__(self) -> None:
        super().__init__(Reason.TIMEOUT, "no time left in this cycle to send the request")


class TransportRecord:
    """One node's last TLS handshake and each kind of request's last phases (exporter.model.
    transport), written by its answers on the engine's thread, read at the end of each poll.
    Kept across reloads while the node's name and URL stay (a kept-alive connection makes no
    new handshake to read again)."""

    __slots__ = ("_phases", "handshake", "https")

    def __init__(self, https: bool) -> None:
        self.https = https
        self.handshake: Handshake | None = None
        self._phases = array("d", NO_PHASES)

    def note(self, kind: int, response: Response) -> None:
        """Keep ``response``'s phases as its kind's last, and its handshake if it made one;
        each a single store, so a reader on another thread never sees half of one."""
        if response.phases is not None:
            start = kind * len(PHASES)
            self._phases[start : start + len(PHASES)] = array("d", response.phases)
        if response.handshake is not None:
            self.handshake = response.handshake

    def status(self) -> TransportStatus:
        """What the snapshot shows of it now."""
        return TransportStatus(self.handshake, True, self._phases.tobytes(), self.https)


Outcome = Callable[[Any, FetchError | None], None]
#: A typed fast path's decoder: the document, or None to leave the body to :func:`decode`.
FastDecode = Callable[[bytes], Any]
#: Query parameters of a request, decoded: ``(name, value)`` pairs in order.
Query = Sequence[tuple[str, str]]


class NodeClient:
    """Reads JSON documents from one node under a deadline and a size cap."""

    def __init__(
        self,
        engine: Engine,
        node: NodeConfig,
        max_bytes: int,
        monotonic: Callable[[], float] = time.monotonic,
        trace: RequestTrace | None = None,
        *,
        transport: TransportRecord | None = None,
    ) -> None:
        self._engine = engine
        # its answers' phases and handshakes, kept there (a probe's own, if not given)
        self.transport = transport or TransportRecord(node.url.startswith("https:"))
        self.trace = trace  # every request and its outcome recorded there, if given
        self._base = node.url if node.url.endswith("/") else node.url + "/"
        self._base_path = urlsplit(self._base).path
        self._max_bytes = max_bytes
        self._monotonic = monotonic
        headers = ("Accept: application/json", *(f"{k}: {v}" for k, v in node.headers))
        self._profile = Profile(max_bytes, headers, node.basic_auth, node.tls)
        self._suspect = False

    def as_suspect(self) -> NodeClient:
        """This client for a node that timed out lately: its requests may hold only a quarter
        of the engine's slots, so hanging nodes cannot starve the others."""
        suspect = copy.copy(self)
        suspect._suspect = True
        return suspect

    def now(self) -> float:
        """The client's clock (``time.monotonic()``, unless a test gave another)."""
        return self._monotonic()

    @property
    def max_bytes(self) -> int:
        """The response size cap, in bytes after decoding."""
        return self._max_bytes

    def path_of(self, url: str) -> str:
        """The path of ``url`` (one of this client's) as errors name it: no scheme, host or
        credentials."""
        return self._base_path + url[len(self._base) :]

    def url_for(self, segments: Sequence[str], query: Query = ()) -> str:
        """The base URL (path prefix kept) with each segment percent-encoded and appended,
        then the ``query`` parameters, names and values percent-encoded.

        ``.`` and ``..`` are encoded too (``%2E%2E``), and the engine sends the path as is
        (libcurl's ``PATH_AS_IS``), or URL normalisation would turn a chain id of ``..``
        into the node's base path.
        """
        path = "/".join(map(_encode_segment, segments))  # map: no generator frame per segment
        if not query:
            return self._base + path
        pairs = "&".join(f"{_encode_query(k)}={_encode_query(v)}" for k, v in query)
        return f"{self._base}{path}?{pairs}"

    def get(
        self,
        segments: Sequence[str],
        deadline: float,
        done: Outcome,
        query: Query = (),
        budget: ReadBudget | None = None,
        *,
        fast: FastDecode | None = None,
    ) -> None:
        """Send the GET now and call ``done(document, None)`` or ``done(None, error)`` once it
        ends, on the engine's thread (or at once if it cannot be sent). The CPU time of
        decoding the answer and of ``done`` is charged to ``budget``. With ``fast``, the
        document is what it decodes (its typed fast path), unless it hands the body back."""
        now = self._monotonic()  # also the time sent, for the trace
        if deadline - now <= 0:
            self._traced("/".join(segments), done)(None, NotSentError())
            return
        try:
            url = self.url_for(segments, query)
        except UnicodeEncodeError:  # a lone surrogate in an id the node sent
            error = FetchError(Reason.INVALID_RESPONSE, _UNENCODABLE)
            self._traced(repr("/".join(segments)), done)(None, error)
            return
        request = Request(url, deadline, self._profile, self._suspect)
        answer = _Answer(self, url, done, budget, now, fast=fast, kind=endpoint_kind(segments))
        self._engine.submit(request, answer)

    def _traced(self, path: str, done: Outcome) -> Outcome:
        """``done``, recording a request that could not be sent (when tracing)."""
        trace = self.trace
        if trace is None:
            return done
        now = self._monotonic()

        def record(document: Any, error: FetchError | None) -> None:
            trace.record(TracedRequest(self._base_path + path, now, now, error=describe(error)))
            done(document, error)

        return record


class _Answer:
    """The engine's callback for one request: turns its outcome into a document or a
    FetchError for ``done``, within the node's read budget. A slotted object, not a
    closure: thousands wait in the queue at the start of a cycle."""

    __slots__ = ("_budget", "_client", "_done", "_fast", "_kind", "_sent", "_url")

    def __init__(
        self,
        client: NodeClient,
        url: str,
        done: Outcome,
        budget: ReadBudget | None,
        sent: float = 0.0,
        *,
        fast: FastDecode | None = None,
        kind: int = 0,
    ) -> None:
        self._client, self._url, self._done, self._budget = client, url, done, budget
        self._sent, self._fast, self._kind = sent, fast, kind

    def __call__(self, outcome: Response | TransferError) -> None:
        if isinstance(outcome, Response):
            self._client.transport.note(self._kind, outcome)
        budget = self._budget
        trace = self._client.trace
        done = self._done if trace is None else self._recording(outcome, trace)
        if budget is None:
            self._answer(outcome, done)
        elif budget.spent and isinstance(outcome, Response) and outcome.status < 300:
            path = self._client.path_of(self._url)
            detail = f"{path} not read: the node's answers already took {budget.seconds:g} s of CPU"
            done(None, FetchError(Reason.TOO_LARGE, detail))
        else:
            started = time.thread_time()
            try:
                self._answer(outcome, done)
            finally:  # CPU time, never wall time: a wait for the GIL is others' work
                budget.charge(time.thread_time() - started)

    def _recording(self, outcome: Response | TransferError, trace: RequestTrace) -> Outcome:
        """``done``, first recording the request, its status and outcome in ``trace``."""
        ended = self._client.now()
        status = size = None
        if isinstance(outcome, Response):
            status, size = outcome.status, len(outcome.body)

        def record(document: Any, error: FetchError | None) -> None:
            path = self._client.path_of(self._url)
            trace.record(TracedRequest(path, self._sent, ended, status, size, describe(error)))
            self._done(document, error)

        return record

    def _answer(self, outcome: Response | TransferError, done: Outcome) -> None:
        """Hand ``done`` the document :func:`interpret` reads (through the fast path, if any)
        or the error; whatever reading raises becomes ``invalid_response``, never the
        engine's."""
        client = self._client
        path = client.path_of(self._url)
        try:
            document = interpret(outcome, path, client.max_bytes, self._fast)
        except FetchError as error:
            done(None, error)
        except Exception as error:  # e.g. MemoryError: the poll must hear of it all the same
            detail = f"the answer from {path} could not be decoded ({type(error).__name__})"
            done(None, FetchError(Reason.INVALID_RESPONSE, detail))
        else:
            done(document, None)


_UNENCODABLE = "an id to request is not valid Unicode (a lone surrogate), so it cannot be sent"


def _encode_query(text: str) -> str:
    """A query parameter's name or value, percent-encoded (plain ones, "height" and the
    digits of one, are left as they are: ``quote`` costs a microsecond)."""
    return text if text.isascii() and text.isalnum() else quote(text, safe="")


def _encode_segment(segment: str) -> str:
    if segment.isascii() and segment.isalnum():  # nothing to encode (hex ids, "health")
        return segment
    encoded = quote(segment, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def interpret(
    response: Response | TransferError, path: str, max_bytes: int, fast: FastDecode | None = None
) -> Any:
    """The JSON document of a finished request (what ``fast`` decodes, if it takes the body),
    or the FetchError that says what went wrong."""
    if isinstance(response, TransferError):
        raise classify(response, path, max_bytes)
    if response.status >= 300:
        detail = f"HTTP status {response.status} from {path}"
        if response.retry_after:
            detail += f" (Retry-After: {response.retry_after} s)"
        raise FetchError(Reason.HTTP_STATUS, detail, response.retry_after)
    if fast is not None and (document := fast(response.body)) is not None:
        return document
    return decode(response.body, path)


#: libcurl errors and what they mean for the operator, by CURLE_* code.
_TRANSFER_ERRORS: dict[int, tuple[Reason, str]] = {
    pycurl.E_OPERATION_TIMEDOUT: (Reason.TIMEOUT, "no complete answer before the deadline"),
    SHUT_DOWN: (Reason.TIMEOUT, "the exporter shut down before the answer came"),
    UNSENDABLE: (
        Reason.CONNECTION,
        "libcurl cannot take this request: a URL beyond ASCII, a NUL in a header, or libcurl "
        "failing to set it up (the log says which)",
    ),
    pycurl.E_COULDNT_RESOLVE_HOST: (Reason.CONNECTION, "name or service not known"),
    pycurl.E_PEER_FAILED_VERIFICATION: (Reason.CERTIFICATE, "certificate verify failed"),
    pycurl.E_SSL_CONNECT_ERROR: (Reason.TLS, "TLS handshake failed"),
    pycurl.E_SSL_CERTPROBLEM: (
        Reason.TLS,
        "the client certificate or key is unusable: check tls_config.cert_file and "
        "tls_config.key_file",
    ),
    pycurl.E_SSL_CIPHER: (Reason.TLS, "no usable cipher: the TLS cipher setting is refused"),
    pycurl.E_SSL_CACERT_BADFILE: (
        Reason.TLS,
        "the CA file could not be read: check tls_config.ca_file",
    ),
    pycurl.E_BAD_CONTENT_ENCODING: (
        Reason.INVALID_RESPONSE,
        "the body's content encoding is broken",
    ),
    pycurl.E_PARTIAL_FILE: (Reason.CONNECTION, "the connection broke while reading the body"),
    pycurl.E_RECV_ERROR: (Reason.CONNECTION, "the connection broke while reading the answer"),
    pycurl.E_SEND_ERROR: (Reason.CONNECTION, "the connection broke while sending the request"),
    pycurl.E_GOT_NOTHING: (Reason.CONNECTION, "the node closed the connection without answering"),
    8: (Reason.CONNECTION, "the answer is not HTTP"),  # CURLE_WEIRD_SERVER_REPLY
    # CURLE_UNSUPPORTED_PROTOCOL: only HTTP and HTTPS URLs are sent, so it means the bytes
    # that came back have no HTTP/1.x status line ("Received HTTP/0.9 when not allowed")
    pycurl.E_UNSUPPORTED_PROTOCOL: (
        Reason.CONNECTION,
        "the answer has no HTTP/1.x status line: a node that speaks only HTTP/2 without "
        "TLS (h2c) answers like this, as does another protocol on that port",
    ),
}

#: OpenSSL's X509_V_ERR_* verify results, what they mean and what to do.
_VERIFY_RESULTS: dict[int, str] = {
    2: "its issuer is unknown (the CA is not in tls_config.ca_file)",
    9: "the node's certificate is not yet valid{dates}: check the clocks, or reissue it",
    10: "the node's certificate has expired{dates}: renew it on the node",
    18: "the node's certificate is self-signed: trust it with tls_config.ca_file, or have a CA "
    "sign it",
    19: "unknown issuer: the node's chain ends in a CA that is not in tls_config.ca_file",
    20: "unknown issuer: the CA that signed the node's certificate is not in tls_config.ca_file",
    21: "unknown issuer: the node's chain is incomplete or its CA is not in tls_config.ca_file",
    62: "host name mismatch: the node's certificate is not for the host in its URL",
}
_HOST_MISMATCH = ("subject name", "does not match target host")
#: OpenSSL's reason in libcurl's error buffer ("...:SSL routines::wrong version number"):
#: OpenSSL's own fixed strings, never the node's text.
_OPENSSL_REASON = re.compile(r"SSL routines::([a-z0-9 /_.-]{1,80})")
#: Words of OpenSSL's reason and what the failed handshake means, first match wins.
_HANDSHAKE_FAILURES: tuple[tuple[str, str], ...] = (
    (
        "certificate required",
        "client certificate required: the node demands one (set tls_config.cert_file and "
        "tls_config.key_file)",
    ),
    (
        "wrong version number",
        "protocol mismatch: the node does not answer TLS on this port (plain HTTP on an "
        "https URL?)",
    ),
    ("packet length too long", "protocol mismatch: the node does not answer TLS on this port"),
    (
        "protocol version",
        "protocol mismatch: the node and the exporter share no TLS version",
    ),
    ("unsupported protocol", "protocol mismatch: the node and the exporter share no TLS version"),
    ("no protocols available", "protocol mismatch: no TLS version is enabled on both sides"),
    (
        "no application protocol",
        "protocol mismatch: the node offers no HTTP version the exporter speaks (ALPN)",
    ),
    ("no shared cipher", "cipher mismatch: the node and the exporter share no cipher"),
    ("insufficient security", "cipher mismatch: the node refuses every cipher offered"),
    (
        "handshake failure",
        "the node refused the handshake (handshake_failure alert): it may demand a client "
        "certificate (tls_config.cert_file) or share no cipher or version with the exporter",
    ),
    ("unknown ca", "the node does not trust the exporter's client certificate (unknown CA)"),
    ("bad certificate", "the node rejected the exporter's client certificate"),
    ("certificate unknown", "the node rejected the exporter's client certificate"),
    ("certificate expired", "the node rejected the exporter's client certificate: expired"),
)


_RESET_AFTER_HANDSHAKE = (
    "the node reset the connection right after the TLS handshake, before any answer: it "
    "may demand a client certificate (tls_config.cert_file and tls_config.key_file) or "
    "refuse the one sent"
)


def classify(failure: TransferError, path: str, max_bytes: int) -> FetchError:
    """Map a failed transfer to a reason and a short detail without host or credentials."""
    code = failure.code
    if code == NOT_SENT:
        return NotSentError()
    if failure.over_cap or code == pycurl.E_FILESIZE_EXCEEDED:  # declared, or counted
        return FetchError(Reason.TOO_LARGE, f"body from {path} over the {max_bytes} bytes cap")
    if code == pycurl.E_COULDNT_CONNECT:
        refused = failure.os_errno == errno.ECONNREFUSED
        return FetchError(Reason.CONNECTION, "connection refused" if refused else "cannot connect")
    tls = _tls_failure(failure)
    if tls is not None:  # the node's certificate refused, or the handshake itself failed
        verify = code == pycurl.E_PEER_FAILED_VERIFICATION
        return FetchError(Reason.CERTIFICATE if verify else Reason.TLS, tls)
    reason, detail = _TRANSFER_ERRORS.get(code, (Reason.CONNECTION, f"transfer failed ({code})"))
    return FetchError(reason, detail)


def _tls_failure(failure: TransferError) -> str | None:
    """What failed in a TLS handshake or certificate check, from libcurl's code, OpenSSL's
    verify result and the reason in libcurl's error buffer; None if not a TLS failure."""
    code, message = failure.code, failure.message
    if code == pycurl.E_PEER_FAILED_VERIFICATION:
        verify = failure.verify_result
        if verify == 62 or any(words in message for words in _HOST_MISMATCH):
            return _VERIFY_RESULTS[62]
        known = _VERIFY_RESULTS.get(verify)
        if known is None:
            return f"certificate verify failed (OpenSSL verify result {verify})"
        return known.format(dates=_dates(verify, failure.validity))
    if code not in (pycurl.E_SSL_CONNECT_ERROR, pycurl.E_RECV_ERROR, pycurl.E_SEND_ERROR):
        return None
    found = _OPENSSL_REASON.search(message)
    if found is None and failure.fresh_tls and code != pycurl.E_SSL_CONNECT_ERROR:
        # A TLS 1.3 server checks the client's certificate after the client has finished its
        # handshake; when it closes with the request unread, the kernel sends a reset that
        # overtakes its alert, and libcurl sees only the reset, at once.
        return _RESET_AFTER_HANDSHAKE
    if found is None:
        return "TLS handshake failed" if code == pycurl.E_SSL_CONNECT_ERROR else None
    words = found.group(1).strip()
    for key, meaning in _HANDSHAKE_FAILURES:
        if key in words:
            return meaning
    return f"TLS handshake failed ({words})"


def _dates(verify: int, validity: tuple[str, str] | None) -> str:
    """ " (notAfter 2021-01-01T00:00:00Z)" for an expired certificate, the notBefore for one
    not yet valid; empty when libcurl did not see the certificate's dates."""
    if validity is None:
        return ""
    name, printed = ("notBefore", validity[0]) if verify == 9 else ("notAfter", validity[1])
    try:  # libcurl prints OpenSSL's form, "Jan  1 00:00:00 2021 GMT"
        when = time.strptime(printed.replace("GMT", "").strip(), "%b %d %H:%M:%S %Y")
    except ValueError:
        return ""
    return f" ({name} {time.strftime('%Y-%m-%dT%H:%M:%SZ', when)})"


def decode(body: bytes, path: str) -> Any:
    """The body as JSON (:func:`decode_json`: an integer too long for Python is read as its
    float); an INVALID_JSON FetchError (noting an HTML page) otherwise."""
    try:
        return decode_json(body)
    except (ValueError, RecursionError):
        start = body[:64].lstrip().lower()
        hint = " (an HTML page)" if start.startswith((b"<!doctype", b"<html")) else ""
        raise FetchError(
            Reason.INVALID_JSON, f"the body from {path} is not valid JSON{hint}"
        ) from None
