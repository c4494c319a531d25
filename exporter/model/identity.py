"""Whether a node is the one configured (its pinned identity, ``expect``): the ``nodeId`` its
/health reports and the chains it lists, against what the config expects.

A DNS or load-balancer mistake, a restored snapshot or an impostor can put another node behind
a configured URL; without this check its heights would be exported as that node's. A node
that answers otherwise is not trusted: the poll treats it as down (``identity_mismatch``) and
keeps none of its readings. What the node sent is quoted cut short and made visible: a hostile
node may send a nodeId of any length or content.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exporter.config.nodes import Expectation
from exporter.model.fields import HealthReading
from exporter.text import visible

#: The most characters of a nodeId or chain id a mismatch quotes (the log, the status page):
#: a compressed public key (66 hex digits) whole; of a longer one (a PEM key, a hostile
#: node's megabyte) its start and its end, where two keys of one kind differ.
SHOWN_CHARS = 128
_SHOWN_END = 24
#: The most missing chains a mismatch names (the rest are counted).
SHOWN_CHAINS = 3


def shortened(text: str) -> str:
    """At most SHOWN_CHARS characters of ``text``: a longer one's start and end around
    ``...``."""
    if len(text) <= SHOWN_CHARS:
        return text
    return text[: SHOWN_CHARS - _SHOWN_END] + "..." + text[-_SHOWN_END:]


def quoted(text: str) -> str:
    """``text`` as the log quotes it: made visible, in quotes (shortened by the caller)."""
    return f"'{visible(text)}'"


@dataclass(frozen=True, slots=True)
class Mismatch:
    """How a node's /health differs from its ``expect``: ``expected_node_id`` is set when its
    nodeId is not the one expected (``seen_node_id``: what it sent, None when it sent none a
    reader could take: missing, not a string, or over MAX_TEXT_CHARS), ``missing_blockchains``
    the expected chains its listing lacks."""

    expected_node_id: str | None
    seen_node_id: str | None
    missing_blockchains: tuple[str, ...] = ()

    def text(self, show: Callable[[str], str] = quoted) -> str:
        """What is wrong, each value shortened, then as ``show`` presents it (quoted for the
        log)."""

        def show_short(value: str) -> str:
            return show(shortened(value))

        parts = []
        if self.expected_node_id is not None:
            seen = "no readable nodeId" if self.seen_node_id is None else "nodeId "
            seen += "" if self.seen_node_id is None else show_short(self.seen_node_id)
            parts.append(f"answers with {seen}, expected {show_short(self.expected_node_id)}")
        if self.missing_blockchains:
            parts.append(f"does not list the expected blockchain {self._missing(show_short)}")
        return "; ".join(parts)

    def _missing(self, show: Callable[[str], str]) -> str:
        """The missing chains, the first SHOWN_CHAINS named and the rest counted."""
        missing = self.missing_blockchains
        named = ", ".join(show(chain) for chain in missing[:SHOWN_CHAINS])
        more = len(missing) - SHOWN_CHAINS
        return named + (f" and {more} more" if more > 0 else "")

    def fields(self) -> dict[str, str]:
        """The log line's fields: expected and seen, cut short and as they are (the log's
        formatter quotes and escapes them)."""
        found = {}
        if self.expected_node_id is not None:
            found["expected_node_id"] = shortened(self.expected_node_id)
            seen = self.seen_node_id
            found["seen_node_id"] = "none" if seen is None else shortened(seen)
        if self.missing_blockchains:
            found["missing_blockchains"] = self._missing(shortened)
        return found


def check_identity(expect: Expectation | None, health: HealthReading) -> Mismatch | None:
    """None when ``health`` vouches for what ``expect`` pins (or nothing is pinned), else
    what differs."""
    if expect is None:
        return None
    seen = health.node_key
    wrong_id = expect.node_id is not None and seen != expect.node_id
    listed = frozenset(health.blockchain_ids) if expect.blockchains else frozenset()
    missing = tuple(chain for chain in expect.blockchains if chain not in listed)
    if not wrong_id and not missing:
        return None
    return Mismatch(expect.node_id if wrong_id else None, seen if wrong_id else None, missing)
