"""One thread doing every HTTP request to the nodes: libcurl's multi interface driven by epoll.

An in-flight request costs a socket and a curl handle, not a thread. Any thread may
``submit`` a request with a callback (a wakeup eventfd hands it to the engine thread); the
engine calls it once, on its own thread, with a :class:`Response` or a :class:`TransferError`.
A callback, not a ``concurrent.futures.Future``: a Future carries a Condition and an RLock,
about a kilobyte a request, and a cycle queues thousands at once. Every request
carries its own monotonic deadline, which libcurl enforces (``TIMEOUT_MS``) and the engine
double-checks, so no request outlives it whatever the node does. Connections are kept alive
in the one multi handle's cache, so every cycle reuses them; after a reload that removed a
node host, the multi handle is replaced once no request is in flight, which closes them all
(libcurl cannot close one host's connections alone).
"""

from __future__ import annotations

import base64
import calendar
import collections
import contextlib
import hashlib
import logging
import os
import re
import select
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import certifi
import pycurl

from exporter.config.nodes import TlsConfig
from exporter.errors import TransferError
from exporter.model.transport import Handshake

log = logging.getLogger("ledger_exporter")

#: libcurl error raised by the engine itself, not libcurl, when a deadline passes unsent.
NOT_SENT = -1
#: Raised when the engine closes with the request still out.
SHUT_DOWN = -2
#: Raised by the engine when libcurl refuses one of the request's options (a URL beyond
#: ASCII, a NUL in a header): that request fails alone, the engine goes on.
UNSENDABLE = -3
#: Idle curl handles kept once the queue is empty. A handle is ~17 KiB of C memory, so the
#: hundreds a busy cycle uses are closed between cycles; the multi handle keeps the connections.
SPARE_HANDLES = 16
#: How often the engine looks for requests past their deadline that libcurl has not ended.
_EXPIRY_CHECK_SECONDS = 0.1

_EPOLL_FLAGS = {
    pycurl.POLL_IN: select.EPOLLIN,
    pycurl.POLL_OUT: select.EPOLLOUT,
    pycurl.POLL_INOUT: select.EPOLLIN | select.EPOLLOUT,
}


class Profile(NamedTuple):
    """What a curl handle is configured with beyond the URL and timeouts: the body size cap,
    the raw header lines, basic-auth credentials and TLS settings. One per node, made once:
    requests with an equal profile (every request to one node, usually every node) reuse a
    handle without resetting it. A tuple, so comparing two is one C call."""

    max_bytes: int
    headers: tuple[str, ...] = ()
    basic_auth: tuple[str, str] | None = None
    tls: TlsConfig = TlsConfig()

    def __repr__(self) -> str:  # never the credentials
        auth = "" if self.basic_auth is None else ", basic_auth=..."
        return f"Profile(max_bytes={self.max_bytes}, headers={len(self.headers)}{auth})"


class Request(NamedTuple):
    """One GET: the URL, a monotonic deadline, the node's profile, and whether the node timed
    out recently (a suspect gets at most a quarter of the slots). A tuple: thousands are made
    each cycle, and a tuple costs a third of a frozen dataclass to make."""

    url: str
    deadline: float
    profile: Profile
    suspect: bool = False

    @property
    def max_bytes(self) -> int:
        """The body size cap, after content decoding."""
        return self.profile.max_bytes


class Response(NamedTuple):
    """A complete answer: status and the decoded (content-encoding removed) body, and for a
    429 or 503 the seconds its ``Retry-After`` asks to wait (libcurl reads both the seconds
    and the HTTP-date form; 0 when absent). ``phases``: the seconds of each phase (None
    when the engine reads no timers); ``handshake``: set when this request made a new TLS
    connection."""

    status: int
    body: bytes
    retry_after: int = 0
    phases: tuple[float, ...] | None = None
    handshake: Handshake | None = None


#: Statuses whose ``Retry-After`` the engine reads (RFC 9110 15.5.20, 15.6.4).
RETRY_AFTER_STATUSES = frozenset({429, 503})
#: libcurl's codes of a failed TLS handshake or certificate check: the engine keeps OpenSSL's
#: verify result for them (and the certificate's dates when they are what failed). 56 is
#: there because a TLS 1.3 server's alert (a client certificate required) arrives at the
#: first read, after the handshake.
TLS_FAILURES = frozenset(
    {
        pycurl.E_PEER_FAILED_VERIFICATION,  # 60
        pycurl.E_SSL_CONNECT_ERROR,  # 35
        pycurl.E_SSL_CERTPROBLEM,  # 58
        pycurl.E_SSL_CIPHER,  # 59
        pycurl.E_SSL_CACERT_BADFILE,  # 77
        pycurl.E_RECV_ERROR,  # 56
    }
)
#: OpenSSL's X509_V_ERR_* codes of a certificate outside its validity period (not yet
#: valid, expired), whose dates the engine reads from the certificate libcurl saw.
DATE_FAILURES = frozenset({9, 10})


#: Called once with how a request ended.
Done = Callable[[Response | TransferError], None]


def _report(done: Done, outcome: Response | TransferError) -> None:
    """Hand ``outcome`` to ``done``; a failing callback is logged, never ends the engine."""
    try:
        done(outcome)
    except Exception:
        log.exception("a request's callback failed")


class _Sink:
    """A handle's WRITEFUNCTION, set once per handle: the decoded body of its current
    transfer, in the chunks libcurl hands over, aborted once past the size cap."""

    __slots__ = ("chunks", "left", "over_cap")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.left = 0
        self.over_cap = False

    def start(self, max_bytes: int) -> None:
        self.chunks, self.left, self.over_cap = [], max_bytes, False

    def write(self, data: bytes) -> int | None:
        """Keep ``data``; any count but ``len(data)`` makes libcurl fail (CURLE_WRITE_ERROR)."""
        self.left -= len(data)
        if self.left < 0:
            self.over_cap = True
            return 0
        self.chunks.append(data)
        return None

    def take(self) -> bytes:
        """The body (one chunk, the usual case, is not copied) and the sink emptied."""
        body, self.chunks = b"".join(self.chunks), []
        return body


#: libcurl's verbose line naming a new TLS connection's version and cipher ("SSL connection
#: using TLSv1.3 / TLS_AES_256_GCM_SHA384 / x25519 / id-ecPublicKey"): OpenSSL's own names.
_NEGOTIATED = re.compile(rb"SSL connection using ([A-Za-z0-9._-]{1,32}) / ([A-Za-z0-9._-]{1,96})")
_TEXT = pycurl.INFOTYPE_TEXT


class _Negotiated:
    """A handle's DEBUGFUNCTION on https requests: keeps the TLS version and cipher libcurl
    names when it makes a new connection. libcurl tells them only in its verbose text (no
    CURLINFO holds them), so https handles run verbose, every other line ignored at once."""

    __slots__ = ("line",)

    def __init__(self) -> None:
        self.line: bytes | None = None

    def __call__(self, kind: int, data: bytes) -> None:
        if kind == _TEXT and data.startswith(b"SSL connection using"):
            self.line = data


class _Handle:
    """A curl handle, its sink, the profile it is configured with (None: not yet) and the
    LOW_SPEED_TIME last set (None: not since configured), whether it runs verbose (https:
    :class:`_Negotiated`), and the request it carries with its callback while in flight (no
    object per transfer)."""

    __slots__ = (
        "curl",
        "done",
        "low_speed_time",
        "negotiated",
        "profile",
        "request",
        "sink",
        "verbose",
    )

    def __init__(self) -> None:
        self.curl = pycurl.Curl()
        self.sink = _Sink()
        self.negotiated = _Negotiated()
        self.profile: Profile | None = None
        self.low_speed_time: int | None = None
        self.verbose = False
        self.request: Request | None = None
        self.done: Done | None = None


_PHASE_TIMERS = (
    pycurl.NAMELOOKUP_TIME_T,
    pycurl.CONNECT_TIME_T,
    pycurl.APPCONNECT_TIME_T,
    pycurl.PRETRANSFER_TIME_T,
    pycurl.STARTTRANSFER_TIME_T,
    pycurl.TOTAL_TIME_T,
)


def read_phases(curl: pycurl.Curl) -> tuple[float, ...]:
    """The seconds of each of exporter.model.transport.PHASES from libcurl's microsecond
    timers (each counted from the start, so a phase is a difference; never below 0). A
    reused connection has 0 for resolve, connect and tls; plain http 0 for tls."""
    getinfo = curl.getinfo
    lookup, connect, tls, pre, first, total = [getinfo(timer) for timer in _PHASE_TIMERS]
    connected = max(connect, lookup)
    return (
        lookup / 1e6,
        (connected - lookup) / 1e6,
        max(0, tls - connected) / 1e6 if tls else 0.0,
        max(0, first - pre) / 1e6,
        max(0, total - max(first, pre)) / 1e6,
    )


def _common_name(printed: bytes) -> str:
    """The last CN of a name as libcurl prints it ("O = x, CN = y", values with a separator
    in quotes, the rest escaped by OpenSSL to ASCII); empty without one."""
    text = printed.decode("ascii", "replace")
    found = ""
    for part in re.finditer(r'(?:^|, )CN = ("(?:[^"\\]|\\.)*"|(?:[^,\\]|\\.)*)', text):
        found = part.group(1)
    return found[1:-1] if found.startswith('"') and found.endswith('"') else found


def _expiry(printed: bytes) -> float | None:
    """A certificate date as libcurl prints it ("Dec  3 09:45:17 2026 GMT"), as Unix time."""
    try:
        when = time.strptime(
            printed.decode("ascii").replace("GMT", "").strip(), "%b %d %H:%M:%S %Y"
        )
    except (UnicodeDecodeError, ValueError):
        return None
    return float(calendar.timegm(when))


def _fingerprint(pem: bytes) -> str:
    """The SHA-256 of a certificate's DER, from its PEM (empty when it cannot be read)."""
    body = b"".join(line for line in pem.splitlines() if line and not line.startswith(b"-----"))
    try:
        return hashlib.sha256(base64.b64decode(body, validate=True)).hexdigest()
    except ValueError:
        return ""


def read_handshake(curl: pycurl.Curl, negotiated: bytes | None) -> Handshake | None:
    """The handshake a request made (its CERTINFO: the chain the node presented, node's first),
    or None when libcurl kept no certificate (a reused connection). Read raw: a node's
    certificate may hold any bytes, and only OpenSSL's printed ASCII forms are kept."""
    chain = curl.getinfo_raw(pycurl.INFO_CERTINFO)
    if not chain:
        return None
    certs = [{bytes(key): value for key, value in cert} for cert in chain]
    dates = [
        _expiry(value) for cert in certs if isinstance(value := cert.get(b"Expire date"), bytes)
    ]
    known = [date for date in dates if date is not None]
    leaf = certs[0]
    version = cipher = ""
    if negotiated is not None and (found := _NEGOTIATED.match(negotiated)) is not None:
        version, cipher = found.group(1).decode(), found.group(2).decode()
    names = [
        _common_name(value) if isinstance(value := leaf.get(key), bytes) else ""
        for key in (b"Issuer", b"Subject")
    ]
    pem = leaf.get(b"Cert")
    fingerprint = _fingerprint(pem) if isinstance(pem, bytes) else ""
    return Handshake(min(known, default=None), version, cipher, names[0], names[1], fingerprint)


def _validity(curl: pycurl.Curl) -> tuple[str, str] | None:
    """The first (the node's own) certificate's start and expire dates from libcurl's
    CERTINFO, as it prints them ("Jan  1 00:00:00 2021 GMT"); None when it has none. Read
    raw: the node's certificate may carry any bytes in the fields libcurl prints (a comment
    that is not UTF-8), and only the two dates are decoded."""
    certinfo = curl.getinfo_raw(pycurl.INFO_CERTINFO)
    if not certinfo:
        return None
    fields = {bytes(key): value for key, value in certinfo[0]}
    start, expire = fields.get(b"Start date"), fields.get(b"Expire date")
    if not isinstance(start, bytes) or not isinstance(expire, bytes):
        return None
    return start.decode("ascii", "replace"), expire.decode("ascii", "replace")


def _tls_diagnosis(curl: pycurl.Curl) -> tuple[int, tuple[str, str] | None]:
    """OpenSSL's verify result and, for a date failure, the certificate's dates: details for
    the operator, so whatever the node presented, reading them never fails the engine."""
    try:
        verify_result = int(curl.getinfo(pycurl.SSL_VERIFYRESULT))
    except Exception:  # a detail lost, never the engine
        log.debug("could not read OpenSSL's verify result", exc_info=True)
        return 0, None
    if verify_result not in DATE_FAILURES:
        return verify_result, None
    try:
        return verify_result, _validity(curl)
    except Exception:  # a detail lost, never the engine
        log.debug("could not read the certificate's dates", exc_info=True)
        return verify_result, None


def _read_handshake(curl: pycurl.Curl, negotiated: bytes | None) -> Handshake | None:
    """:func:`read_handshake`, whatever the node presented: a detail lost, never the engine."""
    try:
        return read_handshake(curl, negotiated)
    except Exception:  # a detail lost, never the engine
        log.debug("could not read the TLS handshake's certificates", exc_info=True)
        return None


def _refuse(done: Done, error: Exception) -> None:
    """Fail a request libcurl would not take (UNSENDABLE), naming the error's type."""
    detail = f"libcurl cannot take this request ({type(error).__name__})"
    _report(done, TransferError(UNSENDABLE, detail))


def _discard(handle: _Handle, done: Done, error: Exception) -> None:
    """A request failed to start for a reason not its own: it fails alone, and its handle
    (whatever is wrong with it) is closed, not reused by the next request."""
    log.error(
        "libcurl could not take a request; its handle is closed",
        exc_info=error,
        extra={"fields": {"error": type(error).__name__}},
    )
    handle.curl.close()
    _refuse(done, error)


class Engine:
    """The event loop thread and its CurlMulti; ``close()`` ends both.

    ``_lock`` orders what other threads do (submit, resize, close, the counts they read)
    with the engine thread. State only the engine thread changes (the transfers, the
    suspects out, a queue item taken) it changes without the lock, as does a submit made on
    the engine thread itself (a node's chain requests, sent from its /health callback):
    under the GIL a deque's append and popleft and a dict's len are atomic, and nothing
    else can replace the queues or drain them meanwhile (only the engine thread does)."""

    def __init__(
        self,
        max_in_flight: int,
        user_agent: str,
        max_connections: int = 0,
        *,
        transport: bool = True,
    ) -> None:
        # ``transport``: read each answer's phase timers and each new TLS connection's
        # handshake (benchmarks/bench_phases.py turns it off to measure what it costs)
        self._transport = transport
        self._max_in_flight = max(1, max_in_flight)
        self._user_agent = user_agent
        self._lock = threading.Lock()
        self._queue: collections.deque[tuple[Request, Done]] = collections.deque()
        self._suspects: collections.deque[tuple[Request, Done]] = collections.deque()
        self._suspects_out = 0
        self._max_suspects = max(1, self._max_in_flight // 4)
        self._max_connections = max_connections
        self._closing = False
        self._renew = False  # close every kept-alive connection once none is in use
        self._timer_at: float | None = None
        self._next_expiry_check = 0.0
        self._sockets: dict[int, int] = {}
        self._transfers: dict[pycurl.Curl, _Handle] = {}  # the handles in flight
        self._spare: list[_Handle] = []
        self._connects = 0
        self._ca_bundle = certifi.where()
        self._wakeup = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._wakeup_open = True  # guarded by _lock: never write to a closed (reused) fd
        self._wakeup_pending = False  # guarded by _lock: written, not yet read by the engine
        self._epoll = select.epoll()
        self._epoll.register(self._wakeup, select.EPOLLIN)
        self._cache_size = self._connection_cache_size()
        self._multi = self._new_multi()
        self._thread = threading.Thread(target=self._run, name="http-engine", daemon=True)
        self._thread.start()

    def resize(self, connections: int, max_in_flight: int | None = None) -> None:
        """Keep up to ``connections`` idle connections open (one per node host) and, if given,
        allow ``max_in_flight`` requests at once, from the engine's next turn on; callable
        from any thread (a reload)."""
        with self._lock:
            self._max_connections = connections
            if max_in_flight is not None:
                self._max_in_flight = max(1, max_in_flight)
                self._max_suspects = max(1, self._max_in_flight // 4)
        self._wake()

    def close_idle_connections(self) -> None:
        """Close every kept-alive connection as soon as no request is in flight (after a
        reload that removed node hosts); the next requests open new ones. Any thread."""
        with self._lock:
            self._renew = True
        self._wake()

    def _wake(self) -> None:
        """Wake the engine thread; nothing once it has ended and closed its eventfd, nor while
        an earlier wakeup is still unread (a cycle's thousand /health requests, queued from
        the poll's thread, wake the engine once, not once each)."""
        with self._lock:
            if self._wakeup_open and not self._wakeup_pending:
                self._wakeup_pending = True
                os.eventfd_write(self._wakeup, 1)

    @property
    def max_in_flight(self) -> int:
        """Requests allowed on the network at once."""
        with self._lock:
            return self._max_in_flight

    def _connection_cache_size(self) -> int:
        return max(self._max_connections, self._max_in_flight, 8)

    def submit(self, request: Request, done: Done) -> None:
        """Queue ``request`` from any thread; ``done`` hears how it ended by its deadline at the
        latest, on the engine's thread (at once, on the caller's, once the engine is closed)."""
        if threading.get_ident() == self._thread.ident and not self._closing:
            # the engine's own loop starts it next; its shutdown drains it, on this thread
            (self._suspects if request.suspect else self._queue).append((request, done))
            return
        with self._lock:
            closing = self._closing
            if not closing:
                (self._suspects if request.suspect else self._queue).append((request, done))
        if closing:
            _report(done, TransferError(SHUT_DOWN, "the exporter is shutting down"))
            return
        self._wake()

    def connections_opened(self) -> int:
        """New connections (TCP, and TLS where https) made so far: keep-alive keeps it low."""
        with self._lock:
            return self._connects

    def in_flight(self) -> int:
        """Requests queued or out on the network."""
        with self._lock:
            return len(self._queue) + len(self._suspects) + len(self._transfers)

    def close(self, timeout: float = 2.0) -> None:
        """Fail what is still out, close every handle and socket, end the thread."""
        with self._lock:
            self._closing = True
        self._wake()
        self._thread.join(timeout)

    # --- the engine thread ---

    def _new_multi(self) -> pycurl.CurlMulti:
        multi = pycurl.CurlMulti()
        multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        multi.setopt(pycurl.M_MAXCONNECTS, self._cache_size)
        return multi

    def _renew_multi(self) -> None:
        """Replace the multi handle, closing its cache of connections (none is in use)."""
        with self._lock:
            self._renew = False
        self._multi.close()
        for fd in self._sockets:  # normally already removed through M_SOCKETFUNCTION
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)
        self._sockets.clear()
        self._timer_at = None
        self._multi = self._new_multi()

    def _run(self) -> None:
        try:
            while not self._closing:
                if self._renew and not self._transfers:
                    self._renew_multi()
                if self._cache_size != (size := self._connection_cache_size()):
                    self._cache_size = size
                    self._multi.setopt(pycurl.M_MAXCONNECTS, size)
                self._start_queued()
                self._close_idle_handles()
                self._dispatch(self._epoll.poll(self._poll_timeout()))
                now = time.monotonic()
                if self._timer_at is not None and self._timer_at <= now:
                    self._timer_at = None
                    self._multi.socket_action(pycurl.SOCKET_TIMEOUT, 0)
                    self._collect_done()
                if now >= self._next_expiry_check:
                    self._next_expiry_check = now + _EXPIRY_CHECK_SECONDS
                    self._expire(now)
        except Exception:  # a bug here must not leave callers waiting forever
            log.exception("HTTP engine failed")
        finally:
            self._shut_down()

    def _poll_timeout(self) -> float:
        """Seconds until libcurl's timer, capped so deadlines are checked regularly; -1 (wait
        for an event) when the engine is idle: nothing queued, in flight or timed, so only a
        submit, resize or close (each writes the eventfd) has work for it. An idle exporter
        then sleeps between cycles instead of waking ten times a second."""
        if self._timer_at is None:
            if not self._transfers and not self._queue and not self._suspects:
                return -1.0
            return _EXPIRY_CHECK_SECONDS
        return min(max(0.0, self._timer_at - time.monotonic()), _EXPIRY_CHECK_SECONDS)

    def _dispatch(self, events: list[tuple[int, int]]) -> None:
        for fd, mask in events:
            if fd == self._wakeup:
                # Read and clear together: a submit between the two would otherwise find the
                # mark set and write nothing, and the read would eat its write, leaving the
                # mark set for good (later submits would wait for the poll's timeout).
                with self._lock, contextlib.suppress(BlockingIOError):
                    self._wakeup_pending = False
                    os.eventfd_read(self._wakeup)
                continue
            flags = 0
            if mask & (select.EPOLLIN | select.EPOLLHUP):
                flags |= pycurl.CSELECT_IN
            if mask & select.EPOLLOUT:
                flags |= pycurl.CSELECT_OUT
            if mask & select.EPOLLERR:
                flags |= pycurl.CSELECT_ERR
            self._multi.socket_action(fd, flags)
        self._collect_done()

    def _on_socket(self, what: int, fd: int, multi: Any, socketp: Any) -> None:
        """M_SOCKETFUNCTION: mirror libcurl's interest in ``fd`` into the epoll set."""
        if what == pycurl.POLL_REMOVE:
            if self._sockets.pop(fd, None) is not None:
                try:  # noqa: SIM105 (contextlib.suppress costs a microsecond, every request)
                    self._epoll.unregister(fd)
                except (OSError, ValueError):  # libcurl closed it already
                    pass
            return
        flags = _EPOLL_FLAGS[what]
        if fd in self._sockets:
            self._epoll.modify(fd, flags)
        else:
            self._epoll.register(fd, flags)
        self._sockets[fd] = flags

    def _on_timer(self, timeout_ms: int) -> None:
        """M_TIMERFUNCTION: libcurl wants ``socket_action(SOCKET_TIMEOUT)`` in this many ms."""
        self._timer_at = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000.0

    def _next_queued(self) -> tuple[Request, Done] | None:
        """The next request allowed a slot: suspects only while they hold under a quarter.
        (No lock: other threads only append to the queues; see the class docstring.)"""
        if len(self._transfers) >= self._max_in_flight:
            return None
        if self._queue:
            return self._queue.popleft()
        if self._suspects and self._suspects_out < self._max_suspects:
            return self._suspects.popleft()
        return None

    def _start_queued(self) -> None:
        now = time.monotonic()
        while (item := self._next_queued()) is not None:
            request, done = item
            remaining_ms = int((request.deadline - now) * 1000)
            if remaining_ms <= 0:
                _report(done, TransferError(NOT_SENT, "no time left to send the request"))
                continue
            self._start(request, done, remaining_ms)

    def _start(self, request: Request, done: Done, remaining_ms: int) -> None:
        """Hand ``request`` to libcurl; one it will not take (a URL beyond ASCII, a NUL, or
        any failure of libcurl's to configure or add the handle) fails alone (UNSENDABLE),
        heard of like any other, and the engine goes on."""
        handle = self._spare.pop() if self._spare else _Handle()
        try:
            self._configure(handle, request, remaining_ms)
        except (ValueError, TypeError, pycurl.error) as error:  # UnicodeEncodeError, a NUL
            handle.curl.reset()
            handle.profile = None  # half configured: the next request configures it in full
            self._spare.append(handle)
            _refuse(done, error)
            return
        except Exception as error:  # MemoryError, or a bug: the handle's state is unknown
            _discard(handle, done, error)
            return
        try:
            self._multi.add_handle(handle.curl)  # calls nothing back: no transfer starts here
        except Exception as error:  # libcurl's own failure, or a bug: not this request's
            _discard(handle, done, error)
            return
        handle.request, handle.done = request, done
        self._transfers[handle.curl] = handle  # engine thread only: no lock (class docstring)
        self._suspects_out += request.suspect

    def _close_idle_handles(self) -> None:
        """Close spare handles beyond SPARE_HANDLES once nothing waits for one."""
        if len(self._spare) <= SPARE_HANDLES:
            return
        with self._lock:
            if self._queue or self._suspects:
                return
        while len(self._spare) > SPARE_HANDLES:
            self._spare.pop().curl.close()

    def _configure(self, handle: _Handle, request: Request, remaining_ms: int) -> None:
        """The options of one GET. A handle last used with the same profile keeps its options
        and gets only the URL and timeouts; any other is reset and configured in full."""
        curl, setopt = handle.curl, handle.curl.setopt
        profile = request.profile
        if handle.profile is not profile and handle.profile != profile:
            if handle.profile is not None:
                curl.reset()
            self._configure_profile(handle, profile)
            handle.profile, handle.low_speed_time = profile, None
        handle.sink.start(profile.max_bytes)
        verbose = self._transport and request.url.startswith("https:")
        if handle.verbose != verbose:  # https requests name their TLS version and cipher
            setopt(pycurl.VERBOSE, verbose)
            handle.verbose = verbose
        handle.negotiated.line = None
        setopt(pycurl.URL, request.url)
        setopt(pycurl.TIMEOUT_MS, remaining_ms)
        setopt(pycurl.CONNECTTIMEOUT_MS, remaining_ms)
        low_speed_time = max(1, remaining_ms // 1000)
        if handle.low_speed_time != low_speed_time:  # whole seconds: mostly as last time
            setopt(pycurl.LOW_SPEED_TIME, low_speed_time)
            handle.low_speed_time = low_speed_time

    def _configure_profile(self, handle: _Handle, profile: Profile) -> None:
        """Every option but the URL and timeouts, on a new or reset handle. pycurl encodes a
        ``str`` as ASCII: header values and credentials go as UTF-8 bytes (as Go's clients send
        them), file names in the file system's encoding; the URL stays ASCII (the config,
        ``/probe`` and the client's percent-encoding see to it)."""
        setopt = handle.curl.setopt
        setopt(pycurl.PATH_AS_IS, 1)  # never resolve %2E%2E: a chain ".." is not the base path
        setopt(pycurl.PROXY, "")  # never a proxy from the environment
        setopt(pycurl.FOLLOWLOCATION, 0)
        setopt(pycurl.NOSIGNAL, 1)
        setopt(pycurl.LOW_SPEED_LIMIT, 1)
        setopt(pycurl.MAXFILESIZE, profile.max_bytes)
        setopt(pycurl.ACCEPT_ENCODING, "gzip, deflate")
        setopt(pycurl.USERAGENT, self._user_agent)
        setopt(pycurl.HTTPHEADER, [line.encode() for line in profile.headers])
        setopt(pycurl.WRITEFUNCTION, handle.sink.write)
        setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        # the certificates' text, kept at each TLS handshake (kept-alive connections make
        # few), so an expired or not yet valid certificate's failure can name its dates
        setopt(pycurl.OPT_CERTINFO, 1)
        setopt(pycurl.DEBUGFUNCTION, handle.negotiated)
        setopt(pycurl.VERBOSE, handle.verbose)  # a reset handle is quiet again
        if profile.basic_auth is not None:
            setopt(pycurl.HTTPAUTH, pycurl.HTTPAUTH_BASIC)
            setopt(pycurl.USERNAME, profile.basic_auth[0].encode())
            setopt(pycurl.PASSWORD, profile.basic_auth[1].encode())
        tls = profile.tls
        setopt(pycurl.CAINFO, os.fsencode(tls.ca_file or self._ca_bundle))
        if tls.cert_file and tls.key_file:
            setopt(pycurl.SSLCERT, os.fsencode(tls.cert_file))
            setopt(pycurl.SSLKEY, os.fsencode(tls.key_file))
        if tls.insecure_skip_verify:
            setopt(pycurl.SSL_VERIFYPEER, 0)
            setopt(pycurl.SSL_VERIFYHOST, 0)

    def _collect_done(self) -> None:
        while True:
            try:
                _, succeeded, failed = self._multi.info_read()
            except UnicodeDecodeError:  # pycurl decodes libcurl's error text as UTF-8
                # A node's bytes in that text (a certificate's name, say) must not end the
                # engine: the transfers of this batch end at their deadline instead.
                log.warning("libcurl's error text for a request was not UTF-8; it times out")
                continue
            for curl in succeeded:
                self._finish(curl, None)
            for curl, code, message in failed:
                self._finish(curl, (code, message))
            if not succeeded and not failed:
                return

    def _finish(self, curl: pycurl.Curl, failure: tuple[int, str] | None) -> None:
        """End the transfer of ``curl``: release its handle and tell its caller, once, how it
        ended (``failure``: libcurl's code and message, None for a complete answer)."""
        handle = self._transfers.pop(curl)  # engine thread only: no lock (class docstring)
        request, done = handle.request, handle.done
        assert request is not None  # set with the callback, with the request
        assert done is not None
        self._suspects_out -= request.suspect
        handle.request, handle.done = None, None
        sink = handle.sink
        status = os_errno = verify_result = retry_after = connects = 0
        validity = phases = handshake = None
        try:
            status = curl.getinfo(pycurl.RESPONSE_CODE)
            connects = curl.getinfo(pycurl.NUM_CONNECTS)
            if connects:
                with self._lock:
                    self._connects += connects
            if failure:
                os_errno = curl.getinfo(pycurl.OS_ERRNO)
                if failure[0] in TLS_FAILURES:
                    verify_result, validity = _tls_diagnosis(curl)
            else:
                if status in RETRY_AFTER_STATUSES:
                    retry_after = max(0, curl.getinfo(pycurl.RETRY_AFTER))
                if self._transport:
                    phases = read_phases(curl)
                    if connects and handle.verbose:
                        handshake = _read_handshake(curl, handle.negotiated.line)
        finally:  # whatever happens, the handle is released and the caller hears back
            body, over_cap = sink.take(), sink.over_cap
            try:
                self._release(handle)
            finally:
                if failure is None:
                    _report(done, Response(status, body, retry_after, phases, handshake))
                else:
                    code, message = failure
                    fresh_tls = connects > 0 and request.url.startswith("https:")
                    error = TransferError(
                        code,
                        message,
                        os_errno,
                        over_cap,
                        verify_result=verify_result,
                        validity=validity,
                        fresh_tls=fresh_tls,
                    )
                    _report(done, error)

    def _release(self, handle: _Handle) -> None:
        """Take the handle off the multi; keep a few for reuse, close the rest. A handle
        libcurl will not take off is closed (closing takes it off), never reused."""
        try:
            self._multi.remove_handle(handle.curl)
        except pycurl.error:
            log.exception("libcurl could not take a finished request's handle off; closed")
            handle.curl.close()
            return
        if len(self._spare) < self._max_in_flight:
            self._spare.append(handle)
        else:
            handle.curl.close()

    def _expire(self, now: float) -> None:
        """Fail transfers past their deadline (libcurl's own timeout normally came first)."""
        with self._lock:
            late = [
                curl
                for curl, handle in self._transfers.items()
                if handle.request is not None and handle.request.deadline + 0.1 < now
            ]
            expired = [item for item in self._queue if item[0].deadline < now]
            expired += [item for item in self._suspects if item[0].deadline < now]
            if expired:
                self._queue = collections.deque(i for i in self._queue if i[0].deadline >= now)
                self._suspects = collections.deque(
                    i for i in self._suspects if i[0].deadline >= now
                )
        for _, done in expired:
            _report(done, TransferError(NOT_SENT, "no time left to send the request"))
        for curl in late:
            self._finish(curl, (pycurl.E_OPERATION_TIMEDOUT, "deadline passed"))

    def _shut_down(self) -> None:
        """Fail every request still queued or out (each callback called, whatever another
        one's end raised), then close the handles, the multi handle, epoll and the eventfd."""
        with self._lock:
            self._closing = True
            queued = [*self._queue, *self._suspects]
            self._queue.clear()
            self._suspects.clear()
        for _, done in queued:
            _report(done, TransferError(SHUT_DOWN, "the exporter is shutting down"))
        try:
            for curl in list(self._transfers):
                try:
                    self._finish(curl, (SHUT_DOWN, "the exporter is shutting down"))
                except Exception:  # its callback has run (_finish's finally): go on
                    log.exception("ending a request at shutdown failed")
            for handle in self._spare:
                handle.curl.close()
            self._spare.clear()
            self._multi.close()
        finally:
            self._epoll.close()
            with self._lock:
                self._wakeup_open = False
            os.close(self._wakeup)
