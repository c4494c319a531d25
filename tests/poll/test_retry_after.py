"""Polite polling: a node answering 429 or 503 with ``Retry-After`` (seconds or an HTTP-date)
is not asked again before that time, at most MAX_RETRY_AFTER_SECONDS; meanwhile it reads as
down with that answer and when it is asked again (log, status page), no error is counted for
the requests not made, and ``ledger_node_retry_after_total`` counts the answers honoured. End
to end: an exporter process and fake nodes over real sockets."""

from __future__ import annotations

import email.utils
import time
from pathlib import Path

import pytest
import yaml

from exporter.poll.cycle import MAX_RETRY_AFTER_SECONDS
from tests.support.documents import health_doc
from tests.support.fakenode import FakeNodes
from tests.support.http import fetch
from tests.support.processes import ready_exporter
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def test_a_node_asking_for_time_is_not_asked_before_it(
    tmp_path: Path, fake_nodes: FakeNodes
) -> None:
    steady = fake_nodes.start(keep_alive=True)
    steady.set("/health", health_doc([]))
    busy = fake_nodes.start(keep_alive=True)  # 429, two minutes
    busy.set("/health", {"error": "slow down"}, 429, headers={"Retry-After": "120"})
    dated = fake_nodes.start(keep_alive=True)  # 503 with an HTTP-date, two minutes ahead
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    dated.set("/health", {"error": "maintenance"}, 503, headers={"Retry-After": when})
    greedy = fake_nodes.start(keep_alive=True)  # a day: held back the maximum only
    greedy.set("/health", {"error": "go away"}, 503, headers={"Retry-After": "86400"})
    brief = fake_nodes.start(keep_alive=True)  # one second: asked again soon after
    brief.set("/health", {"error": "busy"}, 429, headers={"Retry-After": "1"})
    plain = fake_nodes.start(keep_alive=True)  # a 503 without Retry-After: asked every cycle
    plain.set("/health", {"error": "down"}, 503)
    nodes = {"steady": steady, "busy": busy, "dated": dated, "greedy": greedy}
    nodes |= {"brief": brief, "plain": plain}
    config = tmp_path / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "nodes": [{"name": name, "url": node.url} for name, node in nodes.items()],
            }
        )
    )
    with ready_exporter(config) as exporter:
        # Cycles go on: the steady node is asked again and again, so is the plain 503 ...
        wait_until(lambda: len(steady.paths) >= 5 and len(plain.paths) >= 5, timeout=60)
        # ... and the node that asked for a second, once that second has passed
        wait_until(lambda: len(brief.paths) >= 2, timeout=60)
        metrics = fetch(exporter.base + "/metrics").text
        page = fetch(exporter.base + "/").text
        log = exporter.log()
    # the nodes that asked for minutes were asked once, in the first cycle
    assert (len(busy.paths), len(dated.paths), len(greedy.paths)) == (1, 1, 1)
    for name in ("busy", "dated", "greedy"):
        assert f'ledger_node_retry_after_total{{node="{name}"}} 1.0' in metrics
        assert f'ledger_node_up{{node="{name}"}} 0.0' in metrics
        # one request failed; the cycles that did not ask count nothing
        errors = f'ledger_node_scrape_errors_total{{endpoint="health",node="{name}"'
        assert f'{errors},reason="http_status"}} 1.0' in metrics
    assert 'ledger_node_retry_after_total{node="steady"} 0.0' in metrics
    assert 'ledger_node_retry_after_total{node="plain"} 0.0' in metrics
    assert "HTTP status 429 from /health (Retry-After: 120 s); not asked again for 120 s" in page
    # libcurl reads at most six hours; the exporter holds back five minutes at most
    assert f"s); not asked again for {MAX_RETRY_AFTER_SECONDS:g} s (until " in page
    dated_line = next(line for line in log.splitlines() if "node=dated seconds=" in line)
    assert 100 <= int(dated_line.split("seconds=")[1].split()[0]) <= 120, dated_line
    assert log.count('msg="node asked for time (Retry-After): not asked again until then"') >= 4
