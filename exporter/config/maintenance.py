"""The ``maintenance`` section of the config: planned work, stated as data.

Each entry puts one configured node, or one blockchain on every node, in maintenance until a
wall-clock time (RFC 3339 with an offset), for a short reason. The exporter keeps polling;
while an entry applies it exports ``ledger_node_maintenance`` or
``ledger_blockchain_maintenance`` (which Alertmanager's inhibit rules use) and the status page
lists the node or chain apart from the problems. ``until`` is read against the wall clock when
the entry starts applying, and the window's end kept on the monotonic clock from then on
(exporter.poll.cycle), so an entry stops applying by itself within a ``scrape_interval`` of
that time and a wall-clock step neither extends nor ends it; an entry already past is kept,
harmlessly (a file must not turn invalid with time). ``until`` must lie in the years 1 to
9999 once in UTC (what the log, the page and the cycle compute with).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from exporter.bounds import MAX_TIMESTAMP_CHARS
from exporter.config.schema import Reader
from exporter.config.yamlsource import Path
from exporter.text import UNSAFE
from exporter.values import parse_timestamp

_KEYS = ("node", "blockchain", "until", "reason")
#: The longest reason: a label value an operator reads on an alert and a page, one line.
MAX_REASON_CHARS = 100


@dataclass(frozen=True)
class MaintenanceEntry:
    """One entry: a node (``blockchain`` empty) or a blockchain (``node`` empty) in
    maintenance until ``until`` (Unix time, seconds), for ``reason``."""

    node: str
    blockchain: str
    until: float
    reason: str

    def applies_at(self, wall: float) -> bool:
        """True while the wall time ``wall`` (Unix seconds) is before ``until``."""
        return wall < self.until

    @property
    def until_text(self) -> str:
        """``until`` in UTC as RFC 3339 (``2026-11-28T12:00:00Z``), as the page shows it."""
        moment = datetime.datetime.fromtimestamp(self.until, datetime.UTC)
        return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def read_maintenance(
    reader: Reader, value: Any, node_names: frozenset[str], max_label_length: int
) -> tuple[MaintenanceEntry, ...]:
    """Validate the ``maintenance`` list (None: no entry); problems go to ``reader``. A node
    entry must name a configured node; each node and chain has at most one entry."""
    if value is None:
        return ()
    if not isinstance(value, list):
        reader.problem(
            ("maintenance",), "must be a list of entries: node or blockchain, until, reason"
        )
        return ()
    entries = []
    seen: dict[tuple[str, str], int] = {}
    for index, item in enumerate(value):
        path: Path = ("maintenance", index)
        entry = _entry(reader, item, path, node_names, max_label_length)
        if entry is None:
            continue
        key = (entry.node, entry.blockchain)
        if key in seen:
            key_name = "node" if entry.node else "blockchain"
            what = f"{key_name} {reader.quote((*path, key_name), entry.node or entry.blockchain)}"
            reader.problem(
                path,
                f"{what} already has an entry (maintenance[{seen[key]}]); keep one and set its"
                " until and reason",
            )
            continue
        seen[key] = index
        entries.append(entry)
    return tuple(entries)


def _entry(
    reader: Reader,
    value: Any,
    path: Path,
    node_names: frozenset[str],
    max_label_length: int,
) -> MaintenanceEntry | None:
    """One entry, or None after telling ``reader`` what is wrong with it."""
    problems = len(reader.problems)
    data = reader.mapping(value, path, _KEYS, required=("until", "reason"))
    if isinstance(value, dict) and ("node" in data) == ("blockchain" in data):
        reader.problem(
            path,
            "give either node (a configured node: all its chains) or blockchain (that chain on"
            " every node), not both"
            if "node" in data
            else "needs node (a configured node) or blockchain (a blockchain id)",
        )
    node = _label_text(reader, data, "node", path, max_label_length)
    if node and node not in node_names:
        where = (*path, "node")
        reader.problem(where, f"names no configured node: {reader.quote(where, node)}")
    blockchain = _label_text(reader, data, "blockchain", path, max_label_length)
    until = _until(reader, data["until"], (*path, "until")) if "until" in data else None
    reason = _label_text(reader, data, "reason", path, min(max_label_length, MAX_REASON_CHARS))
    if len(reader.problems) > problems or until is None:
        return None
    return MaintenanceEntry(node, blockchain, until, reason)


def _label_text(reader: Reader, data: dict[str, Any], key: str, path: Path, longest: int) -> str:
    """A value that becomes a label: one line of visible text, at most ``longest`` long."""
    if key not in data:
        return ""
    where = (*path, key)
    text = reader.string(data[key], where)
    if not text:
        return ""
    if not text.strip():
        reader.problem(where, "must not be blank")
        return ""
    if UNSAFE.search(text):
        reader.problem(
            where,
            "must be one line of visible text: no control, line-break, bidirectional or"
            " invisible format characters",
        )
        return ""
    if len(text) > longest:
        reader.problem(
            where, f"must be at most {longest} characters, not {len(text)}: it is a label value"
        )
        return ""
    return text


#: The span of ``until`` the exporter computes with: a UTC date-time of years 1 to 9999 (what
#: Python's datetime holds, as the log, the page and the state need it). An offset can carry a
#: time written in 9999 past it (``9999-12-31T20:00:00-05:00`` is year 10000 in UTC), so the
#: moment itself is checked, not the text.
EARLIEST_UNTIL = datetime.datetime(1, 1, 2, tzinfo=datetime.UTC).timestamp()
LATEST_UNTIL = datetime.datetime(9999, 12, 31, tzinfo=datetime.UTC).timestamp()


def _until(reader: Reader, value: Any, path: Path) -> float | None:
    """:func:`_moment`, refused outside EARLIEST_UNTIL..LATEST_UNTIL with the line."""
    until = _moment(reader, value, path)
    shown = value.isoformat() if isinstance(value, datetime.datetime) else value
    if until is not None and not EARLIEST_UNTIL <= until <= LATEST_UNTIL:
        reader.problem(
            path,
            "is outside the years 1 to 9999 once in UTC (its offset carries it across the"
            " year's end); give a time from 0001-01-02T00:00:00Z to 9999-12-31T00:00:00Z"
            f"{reader.instead(path, shown)}",
        )
        return None
    return until


def _moment(reader: Reader, value: Any, path: Path) -> float | None:
    """An RFC 3339 time with an offset (``2026-11-28T12:00:00Z``, ``...+01:00``) as Unix
    seconds. YAML reads such a time unquoted as a date-time: one without an offset, or a
    bare date, is refused, since it cannot be placed on the time line without guessing."""
    hint = "such as 2026-11-28T18:00:00Z or 2026-11-28T19:00:00+01:00"
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            reader.problem(path, f"has no UTC offset; add Z or +HH:MM, {hint}")
            return None
        return value.timestamp()
    if isinstance(value, datetime.date):
        reader.problem(path, f"is a date without a time; give a time with an offset, {hint}")
        return None
    if isinstance(value, str) and len(value) <= MAX_TIMESTAMP_CHARS:
        try:
            return parse_timestamp(value)
        except ValueError:
            pass
    reader.problem(
        path, f"must be an RFC 3339 time with an offset, {hint}{reader.instead(path, value)}"
    )
    return None
