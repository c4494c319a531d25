"""The status page at 3 a.m. (issue 19): the network's worst problem first, every problem with
the severity of the shipped alert it mirrors and in severity order, no node named without a
majority, watched objects that page, a council below its minimum, syncing by the alert's own
30 minutes, a probe-only exporter, a failed reload's problems, chain ids always shortened.

Unit tables over hand-made snapshots; ``tests/web/test_landing.py`` renders the page in Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.app import Exporter
from exporter.config.exporter import load_config
from exporter.config.nodes import NodeConfig
from exporter.errors import ConfigError
from exporter.model.network import Agreement, ChainAgreement, NetworkView
from exporter.model.readings import read_chain, read_health
from exporter.model.snapshot import ChainStatus, NodeStatus, Snapshot
from exporter.model.watch_readings import (
    ContractReading,
    WalletReading,
    WatchedObject,
    WatchKind,
    WatchStatus,
)
from exporter.poll.history import History
from exporter.poll.results import ChainResult, NodeResult
from exporter.web import alert_thresholds, problems
from exporter.web.alert_thresholds import Severity
from ledger_simulator import SimulatedNetwork
from tests.support.documents import chain_doc, health_doc
from tests.support.http import fetch as fetch_answer
from tests.support.testdata import REPO
from tests.support.waiting import wait_until
from tests.support.webapp import landing_page

NOW = 1_700_000_000.0
LONG = "ab" * 32  # a 64-character chain id
OTHER = "cd" * 32


def chain(blockchain: str = LONG, height: int = 100, **overrides: object) -> ChainStatus:
    reading = read_chain(chain_doc(height, **overrides))
    return ChainStatus(blockchain, reading, None, NOW - 3, 0)


def node(name: str, *chains: ChainStatus, up: bool = True, peers: int = 4) -> NodeStatus:
    health = read_health(health_doc([c.blockchain for c in chains], peers)) if up else None
    error = None if up else "connection: refused"
    return NodeStatus(name, (), health, error, chains, 0.1, NOW - 5 if up else NOW - 200)


def snapshot(*nodes: NodeStatus, **fields: object) -> Snapshot:
    return replace(Snapshot(tuple(nodes), 0.25, NOW), **fields)  # type: ignore[arg-type]


def agreement(**flags: bool) -> Agreement:
    return Agreement.of(sorted(flags.items()))


NO_ONE = Agreement()


def view(
    blocks: Agreement = NO_ONE, councils: Agreement = NO_ONE, partitions: int = 1
) -> NetworkView:
    """One chain's view: 2 hashes (council sets) as soon as any node disagrees."""
    hashes = (2 if any(not flag for _, flag in blocks) else 1) if len(blocks) else None
    sets = 2 if any(not flag for _, flag in councils) else 1
    chain_view = ChainAgreement(LONG, 95, hashes, blocks, sets, councils, 100)
    names = sorted({n for n, _ in blocks} | {n for n, _ in councils})
    return NetworkView((chain_view,), partitions, tuple((n, 1) for n in names))


class Page(HTMLParser):
    """The visible text, each top ``<li>`` of a problem list (and per list, its items) without
    the lines folded under it, each folded line (``folded``), every title."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.items: list[str] = []
        self.folded: list[str] = []  # the lines under another (<ul class="folded">)
        self.lists: list[list[str]] = []  # each <ul class="problems">: its items
        self.titles: list[str] = []
        self._open: list[list[str]] = []  # the <li> being read, innermost last
        self._style = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.titles += [value or "" for key, value in attrs if key == "title"]
        self._style = tag in ("style", "title")
        if tag == "li":
            self._open.append([])
        if tag == "ul" and ("class", "problems") in attrs:
            self.lists.append([])
        if tag not in ("b", "bdi", "code", "span", "small", "a"):
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        self._style = False
        if tag == "li" and self._open:
            item = " ".join("".join(self._open.pop()).split())
            if self._open:
                self.folded.append(item)
                return
            self.items.append(item)
            if self.lists:
                self.lists[-1].append(self.items[-1])

    def handle_data(self, data: str) -> None:
        if not self._style:
            self.parts.append(data)
            if self._open:
                self._open[-1].append(data)

    @property
    def text(self) -> str:
        return " ".join("".join(self.parts).split())


def page(shot: Snapshot) -> Page:
    return Page(landing_page(shot, NOW, fired=True))


# --- severities and thresholds are the shipped alerts' --------------------------------------


def shipped_alerts() -> dict[str, dict[str, Any]]:
    """Each alert's rule; of an alert of several rules (a burn rate's window pairs, a
    certificate's two severities) its first, the most severe."""
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    found: dict[str, dict[str, Any]] = {}
    for rule in (r for g in rules["groups"] for r in g["rules"] if "alert" in r):
        found.setdefault(rule["alert"], rule)
    return found


def test_each_problem_has_the_severity_of_the_alert_it_mirrors() -> None:
    """The page's severities are read from the package's rendering of the rules, which
    holds every shipped alert's as deploy/prometheus/alerts.yml labels it."""
    alerts = shipped_alerts()
    listed = {name for name, rule in alerts.items() if rule["labels"]["severity"] != "none"}
    assert alert_thresholds.SHIPPED.severities.keys() == listed
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    each: dict[str, set[str]] = {}
    for rule in (r for g in rules["groups"] for r in g["rules"] if "alert" in r):
        each.setdefault(rule["alert"], set()).add(rule["labels"]["severity"])
    for name, severity in alert_thresholds.SHIPPED.severities.items():
        worst = min(Severity[label.upper()] for label in each[name])
        assert severity is worst, name
        if name in alert_thresholds.SHIPPED.by_halt:  # each rule's, by the chain's halt
            both = {alert_thresholds.SHIPPED.severity(name, halted=h).label for h in (False, True)}
            assert both == each[name], name
    # the council's two alerts: a warning while the chain advances, critical once halted
    for name in ("LedgerCouncilQuorumThin", "LedgerCouncilBelowMinMembers"):
        assert alert_thresholds.SHIPPED.severity(name, halted=False) is Severity.WARNING
        assert alert_thresholds.SHIPPED.severity(name, halted=True) is Severity.CRITICAL
    for name in listed:  # and each alert's runbook, its rule's
        runbook = alerts[name]["annotations"]["runbook_url"]
        assert alert_thresholds.SHIPPED.runbook(name) == runbook


def test_syncing_is_flagged_after_the_alerts_own_wait() -> None:
    rule = shipped_alerts()["LedgerBlockchainSyncingTooLong"]
    assert rule["for"] == "30m" and problems.SHIPPED_THRESHOLDS.syncing_too_long_seconds == 30 * 60
    syncing = chain(syncing=True)
    early = page(snapshot(node("a", replace(syncing, syncing_since=NOW - 300))))
    assert "info a chain abababab…: syncing for 5m 0s (alerts after 30m)" in early.items
    late = page(snapshot(node("a", replace(syncing, syncing_since=NOW - 1801))))
    assert (
        "warning a chain abababab…: syncing for 30m 1s LedgerBlockchainSyncingTooLong" in late.items
    )


def test_the_history_says_since_when_a_chain_has_been_syncing() -> None:
    """Unbroken, as the alert's `for` counts: a cycle without the flag starts it again."""
    history = History()

    def cycle(now: float, syncing: bool | None) -> float | None:
        reading = None if syncing is None else read_chain(chain_doc(100, syncing=syncing))
        result = NodeResult(
            node=NodeConfig("a", "http://x/"), health=read_health(health_doc(["c"])), error=None,
            chains=[ChainResult("c", reading)], duration=0.1,
        )  # fmt: skip
        (status,) = history.record([result], now)
        return status.chains[0].syncing_since

    assert [cycle(100, True), cycle(115, True), cycle(130, False), cycle(145, True)] == [
        100,
        100,
        None,
        145,
    ]
    assert [cycle(160, None), cycle(175, True)] == [None, 175]  # an unread chain breaks it too


# --- order: the network first, then by severity -----------------------------------------


def test_problems_are_ordered_by_severity_and_the_network_leads() -> None:
    nodes = (
        node("a", chain(syncing=True)),  # info
        node("b", replace(chain(), blocks_behind=12)),  # warning
        node("c", chain(), up=False),  # critical
        node("d", chain(), peers=0),  # critical
    )
    # three up nodes, each alone: no group holds a majority
    shot = snapshot(*nodes, network=replace(view(partitions=3), largest_partition=1))
    items = page(shot).items
    severities = [item.split()[0] for item in items]
    assert severities == ["critical", "critical", "critical", "warning", "info"]
    assert items[0].startswith("critical the up polled nodes form 3 groups")  # the network
    assert [item.split()[1] for item in items[1:]] == ["c:", "d:", "b", "a"]
    text = page(shot).text
    assert "Needs attention: 3 critical, 1 warning Also listed: 1 info (no action" in text
    assert "<title>(3 critical, 1 warning) ledger-exporter</title>" in landing_page(
        shot, NOW, fired=True
    )


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ({"n1": False, "n2": False}, []),  # 1-1: no majority
        ({"n1": False, "n2": False, "n3": False, "n4": False}, []),  # 2-2
        ({"n1": True, "n2": True, "n3": True, "n4": False, "n5": False}, ["n4", "n5"]),  # 3-2
    ],
)
def test_a_fork_names_a_node_only_when_a_majority_holds(
    flags: dict[str, bool], named: list[str]
) -> None:
    nodes = [node(name, chain()) for name in flags]
    shown = page(snapshot(*nodes, network=view(blocks=agreement(**flags))))
    (fork,) = [item for item in shown.items if "LedgerBlockchainForked" in item]
    assert fork.startswith("critical chain abababab…: forked: 2 different blocks at checkpoint")
    off = [item for item in shown.items if "LedgerNodeOffMajorityBlock" in item]
    assert [item.split()[1] for item in off] == named
    if named:
        assert f"off the majority: {', '.join(named)}" in fork
    else:
        assert "no block has a majority of the nodes compared" in fork
        assert "no node is named" in fork
    assert shown.items[0] == fork  # the page leads with the network's worst problem


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ({"n1": False, "n2": False}, []),
        ({"n1": True, "n2": True, "n3": False}, ["n3"]),
        ({"n1": False, "n2": False, "n3": False, "n4": False}, []),
    ],
)
def test_council_views_name_a_node_only_when_a_majority_holds(
    flags: dict[str, bool], named: list[str]
) -> None:
    nodes = [node(name, chain()) for name in flags]
    shown = page(snapshot(*nodes, network=view(councils=agreement(**flags))))
    (views,) = [item for item in shown.items if "LedgerCouncilViewsDiverge" in item]
    assert views.startswith("warning chain abababab…: 2 different council member sets")
    off = [item for item in shown.items if "LedgerNodeOffMajorityCouncil" in item]
    assert [item.split()[1] for item in off] == named


@pytest.mark.parametrize("flags", [{"n1": True, "n2": True, "n3": False},
                                   {"n1": True, "n2": True, "n3": True, "n4": False}])  # fmt: skip
def test_one_node_off_the_majoritys_block_is_its_own_line_never_a_fork(
    flags: dict[str, bool],
) -> None:
    """As LedgerBlockchainForked: one node's word is that node's LedgerNodeOffMajorityBlock."""
    nodes = [node(name, chain()) for name in flags]
    shown = page(snapshot(*nodes, network=view(blocks=agreement(**flags))))
    assert not [item for item in shown.items if "LedgerBlockchainForked" in item]
    off = [item for item in shown.items if "LedgerNodeOffMajorityBlock" in item]
    assert [item.split()[1] for item in off] == [max(flags)]


def test_a_council_below_its_minimum_is_a_warning_while_the_chain_advances() -> None:
    """As seen by this exporter: the chain still advances, so its council has its quorum
    (the warning rule of LedgerCouncilBelowMinMembers)."""
    thin = chain(councilMembers=["k1", "k2"], consensus={"minMembers": 3})
    items = page(snapshot(node("a", thin))).items
    assert items == [
        "warning a chain abababab…: sees 2 council members, fewer than consensus.minMembers "
        "3, as seen by this exporter; the chain still advances, so its quorum holds "
        "LedgerCouncilBelowMinMembers"
    ]
    assert not page(snapshot(node("a", chain(consensus={"minMembers": 4})))).items


def test_a_council_below_its_minimum_on_a_halted_chain_is_critical_under_the_halt() -> None:
    """The critical rule, once the chain has halted, held back by LedgerBlockchainHalted."""
    thin = chain(councilMembers=["k1", "k2"], consensus={"minMembers": 3})
    halted = replace(thin, height_changed_at=NOW - 601)
    shown = page(snapshot(node("a", halted)))
    (halt,) = shown.items
    assert halt.startswith("critical chain abababab…: halted") and "LedgerBlockchainHalted" in halt
    below = [line for line in shown.folded if "LedgerCouncilBelowMinMembers" in line]
    assert below == [
        "critical a chain abababab…: sees 2 council members, fewer than consensus.minMembers "
        "3, as seen by this exporter; the chain has halted LedgerCouncilBelowMinMembers"
    ]


# --- watched contracts and wallets -------------------------------------------------------


def contract(node_name: str, status: str, version: float = 2) -> WatchedObject:
    reading = ContractReading(status, version, "0x5f", "evm", "c0de")
    return WatchedObject(node_name, (), WatchKind.CONTRACT, LONG, "token", reading)


def wallet(node_name: str, enabled: float) -> WatchedObject:
    reading = WalletReading(enabled, 0, (), "w1", "ed25519", "pk")
    return WatchedObject(node_name, (), WatchKind.WALLET, LONG, "treasury", reading)


def test_watched_objects_that_page_are_listed() -> None:
    watch = WatchStatus(
        (
            contract("a", "ACTIVE"),
            contract("b", "PAUSED"),
            wallet("a", 1.0),
            wallet("b", 0.0),
        )
    )
    shown = page(snapshot(node("a", chain()), node("b", chain()), watch=watch))
    section = shown.text.split("Watched contracts and wallets", 1)[1]
    assert section.index("b token chain abababab…: contract is PAUSED, not ACTIVE") >= 0
    assert "b treasury chain abababab…: wallet is disabled LedgerWatchedWalletDisabled" in section
    assert (
        "token chain abababab…: the nodes disagree: status ACTIVE: a; PAUSED: b "
        "LedgerWatchedContractNodesDisagree" in section
    )
    assert "treasury chain abababab…: the nodes disagree: enabled yes: a; no: b" in section
    calm = WatchStatus((contract("a", "ACTIVE"), wallet("a", 1.0)))
    assert "Every watched contract is ACTIVE and every watched wallet enabled." in (
        page(snapshot(node("a", chain()), watch=calm)).text
    )


# --- probe mode, reloads, ids -------------------------------------------------------------


def test_a_probe_only_exporter_says_so() -> None:
    text = page(Snapshot((), 0.01, NOW, probe_mode=True)).text
    assert "Probe mode This exporter polls no nodes of its own" in text
    assert "/probe?target=URL&module=NAME" in text
    assert "every node is up and in step" not in text.lower()
    assert "0 of 0 nodes up" not in text and "Nodes Node State" not in text


def test_a_failed_reloads_problems_are_in_the_banner_escaped_and_secret_free(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yml"
    config.write_text("nodes:\n  - name: a\n    url: http://127.0.0.1:1/\n")
    exporter = Exporter(load_config(str(config)), str(config))
    config.write_text(
        "nodes:\n  - name: a\n    url: http://127.0.0.1:1/\n"
        "    basic_auth: {username: u, password: hunter2-secret}\n"
        "    bogus_<script>: 1\n"
    )
    try:
        with pytest.raises(ConfigError, match="bogus"):
            exporter.reload()
    finally:
        exporter.stop()
    shown = exporter.exposition().snapshot
    shot = replace(
        snapshot(node("a", chain())),
        config_reload_ok=shown.config_reload_ok,
        config_reload_problems=shown.config_reload_problems,
    )
    html = landing_page(shot, NOW, fired=True)
    assert "hunter2" not in html and "<script>" not in html
    banner = Page(html).text.split("The last configuration reload failed", 1)[1]
    (problem,) = exporter.exposition().snapshot.config_reload_problems
    assert problem.startswith(f"{config}: ") and "bogus_<script>: unknown key" in problem
    assert problem in banner.split("Fix the file")[0]
    many = replace(shot, config_reload_problems=tuple(f"p{i}" for i in range(25)))
    assert "p19 and 5 more" in Page(landing_page(many, NOW, fired=True)).text


def test_chain_ids_are_shortened_everywhere_with_the_full_id_on_hover() -> None:
    nodes = [
        node("a", chain(), chain(OTHER)),
        node("b", chain(syncing=True), replace(chain(OTHER), blocks_behind=40)),
        node("c", ChainStatus(LONG, None, "timeout: no answer")),
    ]
    watch = WatchStatus((contract("a", "PAUSED"),))
    shown = page(snapshot(*nodes, network=view(blocks=agreement(a=False, b=False)), watch=watch))
    assert LONG not in shown.text and OTHER not in shown.text
    assert LONG in shown.titles and OTHER in shown.titles
    assert re.search(r"chain abababab…: forked", shown.text)


# --- in a real browser, at 1280 px --------------------------------------------------------

WIDTH = 1280
TOKEN, TREASURY = "karma-token", "treasury"


def chromium(*args: str) -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "chromium is needed (make tools installs Debian's package)"
    command = [found, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--window-size={WIDTH},1600", *args]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def fetch(url: str) -> str:
    return fetch_answer(url).text


@pytest.fixture
def night(tmp_path: Path) -> Iterator[tuple[str, SimulatedNetwork]]:
    """Six simulated nodes at 3 a.m.: one down, one forked, one syncing, one stalled, one cut
    off with another council and a disabled wallet, a paused contract on a healthy one; then
    a reload that fails."""
    with SimulatedNetwork(nodes=6, chains=2, block_interval=0.5, seed=3, port=0) as net:
        chain0 = net.chain_ids[0]
        token = net.ledger.contract_addresses(0)[0]
        wallet_address = net.ledger.wallet_addresses()[0]
        watch = {
            "contracts": [{"blockchain": chain0, "address": token, "name": TOKEN}],
            "wallets": [{"blockchain": chain0, "address": wallet_address, "name": TREASURY}],
        }
        nodes = [{"name": n, "url": u} for n, u in net.node_urls.items()]
        config = tmp_path / "config.yml"
        settings = {"scrape_interval": "1s", "nodes": nodes, "watch": watch}
        config.write_text(yaml.safe_dump(settings))
        net.set_fault("node-2", "down")
        net.set_fault("node-4", "syncing", chain=chain0)
        net.set_fault("node-5", "stall")
        net.set_fault("node-6", "peers_lost")
        net.set_fault("node-6", "other_council", chain=chain0)
        net.set_fault("node-6", "wallet_disabled", chain=chain0)
        net.set_fault("node-1", "contract_paused", chain=chain0)
        exporter = Exporter(load_config(str(config)), str(config))
        server = exporter.start("127.0.0.1:0")
        try:
            base = f"http://127.0.0.1:{server.port}/"
            wait_until(  # node-5 fell 10 blocks behind
                lambda: "LedgerNodeBehind" in fetch(base),
                timeout=60,
                message="the stalled node never fell behind",
            )
            net.set_fault("node-3", "fork", chain=chain0)  # a fork behind the stalled node
            wait_until(
                lambda: "LedgerNodeOffMajorityBlock" in fetch(base),
                timeout=60,
                message="the fork never showed",
            )
            config.write_text(
                "nodes:\n  - name: x\n    url: http://127.0.0.1:1/\n    colour: <blue>\n"
            )
            assert fetch_answer(base + "-/reload", method="POST").status == 500
            yield base, net
        finally:
            exporter.stop()


#: A pending line's marker, as the page's text reads.
PENDING = re.compile(r" pending: fires in (?:\d+[dhms] )+")


@pytest.mark.integration
def test_the_status_page_at_3am_in_headless_chromium(
    night: tuple[str, SimulatedNetwork], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    base, net = night
    html = fetch(base)
    shown = Page(chromium("--dump-dom", base))
    for section in shown.lists:  # firing first, then pending, each most severe first
        order = [(bool(PENDING.search(item)), item.split()[0]) for item in section]
        rank = ["critical", "warning", "info"].index
        assert order == sorted(order, key=lambda key: (key[0], rank(key[1]))), section
    # a new exporter: each line pending (but those the nodes' own times date), its marker
    # put aside to read the line
    shown.items = [re.sub(PENDING, " ", item) for item in shown.items]
    shown.lists = [[re.sub(PENDING, " ", item) for item in part] for part in shown.lists]
    items = [item for item in shown.items if item.split()[0] in ("critical", "warning", "info")]
    # one node off the majority's block, one node cut off: each that node's line, never
    # the chain's fork nor the network's partition (the rules need more than one node)
    assert not [item for item in items if "forked: " in item or "LedgerBlockchainForked" in item]
    network, _nodes, _watched = shown.lists  # the three sections, in this order
    assert network[0] == items[0]
    assert not any("LedgerNetworkPartitioned" in item for item in network), network
    assert any("LedgerCouncilViewsDiverge" in item for item in network), network
    text = re.sub(PENDING, " ", shown.text)
    assert "node-6: linked by peers to none of the other up polled nodes" in text
    assert "node-2: never up: connection" in text
    assert "node-3 chain" in text and "is not the majority's LedgerNodeOffMajorityBlock" in text
    assert re.search(r"info node-4 chain \w{8}…: syncing for \d+s \(alerts after 30m\)", text)
    assert re.search(r"warning node-5 chain \w{8}…: \d+ blocks behind LedgerNodeBehind", text)
    assert f"node-1 {TOKEN} chain" in text and "contract is PAUSED, not ACTIVE" in text
    assert f"node-6 {TREASURY} chain" in text and "wallet is disabled" in text
    banner = text.split("The last configuration reload failed", 1)[1].split("Fix the file")[0]
    assert "colour: unknown key" in banner and "<blue>" not in html
    for chain_id in net.chain_ids:
        assert chain_id not in text and chain_id in shown.titles
    # no sideways scroll at 1280 px: the same page, measured by the browser itself
    measured = tmp_path / "measured.html"
    probe = (
        "<script>document.body.setAttribute('data-widths', "
        "document.documentElement.scrollWidth + ' ' + window.innerWidth)</script>"
    )
    measured.write_text(html.replace("</body>", probe + "</body>"))
    widths = re.search(r'data-widths="(\d+) (\d+)"', chromium("--dump-dom", measured.as_uri()))
    assert widths, "the browser did not measure the page"
    assert int(widths[2]) == WIDTH and int(widths[1]) <= WIDTH, widths.groups()
    artifacts = tmp_path_factory.getbasetemp() / "artifacts"
    artifacts.mkdir(exist_ok=True)
    shot = artifacts / "status-page-3am.png"
    chromium(f"--screenshot={shot}", base)
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000


def test_watched_disagreements_name_who_reports_what() -> None:
    def granted(node_name: str, delete: float, code_hash: str) -> tuple[WatchedObject, ...]:
        reading = WalletReading(1.0, 0, (("ops", "delete", delete),), "w1", "ed25519", "pk")
        code = ContractReading("ACTIVE", 2, "0x5f", "evm", code_hash)
        return (
            WatchedObject(node_name, (), WatchKind.WALLET, LONG, "treasury", reading),
            WatchedObject(node_name, (), WatchKind.CONTRACT, LONG, "token", code),
        )

    watch = WatchStatus((*granted("a", 1.0, "c0de"), *granted("b", 1.0, "c0de"),
                         *granted("c", 0.0, "beef")))  # fmt: skip
    nodes = [node(name, chain()) for name in "abc"]
    items = page(snapshot(*nodes, watch=watch)).items
    assert items == [
        "warning treasury chain abababab…: the nodes disagree: ops delete yes: a, b; no: c "
        "LedgerWatchedWalletNodesDisagree",
        "warning token chain abababab…: the nodes disagree: code hash c0de: a, b; beef: c "
        "LedgerWatchedContractNodesDisagree",
    ]
