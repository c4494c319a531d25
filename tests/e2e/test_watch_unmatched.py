"""A watch entry whose blockchain no polled node lists is never asked: it is reported, never
silently dropped (issue 33: "copy the example, replace its nodes" left the example's entries
exporting nothing, with no word). A log line when the set of such entries changes (at the
first cycle that finds any), a line on the status page, and a note from ``--config.check``
when the nodes' blockchains are configured."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from exporter.config.watchlist import WatchConfig, WatchedContract, WatchedWallet
from exporter.model.watch_readings import UnmatchedEntry, unmatched_entries
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode
from tests.support.http import fetch
from tests.support.processes import ExporterProcess, exporter_command
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

WATCH = """watch:
  contracts:
    - {blockchain: c1, address: '0x1', name: token}
    - {blockchain: example-chain, address: '0x2', name: example-token}
  wallets:
    - {blockchain: other-chain, address: w1, name: treasury}
"""
NEVER_ASKED = "never asked: no polled node lists its blockchain"


def _unmatched_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "no polled node lists" in line]


@pytest.mark.integration
def test_an_entry_no_node_lists_is_logged_once_shown_and_cleared(
    tmp_path: Path, fake_node: FakeNode
) -> None:
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    fake_node.set("/blockchains/c1/contracts/0x1", {"status": "ACTIVE", "version": 1})
    config = tmp_path / "config.yml"
    config.write_text(
        f"scrape_interval: 1s\nnodes:\n  - {{name: a, url: '{fake_node.url}'}}\n{WATCH}"
    )
    exporter = ExporterProcess(config)
    try:
        exporter.wait_ready()
        page = str(
            wait_until(
                lambda: (text := fetch(exporter.base + "/").text).count(NEVER_ASKED) == 2 and text,
                message="the unmatched entries never showed on the page",
            )
        )
        assert "example-token" in page and "treasury" in page
        wait_until(  # several cycles: still one line, not one a cycle
            lambda: fake_node.paths.count("/health") >= 4, message="the node was not polled"
        )
        [line] = _unmatched_lines(exporter.log())
        assert "level=warn" in line and "count=2" in line
        assert "contract example-token on blockchain example-chain" in line
        assert "wallet treasury on blockchain other-chain" in line
        assert "contract token " not in line

        # the node starts listing one of the chains: the set changes, a new line says so
        fake_node.play(health_doc(["c1", "example-chain"]), {"c1": chain_doc(10)})
        second = str(
            wait_until(
                lambda: len(lines := _unmatched_lines(exporter.log())) == 2 and lines[1],
                message="the change was not logged",
            )
        )
        assert "count=1" in second and "example-token" not in second
        assert "wallet treasury on blockchain other-chain" in second

        # and every chain: cleared, with a line saying so, and off the page
        chains = ["c1", "example-chain", "other-chain"]
        fake_node.play(health_doc(chains), {"c1": chain_doc(10)})
        wait_until(
            lambda: "every watch entry's blockchain is listed" in exporter.log(),
            message="the clearing was not logged",
        )
        wait_until(
            lambda: NEVER_ASKED not in fetch(exporter.base + "/").text,
            message="the page still shows an unmatched entry",
        )
    finally:
        code, log = exporter.stop()
    assert code == 0, log


def _check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        exporter_command("--config.check", f"--config.file={config}"),
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip


def test_config_check_notes_an_entry_on_a_chain_no_node_is_configured_for(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yml"
    nodes = (
        "nodes:\n"
        "  - {name: a, url: 'http://127.0.0.1:9/', blockchains: [c1]}\n"
        "  - {name: b, url: 'http://127.0.0.1:9/', blockchains: [c1, other-chain]}\n"
    )
    config.write_text(nodes + WATCH)
    done = _check(config)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stdout.splitlines() if ": note: " in line]
    assert notes == [
        f"{config}: note: watch contract example-token on blockchain example-chain: none of the "
        "nodes it may ask has that blockchain in nodes[].blockchains; unless a node's /health "
        "lists it, it is never asked"
    ]
    # a node without blockchains may list any chain: nothing to note
    config.write_text(nodes + "  - {name: c, url: 'http://127.0.0.1:9/'}\n" + WATCH)
    done = _check(config)
    assert done.returncode == 0 and ": note: " not in done.stdout, done.stdout


def test_entries_are_judged_by_the_nodes_they_may_ask() -> None:
    watch = WatchConfig(
        contracts=(WatchedContract("x", "0x1", "t", (), ("b",)),),
        wallets=(WatchedWallet("y", "w", "w"),),
    )
    nodes = ["a", "b"]
    assert unmatched_entries(watch, nodes, {}) == ()  # nothing known: nothing judged
    assert unmatched_entries(watch, nodes, {"a": {"x", "y"}, "b": set()}) == (
        UnmatchedEntry("contract", "x", "t"),  # only b may be asked for it
    )
    assert unmatched_entries(watch, nodes, {"a": set()}) == (UnmatchedEntry("wallet", "y", "w"),)
    assert unmatched_entries(watch, nodes, {"a": set()}, every_node_known=True) == ()
