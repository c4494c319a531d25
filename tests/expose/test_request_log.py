"""The debug line of each request: who asked (client, User-Agent) and what was answered
(Content-Type, status), so an operator can see which exposition format a scraper gets."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from exporter.expose.render import OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE
from tests.support.http import fetch
from tests.support.scenarios import captured_logs
from tests.support.waiting import wait_until
from tests.support.webapp import served

OPENMETRICS_FIRST = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


@pytest.fixture
def base() -> Iterator[str]:
    with served() as url:
        yield url


def request_fields(records: list[logging.LogRecord], user_agent: str) -> dict[str, Any]:
    """The fields of the one request line of ``user_agent``'s request."""
    every: list[dict[str, Any]] = [
        record.fields  # type: ignore[attr-defined]
        for record in records
        if record.getMessage() == "request"
    ]
    lines = [fields for fields in every if fields.get("user_agent") == user_agent]
    assert len(lines) == 1, every
    return lines[0]


@pytest.mark.parametrize(
    ("accept", "served"),
    [
        ("text/plain;version=0.0.4;q=1,*/*;q=0.1", TEXT_CONTENT_TYPE),  # VictoriaMetrics's
        (OPENMETRICS_FIRST, OPENMETRICS_CONTENT_TYPE),
    ],
    ids=["text", "openmetrics"],
)
def test_the_request_line_names_the_format_served(base: str, accept: str, served: str) -> None:
    agent = f"scraper/{served[:4]}"
    with captured_logs(logging.DEBUG) as logs:
        answer = fetch(base + "/metrics", headers={"Accept": accept, "User-Agent": agent})
        assert answer.headers["Content-Type"] == served
        wait_until(lambda: any(r.getMessage() == "request" for r in logs.records))
        fields = request_fields(logs.records, agent)
    assert fields["content_type"] == served
    assert (fields["method"], fields["path"], fields["status"]) == ("GET", "/metrics", "200")


def test_a_request_refused_before_its_headers_is_logged_without_them(base: str) -> None:
    """http.server's own error answers (505 for HTTP/2.0, refused before the headers are
    read) have no User-Agent to tell and no format to name."""
    port = int(base.rsplit(":", 1)[1])
    with captured_logs(logging.DEBUG) as logs:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /metrics HTTP/2.0\r\nUser-Agent: raw\r\n\r\n")
            assert sock.recv(100).startswith(b"HTTP/1.1 505 ")
        lines = wait_until(lambda: [r for r in logs.records if r.getMessage() == "request"])
    [fields] = [record.fields for record in lines]  # type: ignore[attr-defined]
    assert fields["status"] == "505" and fields["user_agent"] == ""
    assert "content_type" not in fields
