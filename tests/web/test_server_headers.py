"""Security headers on every answer of the HTTP server, the status page still rendering under
its Content Security Policy, and ``http_server_config.headers`` overriding each default."""

from __future__ import annotations

import socket
from pathlib import Path

import bcrypt
import pytest

from exporter.config.web import DEFAULT_HEADERS, WebConfig, load_web_config
from tests.support.browser import in_page
from tests.support.fakenode import FakeNode
from tests.support.http import fetch
from tests.support.processes import ready_exporter
from tests.support.webapp import served

EXPECTED = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def test_the_defaults_are_the_documented_ones() -> None:
    assert DEFAULT_HEADERS == EXPECTED


def _raw(base: str, request: bytes) -> dict[str, str]:
    """The headers of the answer to ``request`` sent as bytes (the server closes after it)."""
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head = answer.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")[1:]
    return dict(line.split(": ", 1) for line in head)


def _security(headers: dict[str, str]) -> dict[str, str]:
    return {name: headers[name] for name in EXPECTED if name in headers}


def test_every_answer_carries_the_security_headers() -> None:
    with served(WebConfig()) as base:
        answers = {
            "page": fetch(base + "/"),
            "metrics": fetch(base + "/metrics"),
            "healthy": fetch(base + "/-/healthy"),
            "ready": fetch(base + "/-/ready"),
            "probe": fetch(base + "/probe?target=x"),
            "not found": fetch(base + "/nothing-here"),
            "method": fetch(base + "/metrics", method="PUT"),
            "reload": fetch(base + "/-/reload", method="POST"),
            "head": fetch(base + "/", method="HEAD"),
        }
        for what, answer in answers.items():
            assert _security(dict(answer.headers)) == EXPECTED, what
        # refused by http.server's parsing, and by the server before any handler
        assert _security(_raw(base, b"GET / HTTP/0.9\r\n\r\n")) == EXPECTED
        body = b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        assert _security(_raw(base, body)) == EXPECTED


def test_an_unauthorized_answer_carries_them_too() -> None:
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    with served(WebConfig(basic_auth_users={"u": hashed})) as base:
        answer = fetch(base + "/")
        assert answer.status == 401
        assert _security(dict(answer.headers)) == EXPECTED


def test_the_web_config_overrides_each_default(tmp_path: Path) -> None:
    web_file = tmp_path / "web.yml"
    web_file.write_text(
        "http_server_config:\n  headers:\n"
        "    Content-Security-Policy: \"default-src 'self'\"\n"
        "    X-Frame-Options: sameorigin\n"
        "    Referrer-Policy: same-origin\n"
        "    Strict-Transport-Security: max-age=60\n"
    )
    with served(load_web_config(str(web_file))) as base:
        for answer in (fetch(base + "/"), fetch(base + "/nothing-here")):
            headers = dict(answer.headers)
            assert _security(headers) == {
                "Content-Security-Policy": "default-src 'self'",
                "X-Frame-Options": "sameorigin",
                "Referrer-Policy": "same-origin",
                "X-Content-Type-Options": "nosniff",  # the default: not in the file
            }
            assert headers["Strict-Transport-Security"] == "max-age=60"


def test_a_referrer_policy_must_be_one_the_browsers_know(tmp_path: Path) -> None:
    web_file = tmp_path / "web.yml"
    web_file.write_text("http_server_config:\n  headers:\n    Referrer-Policy: everywhere\n")
    with pytest.raises(Exception, match="must be one of no-referrer, "):
        load_web_config(str(web_file))


def polling_with_sameorigin(tmp_path: Path, node: FakeNode) -> tuple[Path, Path]:
    """A config polling ``node`` every second and a web config that replaces X-Frame-Options."""
    config = tmp_path / "config.yml"
    config.write_text(f"scrape_interval: 1s\nnodes: [{{name: a, url: '{node.url}'}}]\n")
    web_file = tmp_path / "web.yml"
    web_file.write_text("http_server_config:\n  headers:\n    X-Frame-Options: sameorigin\n")
    return config, web_file


@pytest.mark.integration
def test_a_real_exporter_sends_them_and_its_page_renders_under_the_policy(
    tmp_path: Path, fake_node: FakeNode
) -> None:
    config, web_file = polling_with_sameorigin(tmp_path, fake_node)
    with ready_exporter(config, f"--web.config.file={web_file}") as exporter:
        page = fetch(exporter.base + "/")
        assert _security(dict(page.headers)) == {**EXPECTED, "X-Frame-Options": "sameorigin"}
        # the page's own inline style applies under its policy: the body's margin is 1.5em, and
        # the node never up is LedgerNodeDown pending (its `for` has not passed), so its badge
        # is the pending critical one: white, red text, a dashed border (unstyled, a span is
        # transparent, black and borderless)
        sev = "getComputedStyle(document.querySelector('li.pending>.sev.critical'))"
        probe = f"[{sev}.backgroundColor, {sev}.color, {sev}.borderTopStyle, "
        probe += "getComputedStyle(document.body).marginLeft].join(' ')"
        assert in_page(exporter.base + "/", probe) == (
            "rgb(255, 255, 255) rgb(187, 0, 0) dashed 24px"
        )


def test_a_header_value_it_cannot_send_is_left_out_and_every_request_is_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # past the web config's check (built directly): http.server encodes headers as Latin-1
    pasted = WebConfig(headers={"Content-Security-Policy": "default-src \u2013 none"})
    with served(pasted) as base:
        for path in ("/", "/metrics", "/-/healthy", "/nothing-here"):
            headers = dict(fetch(base + path).headers)
            assert "Content-Security-Policy" not in headers, path
            assert _security(headers) == {
                name: value for name, value in EXPECTED.items() if name != "Content-Security-Policy"
            }, path
        refused = _raw(base, b"GET / HTTP/0.9\r\n\r\n")  # the server's own refusal
        assert "Content-Security-Policy" not in refused
    left_out = [r for r in caplog.records if r.getMessage().startswith("header left out")]
    assert [r.fields for r in left_out] == [{"header": "Content-Security-Policy"}]  # type: ignore[attr-defined]


@pytest.mark.integration
def test_a_reload_to_a_value_outside_ascii_is_refused_and_the_old_headers_stay(
    tmp_path: Path, fake_node: FakeNode
) -> None:
    config, web_file = polling_with_sameorigin(tmp_path, fake_node)
    with ready_exporter(config, f"--web.config.file={web_file}") as exporter:
        web_file.write_text(  # an en dash, pasted from a document
            "http_server_config:\n  headers:\n    X-Frame-Options: DENY\n"
            '    Content-Security-Policy: "default-src \u2013 none"\n',
            encoding="utf-8",
        )
        reload = fetch(exporter.base + "/-/reload", method="POST")
        assert reload.status == 500, reload.text
        assert "http_server_config.headers.Content-Security-Policy: must be visible ASCII" in (
            reload.text
        )
        assert "U+2013 EN DASH" in reload.text
        for path in ("/", "/metrics", "/-/healthy", "/-/ready"):
            answer = fetch(exporter.base + path)
            assert answer.status == 200, path
            assert _security(dict(answer.headers)) == {**EXPECTED, "X-Frame-Options": "sameorigin"}
        # fixed (the exporter's own spelling of DENY is accepted): the reload goes ahead
        web_file.write_text("http_server_config:\n  headers:\n    X-Frame-Options: DENY\n")
        assert fetch(exporter.base + "/-/reload", method="POST").status == 200
        assert _security(dict(fetch(exporter.base + "/").headers)) == EXPECTED
