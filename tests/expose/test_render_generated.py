"""Issue 22's cheaper render (a filler per node and family, label values escaped once per
render, gauge columns, value texts by family) writes client_python's bytes for generated
snapshots: label values holding the exposition's escapes and ``str.format``'s braces in every
place a label value comes from, more distinct values than the render's memos keep, and
sample values of every kind."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from exporter.expose.labels import ESCAPES_KEPT
from exporter.expose.render import Renderer, openmetrics_format, text_format
from exporter.model.snapshot import (
    ChainStatus,
    ConsensusStatus,
    ErrorCounts,
    LeaderCounts,
    NodeStatus,
    Snapshot,
)
from exporter.model.storage import pack_counts
from tests.support import generation
from tests.support.golden import GOLDEN, poll_golden_case
from tests.support.oracle import render_collectors, snapshot_collectors

BASE = poll_golden_case(GOLDEN / "documented")
#: Label values made of what the exposition escapes and what str.format would read.
TEXTS = st.lists(
    st.sampled_from(["a", "b", "{", "}", "{0}", "{}", "{{", "}}", "\\", '"', "\n", "\\n", "é"]),
    max_size=6,
).map("".join)
VALUES = st.one_of(
    st.floats(),
    st.sampled_from([0.0, -0.0, 1.0, math.inf, -math.inf, math.nan, 1e6, 1.7e9]),
)


def _client_python(snapshot: Snapshot, om: bool) -> bytes:
    return render_collectors(snapshot_collectors(snapshot), openmetrics_format=om)


def _assert_written_as_client_python(renderer: Renderer, snapshot: Snapshot) -> None:
    assert text_format(renderer, snapshot) == _client_python(snapshot, om=False)
    assert openmetrics_format(renderer, snapshot) == _client_python(snapshot, om=True)


def _counts(values: list[int]) -> bytes:
    return pack_counts(values)


@st.composite
def chains(draw: st.DrawFn, chain: ChainStatus, index: int) -> ChainStatus:
    """``chain`` with odd ids, feature names, consensus and key types and leader keys."""
    reading = chain.reading
    if reading is not None:
        features = draw(st.dictionaries(TEXTS, st.sampled_from([0.0, 1.0]), max_size=3))
        reading = replace(
            reading,
            features=tuple(sorted(features.items())),
            consensus_type=draw(st.none() | TEXTS),
            key_type=draw(st.none() | TEXTS),
        )
    leaders = tuple(sorted(set(draw(st.lists(TEXTS, max_size=3)))))
    failed = _counts([draw(st.integers(0, 5)) for _ in leaders]) if draw(st.booleans()) else b""
    consensus = ConsensusStatus(draw(st.none() | VALUES), 3, 1, LeaderCounts(leaders, failed))
    blockchain = draw(TEXTS) + str(index)  # a node's chains are distinct
    return replace(chain, blockchain=blockchain, reading=reading, consensus=consensus)


@st.composite
def nodes(draw: st.DrawFn, node: NodeStatus, name: str) -> NodeStatus:
    """``node`` renamed and relabelled, with odd error keys, identity and chains."""
    labels = draw(st.dictionaries(st.sampled_from(["zone", "dc", "a_b"]), TEXTS, max_size=2))
    keys = tuple(draw(st.lists(st.tuples(TEXTS, TEXTS), max_size=3, unique=True)))
    errors = ErrorCounts(keys, _counts([draw(st.integers(0, 4)) for _ in keys]))
    health = node.health
    if health is not None:
        identity = [draw(st.none() | TEXTS) for _ in range(3)]
        health = replace(health, node_version=identity[0], node_id=identity[1], peer_id=identity[2])
    return replace(
        node,
        name=name,
        labels=tuple(sorted(labels.items())),
        chains=tuple(draw(chains(chain, index)) for index, chain in enumerate(node.chains)),
        error_counts=errors,
        health=health,
        duration=draw(VALUES),
        last_success=draw(st.none() | VALUES),
    )


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    names = draw(st.lists(TEXTS, min_size=1, max_size=4, unique=True))
    drawn = [draw(nodes(BASE.nodes[i % len(BASE.nodes)], n)) for i, n in enumerate(names)]
    return replace(BASE, nodes=tuple(drawn))


@hypothesis_settings(
    generation.settings(60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(snapshots(), min_size=1, max_size=3))
def test_generated_snapshots_are_written_as_client_python_writes_them(
    cycles: list[Snapshot],
) -> None:
    """One renderer over consecutive snapshots, as the exporter keeps it (its label cache)."""
    renderer = Renderer()
    for snapshot in cycles:
        _assert_written_as_client_python(renderer, snapshot)


def test_more_distinct_label_values_than_a_render_escapes_once() -> None:
    """Past ESCAPES_KEPT values (and the value texts kept per family) each is escaped or
    formatted again: the bytes do not change."""
    node = BASE.nodes[0]
    many = ESCAPES_KEPT + 100
    keys = tuple((f'e"{i}', f"r\\{i}\n") for i in range(many))
    errors = ErrorCounts(keys, _counts(list(range(many))))
    leaders = tuple(sorted(f"k{{{i}}}" for i in range(many)))
    chain = node.chains[0]
    assert chain.reading is not None and chain.consensus is not None
    reading = replace(chain.reading, features=tuple((f'f"{i}', 1.0) for i in range(many)))
    consensus = replace(chain.consensus, leader_failures=LeaderCounts(leaders))
    wide = replace(
        node, error_counts=errors, chains=(replace(chain, reading=reading, consensus=consensus),)
    )
    _assert_written_as_client_python(Renderer(), replace(BASE, nodes=(wide,)))
