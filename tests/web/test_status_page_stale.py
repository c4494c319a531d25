"""The status page once no polling cycle has ended within the stale bound, in the real
process: a banner says the data is stale, how old it is, the bound, and what to check, above
the last cycle's nodes (still listed, as of that cycle, while ``/metrics`` drops their
series); it goes when a cycle ends again. The cycle is made to fail by the fault switch of
``tests/support/faults``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exporter.model.snapshot import Snapshot
from exporter.web.landing import StatusPage
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNodes
from tests.support.faults import fault_env
from tests.support.http import fetch
from tests.support.processes import ready_exporter
from tests.support.waiting import wait_until

STALE = re.compile(
    r'<div class="banner"><b class="bad">Stale: no polling cycle has ended for (\d+)s</b>, '
    r"past this exporter's bound of 1s \(<code>ledger_exporter_stale_after_seconds</code>\)"
)


def _config(path: Path, fake_nodes: FakeNodes) -> Path:
    """Node a listing chain c1; cycles every 500 ms, stale after 3 x 0.5 + 0.4 = 1.9 s."""
    node = fake_nodes.start()
    node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    path.write_text(
        "scrape_interval: 500ms\nscrape_timeout: 400ms\n"
        f"nodes:\n  - {{name: a, url: '{node.url}'}}\n"
    )
    return path


@pytest.mark.integration
def test_the_page_says_its_data_is_stale_while_no_cycle_ends(
    tmp_path: Path, fake_nodes: FakeNodes
) -> None:
    switches = tmp_path / "faults"
    switches.mkdir()
    config = _config(tmp_path / "config.yml", fake_nodes)
    with ready_exporter(config, env=fault_env(switches)) as exporter:
        base = exporter.base
        fresh = fetch(base + "/").body.decode()
        (switches / "cycle").touch()
        wait_until(lambda: fetch(base + "/-/ready").status == 503, message=exporter.log)
        stale = fetch(base + "/").body.decode()
        (switches / "cycle").unlink()
        wait_until(lambda: fetch(base + "/-/ready").status == 200, message=exporter.log)
        again = fetch(base + "/").body.decode()
    assert "Stale:" not in fresh and "Stale:" not in again
    found = STALE.search(stale)
    assert found, stale
    assert int(found.group(1)) >= 1  # past 1.9 s: its age, not the bound's
    assert "ledger_exporter_cycle_failures_total" in stale
    assert "#ledgerexportercyclefailing" in stale  # the alert's runbook linked
    # the last cycle's node is still shown, as of that cycle (not "no nodes polled")
    assert "1 of 1 nodes up" in stale and "<bdi>a</bdi>" in stale
    assert "Probe mode, no nodes polled" not in stale


def test_the_banner_follows_the_clock_not_the_cycle() -> None:
    """The page is rendered once per snapshot: the banner is added as it is served, from
    the bound on."""
    page = StatusPage(Snapshot(completed_at=100.0, stale_after=1.9))
    assert b"Stale:" not in page.at(101.5)
    late = page.at(165.0).decode()
    assert (
        "Stale: no polling cycle has ended for 1m 5s</b>, past this exporter's bound of 1s" in late
    )
