"""The exporter polling a simulated network: every metric valued as the simulator served it,
and following faults switched on and off (issue 3).

In-process on purpose: ``Poller.run_cycle()`` drives one cycle at a time, and one hand-stepped
clock is shared by the simulator and the exporter and frozen while a cycle runs. So what the
simulator served over real HTTP is exactly ``network.health()`` / ``network.blockchain()`` at
that moment, and every value (heights, queues, timestamps, the exporter's own clock readings)
compares exactly, with no sleeps. Each cycle's whole exposition is checked against a reference
model built from the simulator's answers; the real process behind a real Prometheus is
``tests/e2e/test_prometheus.py``'s job.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.bounds import DropKind
from exporter.build import this_build
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.expose import metrics
from exporter.model.snapshot import CycleStage
from exporter.poll.cycle import Poller
from exporter.web.exposition import Exposition
from ledger_simulator import SimulatedNetwork
from tests.support import metrics_reference
from tests.support.clock import Clock
from tests.support.http import fetch, get_json

INTERVAL = 2.0  # block interval of the simulated chains
TIMEOUT = 1.0  # the exporter's scrape_timeout; a slow fault answers after SLOW
SLOW = 4.0
START = 1_700_000_000.0
SEED = 0  # at START + INTERVAL / 4 some chains have an open vote session and some do not

ENDPOINTS = ("health", "blockchain")  # the contract's endpoint and reason labels
BLOCK = "block"  # the checkpoint block's endpoint label, counted from a node's first request
DEPTH = 5  # network_checks.checkpoint_depth, the default
REASONS = (
    "timeout",
    "connection",
    "http_status",
    "invalid_json",
    "invalid_response",
    "too_large",
    "tls",
    "certificate",
    "identity_mismatch",
)

Key = tuple[str, frozenset[tuple[str, str]]]
Samples = dict[Key, Any]  # values are floats, or pytest.approx in expectations


def key(name: str, **labels: str) -> Key:
    return name, frozenset(labels.items())


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get(key(name, **labels))


def parse(exposition: bytes) -> Samples:
    """The ``ledger_*`` samples of a text exposition."""
    return {
        key(sample.name, **sample.labels): sample.value
        for family in text_string_to_metric_families(exposition.decode())
        for sample in family.samples
        if sample.name.startswith("ledger_")
    }


def go_seconds(text: str) -> float:
    """Seconds of the simulator's Go durations (``45s``, ``1m45s``, ``2h0m0s``)."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", text)
    assert match and text, f"unexpected duration {text!r}"
    hours, minutes, seconds = (float(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


#: How the simulator's well-formed values read, by the way docs/metrics.md says a field is
#: read ("Read from" lines): the documented contract, not the exporter's field table.
SERVED_AS: dict[str, Callable[[Any], Any]] = {
    "a count": float,
    "a number": float,
    "a flag": float,
    "a duration": go_seconds,
    "a timestamp": lambda value: pytest.approx(datetime.fromisoformat(value).timestamp(), abs=1e-3),
    "the length of a list": len,
    "the number of members of an object": len,
}


def chain_values(doc: dict[str, Any]) -> dict[str, Any]:
    """Expected plain gauges (labels node, blockchain) of one served chain document: each
    family the metric reference says is read from one field of the chain status, from that
    field of ``doc`` (so a new gauge the simulator serves is expected with no edit here)."""
    sessions = doc["voteSessions"]
    expected: dict[str, Any] = {"ledger_blockchain_up": 1.0}
    for family, (path, how) in metrics_reference.sources("GET /blockchains/{id}").items():
        value: Any = doc
        for key in path.split("."):
            value = value[key]
        expected[family] = SERVED_AS[how](value)
    if sessions:
        expected["ledger_blockchain_vote_round"] = max(s["round"] for s in sessions.values())
        required = max(s["consensusRequired"] for s in sessions.values())
        expected["ledger_blockchain_vote_consensus_required"] = required
    return expected


Pair = tuple[str, str]  # node, chain
Seen = tuple[float, int, str]  # a session's first sighting, last round and leader


class Rig:
    """A simulated network, a poller over it, and a reference model of what it must export."""

    def __init__(self, layout: str) -> None:
        self.clock = Clock(START)
        self.network = SimulatedNetwork(3, 2, INTERVAL, SEED, layout=layout, clock=self.clock)
        self.network.start()
        nodes = tuple(NodeConfig(name, url) for name, url in self.network.node_urls.items())
        config = Config(nodes=nodes, scrape_interval=2 * TIMEOUT, scrape_timeout=TIMEOUT)
        self.poller = Poller(config, lambda snapshot: None, self.clock, wall=self.clock)
        self.errors: Counter[tuple[str, str, str]] = Counter()
        self.last_success: dict[str, float] = {}
        self.first_seen: dict[tuple[str, str], tuple[float, float]] = {}  # height, when
        self.checkpoints: dict[str, int] = {}  # chain -> height compared this cycle
        self.block_heights: dict[str, dict[str, int]] = {}  # node -> chain -> block asked
        self.block_counting: set[str] = set()  # nodes whose block counters exist
        self.blocks_read: set[Pair] = set()  # a checkpoint block read: reorgs counted from 0
        self.heads: dict[str, list[tuple[float, float]]] = {}  # chain -> (height, first seen)
        # consensus health, followed the plain way (issue 21)
        self.sessions: dict[Pair, dict[str, Seen]] = {}  # open at the last read
        self.paired: set[Pair] = set()  # read last cycle: rounds compare with this one
        self.rounds: Counter[Pair] = Counter()
        self.failed: dict[Pair, Counter[str]] = defaultdict(Counter)
        self.councils: dict[Pair, frozenset[str]] = {}
        self.council_changes: Counter[Pair] = Counter()
        self.node_ids: dict[str, str] = {}  # from each node's last successful read
        self.clock.advance(INTERVAL / 4)

    def stop(self) -> None:
        self.poller.stop()
        self.network.stop()

    def tracked(self, node: str) -> list[str]:
        chains: list[str] = self.network.health(node)["blockchains"]
        return chains

    def cycle(
        self,
        down: Mapping[str, str] | None = None,
        chains_down: Mapping[tuple[str, str], str] | None = None,
    ) -> Samples:
        """One polling cycle at the frozen clock; asserts the whole exposition equals the
        model: the simulator's answers, except ``down`` (node -> reason of its /health
        error) and ``chains_down`` ((node, chain) -> reason of that chain's error). Returns
        the samples, less the wall-time durations (checked here for presence only)."""
        actual = parse(Exposition(self.poller.run_cycle()).body(False, False))
        expected = self.expect(down or {}, chains_down or {})
        phases = {
            labels: actual.pop((name, labels))
            for name, labels in list(actual)
            if name == "ledger_node_request_duration_seconds"
        }
        durations = {
            labels: actual.pop((name, labels))
            for name, labels in list(actual)
            if name.endswith("_duration_seconds")
        }
        node_labels = {frozenset({("node", node)}) for node in self.network.node_names}
        assert set(durations) == {frozenset(), *node_labels}
        assert all(seconds >= 0 for seconds in durations.values())
        # the last request's phases (its timings): only for the nodes up, never negative
        phased = {dict(labels)["node"] for labels in phases}
        assert phased == set(self.network.node_names) - set(down or {}), phased
        assert all(seconds >= 0 for seconds in phases.values())
        assert actual == expected
        return actual

    def expect(
        self, down: Mapping[str, str], chains_down: Mapping[tuple[str, str], str]
    ) -> Samples:
        now = self.clock.time
        expected: Samples = {
            key("ledger_exporter_build_info", **dict(this_build().labels())): 1.0,
            key("ledger_exporter_config_last_reload_successful"): 1.0,
            key("ledger_exporter_cycle_timeout_seconds"): TIMEOUT,  # the config's scrape_timeout
            key("ledger_exporter_last_successful_cycle_timestamp_seconds"): now,
            # 3 scrape_interval (2 TIMEOUT) plus one scrape_timeout
            key("ledger_exporter_stale_after_seconds"): 3 * 2 * TIMEOUT + TIMEOUT,
            **{
                key("ledger_exporter_cycle_failures_total", stage=stage.value): 0.0
                for stage in CycleStage
            },
        }
        docs: dict[tuple[str, str], dict[str, Any]] = {}
        blocks: dict[tuple[str, str], str] = {}
        for node in self.network.node_names:
            if node in down:
                self.errors[node, "health", down[node]] += 1
                expected[key("ledger_node_up", node=node)] = 0.0
                self.paired -= {pair for pair in self.paired if pair[0] == node}
            else:
                self.last_success[node] = now
                self.node_ids[node] = self.network.health(node)["nodeId"]
                expected.update(self.node_samples(node))
                for chain in self.tracked(node):
                    asked = chain in self.block_heights.get(node, {})
                    self.block_counting |= {node} if asked else set()
                    if (node, chain) in chains_down:  # the block request meets the same fault
                        reason = chains_down[node, chain]
                        self.errors[node, "blockchain", reason] += 1
                        self.errors[node, BLOCK, reason] += asked
                        expected[key("ledger_blockchain_up", node=node, blockchain=chain)] = 0.0
                        self.paired.discard((node, chain))
                    else:
                        docs[node, chain] = self.network.blockchain(node, chain)
                        if asked:
                            blocks[node, chain] = self.block_hash(node, chain)
                            self.blocks_read.add((node, chain))
            expected.update(self.bookkeeping_samples(node))
        expected.update(self.chain_samples(docs, now))
        up = [node for node in self.network.node_names if node not in down]
        expected.update(self.network_samples(up, docs, blocks))
        self.plan_blocks(docs)
        return expected

    def block_hash(self, node: str, chain: str) -> str:
        """The hash the node serves for the checkpoint block of ``chain``."""
        url = f"{self.network.node_urls[node]}blockchains/{chain}/blocks"
        return str(get_json(url, params={"height": self.checkpoints[chain]})["hash"])

    def network_samples(
        self, up: list[str], docs: dict[tuple[str, str], dict[str, Any]], blocks: dict[Any, str]
    ) -> Samples:
        """The cross-node series, computed the plain way from what the nodes served."""
        expected: Samples = {}
        for chain in sorted({chain for _, chain in docs}):
            councils = {
                n: frozenset(d["councilMembers"]) for (n, c), d in docs.items() if c == chain
            }
            hashes = {n: h for (n, c), h in blocks.items() if c == chain}
            expected.update(majority_samples("council", chain, councils))
            expected.update(self.members_samples(chain, councils))
            configs = {
                n: json.dumps([d["consensus"], d["keyType"], d["features"]], sort_keys=True)
                for (n, c), d in docs.items()
                if c == chain
            }
            expected.update(majority_samples("consensus", chain, configs))
            if hashes:
                expected.update(majority_samples("checkpoint", chain, hashes))
                checkpoint = key("ledger_network_blockchain_checkpoint_height", blockchain=chain)
                expected[checkpoint] = self.checkpoints[chain]
        health = {node: self.network.health(node)["network"] for node in up}
        linked = {
            (a, b)
            for a in up
            for b in up
            if a != b
            and (
                health[b]["peerId"] in health[a]["networkPeers"]
                or health[a]["peerId"] in health[b]["networkPeers"]
            )
        }
        groups = {node: {node} for node in up}
        for a, b in linked:
            merged = groups[a] | groups[b]
            for node in merged:
                groups[node] = merged
        if up:
            groups_seen = {frozenset(group) for group in groups.values()}
            expected[key("ledger_network_peer_partitions")] = len(groups_seen)
            largest = max(len(group) for group in groups_seen)
            expected[key("ledger_network_peer_largest_partition_nodes")] = largest
        # chains one up node alone lists (when two or more list chains): none planned here
        listed = {node: set(self.network.health(node)["blockchains"]) for node in up}
        listers = [node for node in up if listed[node]]
        for node in up:
            peers = sum((node, other) in linked for other in up)
            expected[key("ledger_node_polled_peers", node=node)] = peers
            alone = {
                chain
                for chain in listed[node]
                if len(listers) >= 2 and not any(chain in listed[o] for o in up if o != node)
            }
            expected[key("ledger_node_unexpected_blockchains", node=node)] = len(alone)
        return expected

    def members_samples(self, chain: str, councils: Mapping[str, frozenset[str]]) -> Samples:
        """The majority council's members that are a polled node (by the id it reported when
        last up), and those whose node read the chain now."""
        counts = Counter(councils.values())
        winner = next((v for v, n in counts.items() if 2 * n > len(councils)), None)
        if winner is None:
            return {}
        polled = winner & set(self.node_ids.values())
        up = polled & {self.node_ids[node] for node in councils}
        return {
            key("ledger_network_blockchain_council_members_polled", blockchain=chain): len(polled),
            key("ledger_network_blockchain_council_members_up", blockchain=chain): len(up),
        }

    def consensus_samples(self, pair: Pair, doc: dict[str, Any], now: float) -> Samples:
        """The series followed across cycles: each open session's first sighting, the rise of
        its round since the last read (against the leader it had then), council changes."""
        before, now_open = self.sessions.get(pair, {}), {}
        for sid, session in doc["voteSessions"].items():
            seen = before.get(sid)
            if seen is not None and pair in self.paired and session["round"] > seen[1]:
                self.rounds[pair] += session["round"] - seen[1]
                self.failed[pair][seen[2]] += session["round"] - seen[1]
            first = now if seen is None else seen[0]
            now_open[sid] = (first, session["round"], session["currentLeader"])
        self.sessions[pair], council = now_open, frozenset(doc["councilMembers"])
        self.paired.add(pair)
        if pair in self.councils and self.councils[pair] != council:
            self.council_changes[pair] += 1
        self.councils[pair] = council
        labels = {"node": pair[0], "blockchain": pair[1]}
        expected: Samples = {
            key("ledger_blockchain_vote_round_changes_total", **labels): self.rounds[pair],
            key("ledger_blockchain_council_changes_total", **labels): self.council_changes[pair],
        }
        if now_open:
            oldest = min(first for first, _, _ in now_open.values())
            expected[key("ledger_blockchain_vote_session_age_seconds", **labels)] = now - oldest
        failed = self.failed[pair]
        for leader in council | {leader for leader, count in failed.items() if count}:
            leader_key = key(
                "ledger_blockchain_leader_failed_rounds_total", **labels, leader=leader
            )
            expected[leader_key] = failed[leader]
        return expected

    def plan_blocks(self, docs: dict[tuple[str, str], dict[str, Any]]) -> None:
        """Next cycle's checkpoints and who is asked: per chain, the highest height that more
        than half of the not-syncing readers have reached, less DEPTH (never below 0); only
        nodes at or above it are asked, so a stalled node gets no agreement sample."""
        reached: dict[str, list[int]] = {}
        for (_, chain), doc in docs.items():
            if not doc["syncing"]:
                reached.setdefault(chain, []).append(doc["blockHeight"])
        self.checkpoints = {}
        for chain, chain_heights in reached.items():
            majority = max(
                height
                for height in chain_heights
                if 2 * sum(other >= height for other in chain_heights) > len(chain_heights)
            )
            self.checkpoints[chain] = max(0, majority - DEPTH)
        self.block_heights = {}
        for (node, chain), doc in docs.items():
            if chain in self.checkpoints and doc["blockHeight"] >= self.checkpoints[chain]:
                self.block_heights.setdefault(node, {})[chain] = self.checkpoints[chain]

    def bookkeeping_samples(self, node: str) -> Samples:
        """Every error counter of the node (0 until counted), its dropped-values counters (the
        simulator stays within every bound), its Retry-After counter (the simulator sends
        none) and its last success, if any."""
        expected: Samples = {
            key("ledger_node_scrape_errors_total", node=node, endpoint=e, reason=r): (
                self.errors[node, e, r]
            )
            for e in (*ENDPOINTS, *([BLOCK] if node in self.block_counting else []))
            for r in REASONS
        }
        for kind in DropKind:
            expected[key("ledger_exporter_dropped_values_total", node=node, kind=kind.value)] = 0
        expected[key("ledger_node_retry_after_total", node=node)] = 0
        if node in self.last_success:
            last = self.last_success[node]
            expected[key("ledger_node_last_success_timestamp_seconds", node=node)] = last
        return expected

    def node_samples(self, node: str) -> Samples:
        health = self.network.health(node)
        identity = {
            "node_version": health["nodeVersion"],
            "node_id": health["nodeId"],
            "peer_id": health["network"]["peerId"],
        }
        return {
            key("ledger_node_up", node=node): 1.0,
            key("ledger_node_info", node=node, **identity): 1.0,
            key("ledger_node_peers", node=node): health["network"]["peerCount"],
            key("ledger_node_blockchains", node=node): len(health["blockchains"]),
        }

    def chain_samples(self, docs: dict[tuple[str, str], dict[str, Any]], now: float) -> Samples:
        # the head: the highest height a strict majority of the not-syncing readers reached
        # (of all of them when every one is syncing)
        readers: dict[str, tuple[list[float], list[float]]] = {}
        for (_, chain), doc in docs.items():
            steady, syncing = readers.setdefault(chain, ([], []))
            (syncing if doc["syncing"] is True else steady).append(doc["blockHeight"])
        highest = {
            chain: sorted(steady or syncing, reverse=True)[len(steady or syncing) // 2]
            for chain, (steady, syncing) in readers.items()
        }
        for chain, top in highest.items():  # the head's rises, the plain way
            rises = self.heads.setdefault(chain, [])
            if not rises or top > rises[-1][0]:
                rises.append((top, now))
        expected: Samples = {}
        for (node, chain), doc in docs.items():
            labels = {"node": node, "blockchain": chain}
            height = doc["blockHeight"]
            # seconds behind: since the head first passed the node's height (0 at the head)
            passed = (
                next(at for top, at in self.heads[chain] if top > height)
                if height < highest[chain]
                else now
            )
            expected[key("ledger_blockchain_behind_seconds", **labels)] = now - passed
            if (node, chain) in self.blocks_read:
                expected[key("ledger_blockchain_reorgs_total", **labels)] = 0.0
            if self.first_seen.get((node, chain), (None,))[0] != height:
                self.first_seen[node, chain] = (height, now)
            for name, number in chain_values(doc).items():
                expected[key(name, **labels)] = number
            lag = max(0.0, highest[chain] - height)
            expected[key("ledger_blockchain_blocks_behind", **labels)] = lag
            changed = self.first_seen[node, chain][1]
            expected[key("ledger_blockchain_height_last_change_timestamp_seconds", **labels)] = (
                changed
            )
            info = {"consensus_type": doc["consensus"]["consensusType"], "key_type": doc["keyType"]}
            expected[key("ledger_blockchain_consensus_info", **labels, **info)] = 1.0
            for feature, enabled in doc["features"].items():
                expected[key("ledger_blockchain_feature_enabled", **labels, feature=feature)] = (
                    float(enabled)
                )
            expected.update(self.consensus_samples((node, chain), doc, now))
        return expected


def majority_samples(kind: str, chain: str, values: Mapping[str, object]) -> Samples:
    """Distinct values among the nodes and, per node, agreement with a strict majority."""
    counts = Counter(values.values())
    winner = next((v for v, n in counts.items() if 2 * n > len(values)), None)
    distinct = {
        "council": "council_views",
        "checkpoint": "checkpoint_hashes",
        "consensus": "consensus_views",
    }[kind]
    expected: Samples = {
        key(f"ledger_network_blockchain_{distinct}", blockchain=chain): len(counts)
    }
    for node, value_ in values.items():
        agrees = key(f"ledger_blockchain_{kind}_agrees", node=node, blockchain=chain)
        expected[agrees] = float(value_ == winner)
    return expected


Switch = Callable[..., None]


def via_api(rig: Rig, node: str, fault: str, enabled: bool = True, **extra: Any) -> None:
    rig.network.set_fault(node, fault, enabled, **extra)


def via_admin(rig: Rig, node: str, fault: str, enabled: bool = True, **extra: Any) -> None:
    """POST /-/sim/faults, as an operator would with curl."""
    body = {"node": node, "fault": fault, "enabled": enabled, **extra}
    answer = fetch(rig.network.admin_url + "faults", method="POST", json=body)
    assert answer.status == 200, answer.text
    listed = answer.json()["faults"]
    in_force = {(f["node"], f["fault"], f["chain"]) for f in listed}
    assert ((node, fault, extra.get("chain")) in in_force) == enabled, listed


@pytest.fixture
def make_rig() -> Iterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def make(layout: str = "paths") -> Rig:
        rigs.append(Rig(layout))
        return rigs[-1]

    yield make
    for rig in rigs:
        rig.stop()


@pytest.fixture
def rig(make_rig: Callable[..., Rig]) -> Rig:
    return make_rig()


def series_of(samples: Samples, node: str, prefix: str = "ledger_blockchain_") -> set[str]:
    return {
        name for name, labels in samples if name.startswith(prefix) and ("node", node) in labels
    }


def heights(samples: Samples) -> dict[tuple[str, str], float]:
    return {
        (dict(labels)["node"], dict(labels)["blockchain"]): number
        for (name, labels), number in samples.items()
        if name == "ledger_blockchain_height"
    }


#: The rig's config has no watch list, so no watch-list series (tests/model/test_watch_readings.py).
WATCH_NAMES = {spec.name for spec in metrics.WATCH_FAMILIES}
#: Nor maintenance entries, so no maintenance series (tests/e2e/test_maintenance.py).
MAINTENANCE_NAMES = {spec.name for spec in metrics.MAINTENANCE_FAMILIES}


def test_every_metric_appears_with_the_values_the_simulator_served(rig: Rig) -> None:
    sessions = {
        (node, chain): len(rig.network.blockchain(node, chain)["voteSessions"])
        for node in rig.network.node_names
        for chain in rig.tracked(node)
    }
    # the seed and moment are chosen so that vote_round is both present and absent
    assert 0 in sessions.values() and any(sessions.values()), sessions
    rig.cycle()  # the first cycle plans the checkpoint whose blocks the second compares
    samples = rig.cycle()
    assert {name for name, _ in samples} | {
        "ledger_node_scrape_duration_seconds",
        "ledger_exporter_cycle_duration_seconds",
        "ledger_node_request_duration_seconds",  # timings: checked by the rig's cycle
        # the Exporter sets it when it loads a config; a poll's snapshot has none
        "ledger_exporter_config_last_reload_success_timestamp_seconds",
        # the simulator here serves http: tests/e2e/test_transport.py has them over https
        "ledger_node_tls_cert_expiry_timestamp_seconds",
        "ledger_node_tls_info",
        # only with --state.file, which the rig has not: tests/e2e/test_state_file_failures.py
        "ledger_exporter_state_file_write_failures_total",
    } == {
        spec.name for spec in metrics.ALL if spec not in metrics.PROBE_ONLY
    } - WATCH_NAMES - MAINTENANCE_NAMES
    for (node, chain), count in sessions.items():
        has_round = value(samples, "ledger_blockchain_vote_round", node=node, blockchain=chain)
        assert (has_round is not None) == (count > 0)
    assert len(heights(samples)) == len(sessions) == 5  # chain 1 everywhere, chain 2 on two
    for step in (INTERVAL / 3, INTERVAL, 2.5 * INTERVAL):  # heights stay, move, jump
        rig.clock.advance(step)
        rig.cycle()


@pytest.mark.parametrize(("layout", "switch"), [("paths", via_admin), ("ports", via_api)])
def test_a_node_down_is_up_0_without_chain_series_and_comes_back(
    make_rig: Callable[..., Rig], layout: str, switch: Switch
) -> None:
    rig = make_rig(layout)
    before = rig.cycle()
    assert series_of(before, "node-2")
    switch(rig, "node-2", "down")
    rig.clock.advance(INTERVAL)
    samples = rig.cycle(down={"node-2": "connection"})
    assert value(samples, "ledger_node_up", node="node-2") == 0
    assert series_of(samples, "node-2") == set()
    assert series_of(samples, "node-2", "ledger_node_") == {
        "ledger_node_up",
        "ledger_node_scrape_errors_total",
        "ledger_node_last_success_timestamp_seconds",
        "ledger_node_retry_after_total",
    }
    errors = {"node": "node-2", "endpoint": "health", "reason": "connection"}
    assert value(samples, "ledger_node_scrape_errors_total", **errors) == 1
    assert value(samples, "ledger_node_up", node="node-1") == 1
    switch(rig, "node-2", "down", enabled=False)
    rig.clock.advance(INTERVAL)
    samples = rig.cycle()
    assert value(samples, "ledger_node_up", node="node-2") == 1
    assert series_of(samples, "node-2") == series_of(before, "node-2")


def test_a_stalled_node_keeps_its_height_and_last_change_while_the_others_move(rig: Rig) -> None:
    before = rig.cycle()
    changed = "ledger_blockchain_height_last_change_timestamp_seconds"
    stalled = {pair for pair in heights(before) if pair[0] == "node-1"}
    via_api(rig, "node-1", "stall")
    for _ in range(2):
        rig.clock.advance(1.5 * INTERVAL)
        samples = rig.cycle()
        for pair, height in heights(samples).items():
            labels = {"node": pair[0], "blockchain": pair[1]}
            if pair in stalled:
                assert height == heights(before)[pair]
                assert value(samples, changed, **labels) == value(before, changed, **labels)
            else:
                assert height > heights(before)[pair]
                assert value(samples, changed, **labels) == rig.clock.time
    via_api(rig, "node-1", "stall", enabled=False)
    rig.clock.advance(INTERVAL / 4)
    samples = rig.cycle()  # it jumps to the height it would have had
    for pair in stalled:
        labels = {"node": pair[0], "blockchain": pair[1]}
        assert heights(samples)[pair] >= heights(before)[pair] + 3
        assert value(samples, changed, **labels) == rig.clock.time


def test_peers_lost_is_zero_peers_on_the_node_and_its_chains(rig: Rig) -> None:
    before = rig.cycle()
    chains = rig.tracked("node-1")
    assert value(before, "ledger_node_peers", node="node-1")  # the test would prove nothing
    assert any(
        value(before, "ledger_blockchain_peers", node="node-1", blockchain=c) for c in chains
    )
    via_admin(rig, "node-1", "peers_lost")
    rig.clock.advance(INTERVAL / 2)
    samples = rig.cycle()
    assert value(samples, "ledger_node_peers", node="node-1") == 0
    for chain in chains:
        assert value(samples, "ledger_blockchain_peers", node="node-1", blockchain=chain) == 0
        assert value(samples, "ledger_blockchain_up", node="node-1", blockchain=chain) == 1
    via_admin(rig, "node-1", "peers_lost", enabled=False)
    assert rig.cycle()[key("ledger_node_peers", node="node-1")] > 0


def test_syncing_node_wide_and_per_chain(rig: Rig) -> None:
    rig.cycle()
    chain = rig.network.chain_ids[1]
    assert chain in rig.tracked("node-1")
    via_admin(rig, "node-3", "syncing")
    via_api(rig, "node-1", "syncing", chain=chain)
    samples = rig.cycle()
    syncing = {
        pair: value(samples, "ledger_blockchain_syncing", node=pair[0], blockchain=pair[1])
        for pair in heights(samples)
    }
    expected = {pair: float(pair[0] == "node-3" or pair == ("node-1", chain)) for pair in syncing}
    assert syncing == expected and 1 in syncing.values() and 0 in syncing.values()
    via_admin(rig, "node-3", "syncing", enabled=False)
    via_api(rig, "node-1", "syncing", enabled=False, chain=chain)
    samples = rig.cycle()
    assert {n for (name, _), n in samples.items() if name == "ledger_blockchain_syncing"} == {0}


TRANSPORT_FAULTS = [
    ("down", "connection"),
    ("http_500", "http_status"),
    ("malformed_json", "invalid_json"),
    ("slow", "timeout"),
]


@pytest.mark.parametrize(("fault", "reason"), TRANSPORT_FAULTS)
def test_a_node_wide_transport_fault_downs_only_that_node(
    rig: Rig, fault: str, reason: str
) -> None:
    rig.cycle()
    via_api(rig, "node-3", fault, delay_seconds=SLOW if fault == "slow" else 0.0)
    rig.clock.advance(INTERVAL)
    samples = rig.cycle(down={"node-3": reason})
    assert [value(samples, "ledger_node_up", node=n) for n in rig.network.node_names] == [1, 1, 0]
    labels = {"node": "node-3", "endpoint": "health", "reason": reason}
    assert value(samples, "ledger_node_scrape_errors_total", **labels) == 1
    via_api(rig, "node-3", fault, enabled=False)
    rig.clock.advance(INTERVAL)
    assert value(rig.cycle(), "ledger_node_up", node="node-3") == 1


@pytest.mark.parametrize(("fault", "reason"), TRANSPORT_FAULTS)
def test_a_per_chain_transport_fault_downs_only_that_chain(
    rig: Rig, fault: str, reason: str
) -> None:
    rig.cycle()
    node = next(n for n in rig.network.node_names if len(rig.tracked(n)) == 2)
    broken, fine = rig.tracked(node)[1], rig.tracked(node)[0]
    switch = via_admin if fault == "http_500" else via_api
    switch(rig, node, fault, chain=broken, delay_seconds=SLOW if fault == "slow" else 0.0)
    rig.clock.advance(INTERVAL)
    samples = rig.cycle(chains_down={(node, broken): reason})
    assert value(samples, "ledger_node_up", node=node) == 1
    assert value(samples, "ledger_blockchain_up", node=node, blockchain=broken) == 0
    assert value(samples, "ledger_blockchain_up", node=node, blockchain=fine) == 1
    assert value(samples, "ledger_blockchain_height", node=node, blockchain=broken) is None
    assert value(samples, "ledger_blockchain_height", node=node, blockchain=fine) is not None
    only_up = {
        n for n, labels in samples if ("blockchain", broken) in labels and ("node", node) in labels
    }
    assert only_up == {"ledger_blockchain_up"}
    labels = {"node": node, "endpoint": "blockchain", "reason": reason}
    assert value(samples, "ledger_node_scrape_errors_total", **labels) == 1
    switch(rig, node, fault, enabled=False, chain=broken)
    rig.clock.advance(INTERVAL)
    assert value(rig.cycle(), "ledger_blockchain_up", node=node, blockchain=broken) == 1


def test_a_stalled_node_cannot_hide_a_fork_among_the_others(rig: Rig) -> None:
    """Issue 19: node-1 stalls, and later node-3 forks. The checkpoint follows the height a
    majority reached, not the stalled node's, so the fork shows: two hashes, no agreement
    sample for the stalled node (not asked for a block it cannot have), and with the two
    readable nodes split 1-1, no majority for either of them."""
    chain = rig.network.chain_ids[0]  # every node tracks it
    rig.cycle()
    via_admin(rig, "node-1", "stall")
    for _ in range(10):  # node-1 falls 20 blocks behind
        rig.clock.advance(INTERVAL)
        rig.cycle()
    via_admin(rig, "node-3", "fork", chain=chain)
    for _ in range(8):  # the fork sinks below the checkpoint depth
        rig.clock.advance(INTERVAL)
        samples = rig.cycle()
    checkpoint = value(samples, "ledger_network_blockchain_checkpoint_height", blockchain=chain)
    stalled = value(samples, "ledger_blockchain_height", node="node-1", blockchain=chain)
    assert checkpoint is not None and stalled is not None and checkpoint > stalled
    assert value(samples, "ledger_network_blockchain_checkpoint_hashes", blockchain=chain) == 2
    agrees = {
        node: value(samples, "ledger_blockchain_checkpoint_agrees", node=node, blockchain=chain)
        for node in rig.network.node_names
    }
    assert agrees == {"node-1": None, "node-2": 0.0, "node-3": 0.0}
