"""The engine when libcurl itself fails: every request's caller still hears back, once.

Found in issue 22's review (failure paths older than it, reachable only through an internal
libcurl failure): a handle libcurl would not take off the multi lost its request's
callback; a failure configuring or adding a handle other than the expected ones stopped the
engine and left that request unanswered; and at shutdown the first request whose end raised
left every later one unanswered. Each failure is injected into a running engine here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pycurl
import pytest

from exporter import __version__
from exporter.errors import TransferError
from exporter.poll.engine import UNSENDABLE, Engine, Profile, Request, Response
from tests.support.fakenode import FakeNode
from tests.support.inside import spare_handles
from tests.support.waiting import wait_until

PROFILE = Profile(1 << 20, ("Accept: application/json",))


class _FailingMulti:
    """The engine's CurlMulti, raising pycurl.error from ``method`` the first ``times``
    calls."""

    def __init__(self, real: pycurl.CurlMulti, method: str, times: int = 1) -> None:
        self.real, self.method, self.left = real, method, times

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.real, name)
        if name != self.method:
            return call

        def failing(*args: Any) -> Any:
            if self.left > 0:
                self.left -= 1
                raise pycurl.error(-1, f"injected {name} failure")
            return call(*args)

        return failing


def _ask(engine: Engine, url: str) -> list[Response | TransferError]:
    """Submit a GET of ``url``; the list gets its outcome(s)."""
    ended: list[Response | TransferError] = []
    engine.submit(Request(url, time.monotonic() + 30, PROFILE), ended.append)
    return ended


def _answered(ended: list[Response | TransferError]) -> Response | TransferError:
    wait_until(lambda: bool(ended), timeout=30, message="the request's outcome")
    assert len(ended) == 1
    return ended[0]


@pytest.mark.parametrize("method", ["add_handle", "remove_handle"])
def test_a_handle_libcurl_will_not_add_or_take_off_costs_one_request_at_most(
    engine: Engine, health_node: FakeNode, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding fails: that request alone fails (UNSENDABLE). Taking off fails: its answer is
    still delivered and the handle closed. Either way the engine goes on."""
    monkeypatch.setattr(engine, "_multi", _FailingMulti(engine._multi, method))
    first = _answered(_ask(engine, health_node.url + "health"))
    if method == "add_handle":
        assert isinstance(first, TransferError) and first.code == UNSENDABLE
        assert spare_handles(engine) == 0  # closed, not handed to the next request
    else:
        assert isinstance(first, Response) and first.status == 200
    for _ in range(3):
        later = _answered(_ask(engine, health_node.url + "health"))
        assert isinstance(later, Response) and later.status == 200
    assert engine.in_flight() == 0


@pytest.mark.parametrize("error", [RuntimeError("bug"), MemoryError()])
def test_any_failure_configuring_a_handle_fails_that_request_alone(
    engine: Engine, health_node: FakeNode, error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure = engine._configure

    def failing_once(handle: Any, request: Request, remaining_ms: int) -> None:
        if request.url.endswith("/fails"):
            raise error
        configure(handle, request, remaining_ms)

    monkeypatch.setattr(engine, "_configure", failing_once)
    refused = _answered(_ask(engine, health_node.url + "fails"))
    assert isinstance(refused, TransferError) and refused.code == UNSENDABLE
    assert type(error).__name__ in str(refused)
    answered = _answered(_ask(engine, health_node.url + "health"))
    assert isinstance(answered, Response) and answered.status == 200


def test_at_shutdown_every_request_out_hears_back_though_ending_one_raised(
    health_node: FakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    health_node.set("/held", {"late": True}, held=True)  # in flight until the engine closes
    engine = Engine(8, f"ledger-exporter/{__version__}")
    try:
        finish: Callable[..., None] = engine._finish
        calls = 0

        def raising_once(curl: pycurl.Curl, failure: tuple[int, str] | None) -> None:
            nonlocal calls
            calls += 1
            finish(curl, failure)  # its callback runs, then the end raises
            if calls == 1:
                raise RuntimeError("injected failure ending a request")

        monkeypatch.setattr(engine, "_finish", raising_once)
        outcomes = [_ask(engine, health_node.url + "held") for _ in range(5)]
        wait_until(lambda: engine.in_flight() == 5 and len(health_node.paths) >= 5, timeout=30)
    finally:
        engine.close(timeout=30)
        health_node.release()
    assert all(len(ended) == 1 for ended in outcomes)
    assert all(isinstance(ended[0], TransferError) for ended in outcomes)
    assert calls == 5
    assert not engine._thread.is_alive()
