"""Generated node answers against the metric contract, in process.

Fleets of one to three nodes (``tests/support/scenarios.py``) answer a plain first cycle and a
generated second one: valid answers drawn from the node API document, and answers mutated
the ways nodes in the field go wrong (``tests/support/answers.py``). Each fleet runs through the
real poller, history, network view and writer, with an in-process engine in place of
libcurl (the lowest seam that still covers decoding, reading, history and rendering), and:

- nothing raises, and nothing is logged with a traceback;
- the exposition parses with client_python's text parser and its OpenMetrics parser, to the
  same samples, and passes ``promtool check metrics`` (many expositions per run);
- every sample is one the contract's oracle (``tests/support/contract_oracle.py``, written from
  docs/metrics.md alone) finds in the answers, with its value and its labels exactly as the node
  sent them, and every sample the oracle requires is there.

``LEDGER_TEST_EXAMPLES`` sets the examples per property (default in :data:`EXAMPLES`).
``tests/poll/test_node_answers_sockets.py`` runs the same fleets over real sockets.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, example, given
from hypothesis import settings as hypothesis_settings

from exporter import bounds
from tests.support import generation, nodeapi
from tests.support.answers import Answer, documents
from tests.support.contract_oracle import Key, check, labels_of
from tests.support.prometheus import Promtool
from tests.support.scenarios import (
    WALLET_ADDRESS,
    Fleet,
    MetricsCheck,
    fleet_of,
    fleets,
    request_key,
    run_in_process,
    samples,
)

#: Drawing answers from the document's schemas costs most of an example (a fleet's three
#: nodes, half a second on a quiet core): ``make fuzz`` runs thousands, ``make test`` these.
EXAMPLES = {"health": 250, "status": 150, "watch": 150, "fleet": 60, "valid": 40}
SUPPRESSED = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.large_base_example,
    HealthCheck.filter_too_much,
]


#: A JSON integer of more digits than Python converts (4300): valid JSON all the same.
LONG_INTEGER = b"1" * 5000
#: A nodeId one character over the default label length.
LONG_NODE_ID = b"k" * (bounds.DEFAULT_MAX_LABEL_VALUE_LENGTH + 1)
WALLET = request_key(["wallets", WALLET_ADDRESS], (("blockchainId", "c1"),))
#: Answers the properties found the exporter getting wrong: each is an explicit example of
#: the property that found it, and a row of test_defects_found_stay_fixed.
FOUND = {
    # issue 24: json.loads refuses integers past sys.get_int_max_str_digits(), so one such
    # number in any field made the whole answer invalid_json and every series vanished
    "long-integer-in-a-field": fleet_of(
        {
            request_key(["blockchains", "c1"]): Answer(
                b'{"blockHeight": 1000, "pendingTransactions": ' + LONG_INTEGER + b"}"
            )
        }
    ),
    # the same answer alone is JSON of the wrong shape: invalid_response, not invalid_json
    "long-integer-alone": fleet_of({WALLET: Answer(LONG_INTEGER)}),
    # issue 24: the first cycle's session at round 2, now at 1e300: the failed rounds were
    # kept one timestamp each ((now,) * rise: OverflowError, or gigabytes for a leap of
    # 1e9) and the count did not fit the packed counters; now they stop at 2**64 - 1
    "round-leap": fleet_of(
        {
            request_key(["blockchains", "c1"]): Answer(
                b'{"blockHeight": 1000, "voteSessions": {"s-1": {"round": 1e300,'
                b' "currentLeader": "k2"}}, "councilMembers": ["k1", "k2", "k3", "k4"]}'
            )
        }
    ),
    # the oracle's defect, not the exporter's: a nodeId over the label length is no label but
    # still the node's council key (up to the text cap); the oracle read it as unreadable and
    # expected the first cycle's id instead, failing a derandomized fleet only in CI
    "long-node-id": fleet_of(
        {
            request_key(["health"]): Answer(
                b'{"nodeVersion": "1.0.0", "nodeId": "' + LONG_NODE_ID + b'",'
                b' "network": {"peerId": "peer-0", "peerCount": 0}, "blockchains": ["c1"]}'
            ),
            request_key(["blockchains", "c1"]): Answer(
                b'{"blockHeight": 1000, "councilMembers": ["' + LONG_NODE_ID + b'", "k2", "k3"]}'
            ),
        }
    ),
}


def _key(name: str, **labels: str) -> Key:
    return name, labels_of(labels.items())


#: What each found case must export (value None: no sample).
FOUND_SAMPLES: dict[str, dict[Key, float | None]] = {
    "long-integer-in-a-field": {
        _key("ledger_blockchain_up", blockchain="c1", node="alpha"): 1.0,
        _key("ledger_blockchain_height", blockchain="c1", node="alpha"): 1000.0,
        _key("ledger_blockchain_pending_transactions", blockchain="c1", node="alpha"): None,
    },
    "long-integer-alone": {
        _key("ledger_wallet_up", blockchain="c1", node="alpha", wallet="treasury"): 0.0,
        _key(
            "ledger_node_scrape_errors_total",
            endpoint="wallet",
            node="alpha",
            reason="invalid_response",
        ): 1.0,  # this cycle's; the first cycle's wallet answer is a 404 (http_status)
    },
    "round-leap": {
        _key("ledger_blockchain_vote_round", blockchain="c1", node="alpha"): 1e300,
        _key("ledger_blockchain_vote_round_changes_total", blockchain="c1", node="alpha"): float(
            2**64 - 1
        ),
        _key(  # blamed on the leader of the first cycle's read
            "ledger_blockchain_leader_failed_rounds_total",
            blockchain="c1",
            leader="k1",
            node="alpha",
        ): float(2**64 - 1),
        _key(
            "ledger_blockchain_leader_failed_rounds_total",
            blockchain="c1",
            leader="k2",
            node="alpha",
        ): 0.0,
    },
    "long-node-id": {
        _key("ledger_network_blockchain_council_members_polled", blockchain="c1"): 1.0,
        _key("ledger_network_blockchain_council_members_up", blockchain="c1"): 1.0,
    },
}


@pytest.fixture(scope="module")
def metrics_check(promtool: Promtool) -> Iterator[MetricsCheck]:
    """Expositions checked by ``promtool check metrics`` a batch at a time."""
    checker = MetricsCheck(promtool)
    yield checker
    checker.flush()


def settings(name: str) -> hypothesis_settings:
    """The property's examples; no explain phase (it re-runs failures many times over to
    say which parts of a fleet vary: slow, and the oracle's message says more)."""
    return hypothesis_settings(
        generation.settings(EXAMPLES[name]),
        suppress_health_check=SUPPRESSED,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    )


def assert_keeps_the_contract(fleet: Fleet, metrics_check: MetricsCheck | None = None) -> None:
    """Run ``fleet`` and check its exposition against the oracle and both parsers."""
    outcome = run_in_process(fleet)
    assert not outcome.logged, outcome.logged
    text = samples(outcome.text)
    assert samples(outcome.openmetrics, openmetrics=True) == text
    problems = check(fleet.setup, outcome.cycles, text)
    assert not problems, "\n".join([*problems, "--- the fleet:", fleet.show()])
    if metrics_check is not None:
        metrics_check.add(outcome.text)


def test_health_answers(metrics_check: MetricsCheck) -> None:
    """One node's /health valid or mutated (its chains and watch list answered plainly)."""

    @settings("health")
    @given(fleets(parts=frozenset({"health"})))
    def health(fleet: Fleet) -> None:
        assert_keeps_the_contract(fleet, metrics_check)

    health()
    metrics_check.flush()


def test_chain_status_answers(metrics_check: MetricsCheck) -> None:
    """One node's chain status answers valid or mutated."""

    @settings("status")
    @given(fleets(parts=frozenset({"status"})))
    @example(FOUND["long-integer-in-a-field"])
    @example(FOUND["round-leap"])
    def status(fleet: Fleet) -> None:
        assert_keeps_the_contract(fleet, metrics_check)

    status()
    metrics_check.flush()


def test_watch_answers(metrics_check: MetricsCheck) -> None:
    """One node's contract, contract state and wallet answers valid or mutated."""

    @settings("watch")
    @given(fleets(parts=frozenset({"contract", "state", "wallet"})))
    @example(FOUND["long-integer-alone"])
    def watch(fleet: Fleet) -> None:
        assert_keeps_the_contract(fleet, metrics_check)

    watch()
    metrics_check.flush()


def test_fleet_answers(metrics_check: MetricsCheck) -> None:
    """Up to three nodes sharing chains, councils, peers and hashes, their /health, chain
    status and checkpoint block answers valid or mutated: the network series (the watch
    lists, answered plainly here, have their own property)."""

    @settings("fleet")
    @given(fleets(most_nodes=3, parts=frozenset({"health", "status", "block"})))
    @example(FOUND["long-node-id"])
    def fleet(fleet: Fleet) -> None:
        assert_keeps_the_contract(fleet, metrics_check)

    fleet()
    metrics_check.flush()


def test_valid_answers(metrics_check: MetricsCheck) -> None:
    """Answers the document allows, unmutated: every readable field gives its sample."""

    @settings("valid")
    @given(fleets(most_nodes=3, hows=("valid",)))
    def valid(fleet: Fleet) -> None:
        assert_keeps_the_contract(fleet, metrics_check)

    valid()
    metrics_check.flush()


@pytest.mark.parametrize("case", sorted(FOUND))
def test_defects_found_stay_fixed(case: str) -> None:
    """The answers the properties found mishandled: the contract kept, and the samples
    that show the fix."""
    assert_keeps_the_contract(FOUND[case])
    exported = samples(run_in_process(FOUND[case]).text)
    for key, value in FOUND_SAMPLES[case].items():
        assert exported.get(key) == value, key


#: The answers a node API document's schema describes, as the suites draw them.
SCHEMAS = ("Health", "BlockchainStatus", "Block", "Contract", "ContractState", "Wallet")


@pytest.mark.parametrize("name", SCHEMAS)
def test_drawn_answers_are_valid_per_the_document(name: str) -> None:
    """What the generator calls valid is valid (also the check that hypothesis-jsonschema
    works with the installed hypothesis: see pyproject.toml)."""
    validator = nodeapi.validator(name)

    @hypothesis_settings(generation.settings(50), suppress_health_check=SUPPRESSED)
    @given(documents(name))
    def valid(document: object) -> None:
        validator.validate(document)

    valid()
