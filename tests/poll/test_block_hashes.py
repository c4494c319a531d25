"""The checkpoint hashes kept per node and chain, and the reorganisations counted from them
(``ledger_blockchain_reorgs_total``, issue 37): one count per rewritten height, bounded
memory, and the turn of the heights asked again."""

from __future__ import annotations

from exporter.config.nodes import NodeConfig
from exporter.model.readings import read_chain, read_health
from exporter.model.reasons import Reason
from exporter.poll.block_hashes import HASHES_PER_CHAIN, RECHECK_EVERY, BlockHashes
from exporter.poll.history import History
from exporter.poll.results import ChainResult, FetchError, NodeResult
from tests.support.documents import chain_doc, health_doc


def test_another_hash_for_a_height_read_before_counts_once() -> None:
    kept = BlockHashes()
    kept.note(100, "a")
    kept.note(100, "a")  # a stalled checkpoint read again: the same block
    kept.note(105, "b")
    assert kept.reorgs == 0
    kept.note(100, "x")  # rewritten
    kept.note(100, "x")  # and read again: not another reorganisation
    assert kept.reorgs == 1
    kept.note(100, "a")  # rewritten back
    assert kept.reorgs == 2


def test_a_rewrite_forgets_the_heights_above_it() -> None:
    """A rewritten block replaces the history after it: the heights above are not counted
    again as they are read."""
    kept = BlockHashes()
    for height in (100, 105, 110):
        kept.note(height, f"old-{height}")
    kept.note(105, "new-105")
    kept.note(110, "new-110")  # read again after the rewrite: known no more, no second count
    assert kept.reorgs == 1


def test_memory_is_bounded_to_the_last_heights() -> None:
    kept = BlockHashes()
    for height in range(100):
        kept.note(height, "h")
    kept.note(0, "other")  # forgotten long ago: a first read, no count
    assert kept.reorgs == 0
    kept.note(99, "other")
    assert kept.reorgs == 1
    assert HASHES_PER_CHAIN < 100


def test_a_height_read_before_is_asked_again_one_cycle_in_a_few_in_turn() -> None:
    kept = BlockHashes()
    for height in (100, 105, 110):
        kept.note(height, "h")
    asked = [kept.recheck(110) for _ in range(RECHECK_EVERY * 4)]
    rechecked = [height for height in asked if height is not None]
    assert len(rechecked) == 4  # one cycle in RECHECK_EVERY
    assert set(rechecked) == {100, 105}  # never the checkpoint itself, each in turn


def _up(hashes: dict[int, str], checkpoint: int, recheck: int | None = None) -> NodeResult:
    chain = ChainResult("c", read_chain(chain_doc(200)), block_height=checkpoint)
    chain.block_hash = hashes[checkpoint]
    if recheck is not None:
        chain.recheck_height, chain.recheck_hash = recheck, hashes[recheck]
    health = read_health(health_doc(["c"]))
    return NodeResult(NodeConfig("a", "http://x/"), health, None, [chain], 0.1)


def test_the_history_counts_from_the_first_block_read_and_plans_the_recheck() -> None:
    history = History()
    plain = ChainResult("c", read_chain(chain_doc(200)))
    first = history.record(
        [
            NodeResult(
                NodeConfig("a", "http://x/"), read_health(health_doc(["c"])), None, [plain], 0.1
            )
        ],
        now_mono=1.0,
    )
    assert first[0].chains[0].reorgs is None  # no block read yet: no series
    chain = {100: "a100", 105: "a105"}
    assert history.record([_up(chain, 100)], now_mono=2.0)[0].chains[0].reorgs == 0
    history.record([_up(chain, 105)], now_mono=3.0)
    planned = [history.recheck("a", "c", 110) for _ in range(RECHECK_EVERY)]
    assert planned[-1] in (100, 105) and planned[:-1] == [None] * (RECHECK_EVERY - 1)
    chain[100] = "rewritten"
    nodes = history.record([_up(chain, 105, recheck=100)], now_mono=4.0)
    assert nodes[0].chains[0].reorgs == 1


def test_a_failed_recheck_is_a_failed_block_request() -> None:
    history = History()
    chain = ChainResult("c", read_chain(chain_doc(200)), block_height=100, block_hash="h")
    chain.recheck_height = 95
    chain.recheck_error = FetchError(Reason.HTTP_STATUS, "HTTP 404")
    health = read_health(health_doc(["c"]))
    nodes = history.record(
        [NodeResult(NodeConfig("a", "http://x/"), health, None, [chain], 0.1)], 1.0
    )
    counts = {(e, r): n for e, r, n in nodes[0].error_counts}
    assert counts[("block", "http_status")] == 1
    assert nodes[0].chains[0].reorgs == 0
