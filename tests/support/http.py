"""The one HTTP client of the tests: a request to the exporter, the simulator or Prometheus.

``fetch`` sends one request over ``http.client`` and returns the answer whatever its status
(an error status is an answer, not an exception): no redirect followed, no proxy from the
environment, no body decoded, so a test sees exactly what was served. Connection failures
raise ``OSError``. ``wait_for_text`` polls a URL until its body says something.
"""

from __future__ import annotations

import http.client
import json as jsonlib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

from tests.support.waiting import wait_until

REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status, headers (looked up case-insensitively) and the raw body."""

    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self) -> Any:
        return jsonlib.loads(self.body)


def fetch(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, object] | None = None,
    body: bytes | None = None,
    json: Any = None,
    context: ssl.SSLContext | None = None,
    timeout: float = 10.0,
    follow_redirects: bool = False,
) -> Answer:
    """One request to ``url`` (``params`` appended as a query; ``json`` sent as the body,
    with its content type); the connection is closed after the answer, as curl does.
    ``follow_redirects`` GETs where a redirect points, as a browser would (curl -L)."""
    if params:
        url += ("&" if urlsplit(url).query else "?") + urlencode(params)
    sent = {"Connection": "close", **(headers or {})}
    if json is not None:
        body = jsonlib.dumps(json).encode()
        sent.setdefault("Content-Type", "application/json")
    answer = _send(url, method=method, headers=sent, body=body, context=context, timeout=timeout)
    for _ in range(5 if follow_redirects else 0):
        location = answer.headers.get("Location")
        if answer.status not in REDIRECTS or location is None:
            break
        url = urljoin(url, location)
        sent = {"Connection": "close", **(headers or {})}
        answer = _send(url, method="GET", headers=sent, body=None, context=context, timeout=timeout)
    return answer


def _send(
    url: str,
    *,
    method: str,
    headers: dict[str, str],
    body: bytes | None,
    context: ssl.SSLContext | None,
    timeout: float,
) -> Answer:
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host, port = parts.hostname or "", parts.port
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        return Answer(response.status, response.headers, response.read())
    finally:
        connection.close()


def wait_for_text(url: str, needle: str, *, timeout: float = 30.0) -> str:
    """GET ``url`` until its body contains ``needle`` (connection errors meaning "not yet");
    the body that did."""
    last = [""]

    def served() -> str | None:
        last[0] = fetch(url).text
        return last[0] if needle in last[0] else None

    found: str = wait_until(
        served,
        timeout=timeout,
        ignoring=(OSError,),
        message=lambda: f"{needle!r} not served by {url}; last body:\n{last[0]}",
    )
    return found


def get_json(url: str, *, params: Mapping[str, object] | None = None) -> Any:
    """GET ``url``, which must answer 200; its JSON document."""
    answer = fetch(url, params=params)
    assert answer.status == 200, f"GET {url}: {answer.status} {answer.text}"
    return answer.json()
