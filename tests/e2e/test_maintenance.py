"""Maintenance as data (issue 36, item 4) in the real process, over real sockets: a config
with maintenance entries gives ``ledger_node_maintenance`` and
``ledger_blockchain_maintenance`` on /metrics and an "In maintenance" section on the status
page, the node in maintenance still polled and its problems not listed as problems; a
``SIGHUP`` reload adds and removes entries; an entry whose ``until`` passes stops applying by
itself, with no reload. Once an entry applies, its end is on the monotonic clock: the
exporter's wall clock stepped 2 hours on past an entry's ``until`` (libfaketime,
``tests/support/clock.py``; its monotonic clock runs on) neither ends nor extends it."""

from __future__ import annotations

import html
import signal
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.clock import SteppedWallClock
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.http import fetch
from tests.support.processes import ready_exporter
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

MAINTENANCE = ("ledger_node_maintenance", "ledger_blockchain_maintenance")


def maintenance_series(base: str) -> dict[tuple[str, str, str], float]:
    """The maintenance samples /metrics serves now: (name, node or blockchain, reason)."""
    found = {}
    for family in text_string_to_metric_families(fetch(base + "/metrics").text):
        for sample in family.samples:
            if sample.name in MAINTENANCE:
                labels = sample.labels
                who = labels.get("node") or labels["blockchain"]
                found[sample.name, who, labels["reason"]] = sample.value
    return found


def node_up(base: str, node: str) -> float | None:
    for family in text_string_to_metric_families(fetch(base + "/metrics").text):
        for sample in family.samples:
            if sample.name == "ledger_node_up" and sample.labels["node"] == node:
                return sample.value
    return None


def last_cycle(base: str) -> float:
    """When the cycle /metrics shows ended, on the exporter's wall clock (0: none yet)."""
    for family in text_string_to_metric_families(fetch(base + "/metrics").text):
        for sample in family.samples:
            if sample.name == "ledger_exporter_last_successful_cycle_timestamp_seconds":
                return float(sample.value)
    return 0.0


def page_sections(base: str) -> tuple[str, str]:
    """The status page's problem lists and its "In maintenance" section, as text."""
    page = html.unescape(fetch(base + "/").text)
    lists, _, rest = page.partition("<h3>In maintenance</h3>")
    return lists.split("<h2>Nodes</h2>")[0], rest.split("</ul>")[0]


def utc(unix: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


def write_config(path: Path, a: FakeNode, b: FakeNode, entries: str) -> None:
    path.write_text(
        "scrape_interval: 500ms\n"
        f"nodes:\n  - {{name: a, url: '{a.url}', labels: {{site: eu}}}}\n"
        f"  - {{name: b, url: '{b.url}'}}\n"
        f"maintenance:\n{entries}"
    )


def test_entries_apply_reload_and_expire_by_themselves(
    tmp_path: Path, fake_nodes: FakeNodes
) -> None:
    a, b = fake_nodes.start(), fake_nodes.start()
    for node in (a, b):
        node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    clock = SteppedWallClock(tmp_path)
    start = int(time.time())
    a_until, chain_until = start + 3600, start + 7200
    config = tmp_path / "config.yml"
    write_config(
        config,
        a,
        b,
        f"  - {{node: a, until: '{utc(a_until)}', reason: kernel upgrade}}\n"
        f"  - {{blockchain: c1, until: {utc(chain_until)}, reason: 'chain \"v2\" upgrade'}}\n",
    )
    with ready_exporter(config, env=clock.env()) as exporter:
        base = exporter.base
        assert wait_until(lambda: maintenance_series(base)) == {
            ("ledger_node_maintenance", "a", "kernel upgrade"): 1.0,
            ("ledger_blockchain_maintenance", "c1", 'chain "v2" upgrade'): 1.0,
        }
        metrics = fetch(base + "/metrics").text
        assert 'ledger_node_maintenance{node="a",reason="kernel upgrade",site="eu"} 1.0' in metrics

        # node a taken down for its upgrade: still polled, not listed as a problem
        a.set("/health", {"error": "upgrading"}, 503)
        wait_until(lambda: node_up(base, "a") == 0.0, message="node a was not polled")
        problems, aside = page_sections(base)
        assert "LedgerNodeDown" not in problems and "Nothing needs attention" in problems
        assert f"until {utc(a_until)}" in aside and "kernel upgrade" in aside
        assert "not listed as problems: LedgerNodeDown" in aside
        assert 'chain "v2" upgrade' in aside

        # a reload: the chain's entry removed, one for node b added, for a few seconds
        b_until = int(time.time()) + 6
        write_config(
            config,
            a,
            b,
            f"  - {{node: a, until: '{utc(a_until)}', reason: kernel upgrade}}\n"
            f"  - {{node: b, until: '{utc(b_until)}', reason: disk swap}}\n",
        )
        exporter.signal(signal.SIGHUP)
        expected = {
            ("ledger_node_maintenance", "a", "kernel upgrade"): 1.0,
            ("ledger_node_maintenance", "b", "disk swap"): 1.0,
        }
        wait_until(lambda: maintenance_series(base) == expected, message="reload not applied")

        # b's until passes: b's entry ends by itself, a's stays
        wait_until(
            lambda: (
                maintenance_series(base)
                == {("ledger_node_maintenance", "a", "kernel upgrade"): 1.0}
            ),
            message="b's entry did not end by itself",
        )
        # the wall clock steps 2 hours on, past a's until: logged, and a's entry goes on
        clock.step_to(a_until - start + 3600)
        wait_until(lambda: last_cycle(base) > a_until, message=exporter.log)  # after the step
        assert "the wall clock stepped" in exporter.log()
        assert maintenance_series(base) == {("ledger_node_maintenance", "a", "kernel upgrade"): 1.0}
        # a reload without a's entry ends it: a's down state is a problem again
        write_config(config, a, b, "  []\n")
        exporter.signal(signal.SIGHUP)
        wait_until(lambda: not maintenance_series(base), message="a's entry did not end")
        wait_until(lambda: "In maintenance" not in fetch(base + "/").text)
        problems, aside = page_sections(base)
        assert "LedgerNodeDown" in problems and aside == ""
        log = exporter.log()
    ended = [line for line in log.splitlines() if 'msg="maintenance ended"' in line]
    assert len(ended) == 3, log  # the chain's (by a reload), b's (by its until), a's (reload)
    assert "node=b" in ended[1] and "node=a" in ended[2]
