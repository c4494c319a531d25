"""The contract's oracle (``tests/support/contract_oracle.py``) catches wrong consensus health.

The generated suites are only as strong as their oracle: here one fleet whose second cycle
escalates the first cycle's vote session under another leader, changes the council and
writes the same consensus settings another way, then each consensus-health sample the
exporter served is made wrong (one more) or taken away, and the oracle must say so.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.support.answers import Answer
from tests.support.contract_oracle import Key, check
from tests.support.scenarios import (
    BASE_CONSENSUS,
    BASE_SESSION,
    SESSION,
    Fleet,
    fleet_of,
    request_key,
    run_in_process,
    samples,
)

STATUS = {
    "blockHeight": 1000,
    "councilMembers": ["k1", "k2", "k3"],  # k4 left
    "voteSessions": {SESSION: {**BASE_SESSION, "round": 5, "currentLeader": "k2"}},
    "consensus": {**BASE_CONSENSUS, "minMembers": "3", "consensusTimeout": "0.5m"},
    "keyType": "ed25519",
}
CASE: Fleet = fleet_of({request_key(["blockchains", "c1"]): Answer(json.dumps(STATUS).encode())})
FAMILIES = (
    "ledger_blockchain_vote_session_age_seconds",
    "ledger_blockchain_vote_consensus_required",
    "ledger_blockchain_vote_round_changes_total",
    "ledger_blockchain_leader_failed_rounds_total",
    "ledger_blockchain_council_changes_total",
    "ledger_network_blockchain_consensus_views",
    "ledger_blockchain_consensus_agrees",
    "ledger_network_blockchain_council_members_polled",
    "ledger_network_blockchain_council_members_up",
)


@pytest.fixture(scope="module")
def exported() -> dict[Key, float]:
    return samples(run_in_process(CASE).text)


def test_the_case_keeps_the_contract(exported: dict[Key, float]) -> None:
    assert check(CASE.setup, run_in_process(CASE).cycles, exported) == []
    by_family = {name: value for (name, labels), value in exported.items() if name in FAMILIES}
    assert by_family["ledger_blockchain_vote_session_age_seconds"] == 15.0  # seen a cycle ago
    assert by_family["ledger_blockchain_vote_round_changes_total"] == 3.0  # round 2 -> 5
    assert by_family["ledger_blockchain_council_changes_total"] == 1.0
    assert by_family["ledger_network_blockchain_consensus_views"] == 1.0  # "0.5m" is 30 s


@pytest.mark.parametrize("family", FAMILIES)
def test_a_wrong_or_missing_sample_is_caught(exported: dict[Key, float], family: str) -> None:
    cycles = run_in_process(CASE).cycles
    keys = [key for key in exported if key[0] == family]
    assert keys, f"the case exports no {family}"
    for key in keys:
        wrong = {**exported, key: exported[key] + 1}
        assert check(CASE.setup, cycles, wrong), f"{key} one more passes"
        missing = {k: v for k, v in exported.items() if k != key}
        assert check(CASE.setup, cycles, missing), f"{key} taken away passes"


def test_a_sample_the_reference_does_not_document_is_caught(exported: dict[Key, float]) -> None:
    """The oracle holds the exposition to docs/metrics.md's families and labels: an exporter's
    own family (not governed by the answers) the page does not list, or one more label."""
    cycles = run_in_process(CASE).cycles
    unknown = {**exported, ("ledger_exporter_scrapes_total", ()): 1.0}
    assert "ledger_exporter_scrapes_total is not in docs/metrics.md" in check(
        CASE.setup, cycles, unknown
    )
    (name, labels), value = next(
        (key, value)
        for key, value in exported.items()
        if key[0] == "ledger_node_scrape_errors_total"
    )
    extra = {**exported, (name, (*labels, ("zone", "a"))): value}
    assert f"{name} has labels ['zone'] docs/metrics.md does not list" in check(
        CASE.setup, cycles, extra
    )


def test_request_phases_only_of_kinds_asked_and_never_tls_over_http(
    exported: dict[Key, float],
) -> None:
    """libcurl's timings (ledger_node_request_duration_seconds, the sockets suite's) are held
    to docs/metrics.md: an up node's phases of the kinds of request it was asked, no ``tls``
    over plain http, and its /health's once it is timed at all."""
    cycles = run_in_process(CASE).cycles
    family = "ledger_node_request_duration_seconds"
    (_, node), _ = next(item for item in exported.items() if item[0][0] == "ledger_node_up")

    def timed(*rows: tuple[str, str]) -> dict[Key, float]:
        added = {
            (family, tuple(sorted((*node, ("endpoint", kind), ("phase", phase))))): 0.001
            for kind, phase in rows
        }
        return {**exported, **added}

    plain = ("resolve", "connect", "processing", "transfer")
    asked = [(kind, phase) for kind in ("health", "blockchain") for phase in plain]
    assert check(CASE.setup, cycles, timed(*asked)) == []
    for wrong in (("health", "tls"), ("health", "queueing")):
        assert check(CASE.setup, cycles, timed(*asked, wrong)), f"{wrong} passes"
    wallet = timed(*asked, ("wallet", "connect"))
    assert check(CASE.setup, cycles, wallet) == []
    unasked = [  # the same cycles had the wallet not been asked for
        replace(
            cycle,
            requests={
                n: [r for r in rs if r[0][0] != "wallets"] for n, rs in cycle.requests.items()
            },
        )
        for cycle in cycles
    ]
    assert check(CASE.setup, unasked, wallet), "a kind never asked passes"
    without_health = [(kind, phase) for kind, phase in asked if kind != "health"]
    assert check(CASE.setup, cycles, timed(*without_health)), "no /health timing passes"
