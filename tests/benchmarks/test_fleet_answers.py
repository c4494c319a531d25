"""The varied fleet of ``benchmarks/fleet_answers.py`` (bench_ratio.py ``--answers``): the
answers are of the API's shape and as rich as asked, differ from node to node
where a large network's do and are shared where a real network shares them, and move on
with each node's cycle."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

from tests.support.benchmarks import load_benchmark


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_benchmark("fleet_answers", monkeypatch)


def get(fleet: Any, path: str) -> Any:
    body = fleet.answer(path.encode())
    assert body is not None, path
    return json.loads(body)


@pytest.mark.parametrize(
    ("shape", "counts"), [("varied-small", (7, 8, 1, 3)), ("varied-large", (21, 40, 3, 12))]
)
def test_each_shape_is_as_rich_as_asked(
    answers: ModuleType, shape: str, counts: tuple[int, int, int, int]
) -> None:
    council, peers, sessions, flags = counts
    fleet = answers.VariedAnswers(answers.SHAPES[shape])
    health = get(fleet, "/n5/health")
    assert health["blockchains"] == list(answers.CHAINS)
    network = health["network"]
    assert len(set(network["networkPeers"])) == network["peerCount"] == peers
    assert network["peerId"] not in network["networkPeers"]  # a node is not its own peer
    status = get(fleet, f"/n5/blockchains/{answers.CHAINS[1]}")
    assert len(set(status["councilMembers"])) == council
    assert len(status["blockchainPeers"]) == peers
    assert len(status["voteSessions"]) == sessions
    assert len(status["features"]) == flags
    assert status["blockHeight"] == answers.BASE_HEIGHT - 5 % answers.LAG
    for session_id, session in status["voteSessions"].items():
        assert session["sessionId"] == session_id
        assert session["currentLeader"] in status["councilMembers"]
        assert isinstance(session["round"], int) and isinstance(session["blockHeight"], int)
    for flag in ("isInCouncil", "isVoting", "isTimeToVote", "syncing"):
        assert isinstance(status[flag], bool), flag


def test_nodes_differ_where_a_network_does_and_share_what_it_shares(
    answers: ModuleType,
) -> None:
    fleet = answers.VariedAnswers(answers.SHAPES["varied-large"])
    chain = answers.CHAINS[0]
    statuses = [get(fleet, f"/n{i}/blockchains/{chain}") for i in range(6)]
    healths = [get(fleet, f"/n{i}/health") for i in range(6)]
    for varied in ("blockHeight", "pendingMessagesCount", "pendingTransactions"):
        assert len({status[varied] for status in statuses}) > 1, varied
    rounds = {s["round"] for status in statuses for s in status["voteSessions"].values()}
    assert len(rounds) > 1
    assert len({tuple(h["network"]["networkPeers"]) for h in healths}) == 6
    assert len({h["nodeId"] for h in healths}) == 6
    for shared in ("councilMembers", "consensus", "features"):
        assert len({json.dumps(status[shared]) for status in statuses}) == 1, shared
    assert len({tuple(status["voteSessions"]) for status in statuses}) == 1  # the same ids
    other = get(fleet, f"/n0/blockchains/{answers.CHAINS[2]}")
    assert set(other["councilMembers"]).isdisjoint(statuses[0]["councilMembers"])


def test_a_node_moves_on_with_each_of_its_cycles(answers: ModuleType) -> None:
    fleet = answers.VariedAnswers(answers.SHAPES["varied-small"])
    chain = answers.CHAINS[0]
    seen = []
    for _ in range(answers.SESSION_CYCLES + 1):
        get(fleet, "/n7/health")  # a cycle of node 7 starts with its /health
        seen.append(get(fleet, f"/n7/blockchains/{chain}"))
    heights = [status["blockHeight"] for status in seen]
    assert heights == list(range(heights[0], heights[0] + len(seen)))
    sessions = [tuple(status["voteSessions"]) for status in seen]
    assert sessions[0] == sessions[answers.SESSION_CYCLES - 1] != sessions[-1]
    assert get(fleet, "/n8/blockchains/" + chain)["blockHeight"] < heights[-1]  # not asked yet


def test_blocks_agree_and_other_paths_are_not_found(answers: ModuleType) -> None:
    fleet = answers.VariedAnswers(answers.SHAPES["varied-small"])
    checkpoint = f"/blockchains/{answers.CHAINS[0]}/blocks?height={answers.CHECKPOINT}"
    assert get(fleet, "/n1" + checkpoint) == get(fleet, "/n2" + checkpoint)
    assert get(fleet, "/n1" + checkpoint)["height"] == answers.CHECKPOINT
    for path in (b"/health", b"/x1/health", b"/n1/metrics", b"/n1/blockchains/a/blocks?height=x"):
        assert fleet.answer(path) is None, path


def test_a_template_is_filled_in_by_name(answers: ModuleType) -> None:
    literals, names = answers.compile_template('{"a": %(x)s, "b": "%(y)s", "c": "100%%"}')
    assert names == ["x", "y"]
    assert literals == [b'{"a": ', b', "b": "', b'", "c": "100%"}']
