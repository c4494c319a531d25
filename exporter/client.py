"""HTTP access to one node's JSON API: bounded in time and size, every failure classified.

All nodes share one pooled ``requests.Session`` (built by :func:`make_session`); a request never
outlives the cycle's deadline and never reads more than the response size cap.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any
from urllib.parse import quote

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import DecodeError, ProtocolError, ReadTimeoutError
from urllib3.exceptions import SSLError as Urllib3SSLError

from exporter import __version__
from exporter.config import NodeConfig

_CHUNK_BYTES = 64 * 1024


class Reason(Enum):
    """Why a request failed: the ``reason`` label of ``ledger_node_scrape_errors_total``."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    HTTP_STATUS = "http_status"
    INVALID_JSON = "invalid_json"
    INVALID_RESPONSE = "invalid_response"
    TOO_LARGE = "too_large"


class FetchError(Exception):
    """A request to a node failed; ``reason`` classifies it, the message explains it."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class NotSentError(FetchError):
    """The cycle's deadline passed before the request could be sent (it waited in the queue):
    a timeout, but not one the node caused."""

    def __init__(self) -> None:
        super().__init__(Reason.TIMEOUT, "no time left in this cycle to send the request")


def make_session(pool_size: int, hosts: int = 1) -> requests.Session:
    """One session for every node, no retries: a kept-alive connection pool for each of the
    ``hosts`` (fewer would evict pools and reconnect, a TLS handshake per request over
    https), each holding up to ``pool_size`` connections."""
    session = requests.Session()
    session.trust_env = False  # proxies and .netrc from the environment must not leak in
    adapter = HTTPAdapter(pool_connections=max(hosts, 1), pool_maxsize=pool_size, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers.update(
        {"User-Agent": f"ledger-exporter/{__version__}", "Accept": "application/json"}
    )
    return session


class NodeClient:
    """Reads JSON documents from one node under a deadline and a size cap."""

    def __init__(
        self,
        session: requests.Session,
        node: NodeConfig,
        max_bytes: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._session = session
        self._node = node
        self._base = node.url if node.url.endswith("/") else node.url + "/"
        self._max_bytes = max_bytes
        self._monotonic = monotonic
        self._headers = dict(node.headers)
        self._verify: bool | str = node.tls.ca_file or not node.tls.insecure_skip_verify
        self._cert = (
            (node.tls.cert_file, node.tls.key_file)
            if node.tls.cert_file and node.tls.key_file
            else None
        )

    def url_for(self, segments: Sequence[str]) -> str:
        """The base URL (path prefix kept) with each segment percent-encoded and appended.

        ``.`` and ``..`` are encoded too, or URL normalisation would turn a chain id of
        ``..`` into the node's base path.
        """
        return self._base + "/".join(_encode_segment(segment) for segment in segments)

    def get_json(self, segments: Sequence[str], deadline: float) -> Any:
        """GET the document at ``segments`` and decode it; raises FetchError on any failure."""
        remaining = deadline - self._monotonic()
        if remaining <= 0:
            raise NotSentError
        try:
            with self._session.get(
                self.url_for(segments),
                headers=self._headers,
                auth=self._node.basic_auth,
                verify=self._verify,
                cert=self._cert,
                timeout=(remaining, remaining),
                allow_redirects=False,
                stream=True,
            ) as response:
                body = self._read_body(response, deadline)
        except requests.Timeout:
            raise FetchError(Reason.TIMEOUT, f"no answer within {remaining:.3g}s") from None
        except requests.RequestException as error:
            raise _classify(error) from None
        return _decode(body)

    def _read_body(self, response: requests.Response, deadline: float) -> bytes:
        if response.status_code >= 300:
            raise FetchError(Reason.HTTP_STATUS, f"HTTP status {response.status_code}")
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self._max_bytes:
            raise FetchError(
                Reason.TOO_LARGE, f"declared {declared} bytes, over the {self._max_bytes} cap"
            )
        body = bytearray()
        while chunk := _read_some(response):
            body += chunk
            if len(body) > self._max_bytes:
                raise FetchError(Reason.TOO_LARGE, f"body over the {self._max_bytes} bytes cap")
            if self._monotonic() > deadline:
                raise FetchError(Reason.TIMEOUT, "the body did not arrive before the deadline")
        return bytes(body)


def _encode_segment(segment: str) -> str:
    encoded = quote(segment, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def _read_some(response: requests.Response) -> bytes:
    """The next piece of the decoded body, as soon as one socket read brings any.

    ``iter_content`` blocks until a whole chunk has arrived, so a node dripping its body a few
    bytes at a time would hold the request far past the deadline; ``read1`` never waits for more
    than one read, and the caller checks the deadline between pieces.
    """
    try:
        return bytes(response.raw.read1(_CHUNK_BYTES, decode_content=True) or b"")
    except ReadTimeoutError:
        raise FetchError(Reason.TIMEOUT, "the body did not arrive in time") from None
    except DecodeError:
        raise FetchError(Reason.INVALID_RESPONSE, "the body's content encoding is broken") from None
    except (ProtocolError, Urllib3SSLError):
        raise FetchError(Reason.CONNECTION, "the connection broke while reading the body") from None


def _classify(error: requests.RequestException) -> FetchError:
    """Map a failure to send the request or read the headers (the body has its own reader)."""
    if isinstance(error, requests.ConnectionError):
        return FetchError(Reason.CONNECTION, _connection_detail(error))
    return FetchError(Reason.CONNECTION, type(error).__name__)


def _connection_detail(error: requests.RequestException) -> str:
    """A short cause without the URL (which may carry a path worth keeping out of logs)."""
    text = str(error)
    for marker in ("Connection refused", "Name or service not known", "certificate verify failed"):
        if marker in text:
            return marker.lower()
    if isinstance(error, requests.exceptions.SSLError):
        return "TLS handshake failed"
    return "connection failed"


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return _raise_invalid_json(body)


def _raise_invalid_json(body: bytes) -> Any:
    start = body[:64].lstrip().lower()
    hint = " (an HTML page)" if start.startswith((b"<!doctype", b"<html")) else ""
    raise FetchError(Reason.INVALID_JSON, f"the body is not valid JSON{hint}")
