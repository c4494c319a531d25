"""The metric contract (``docs/metrics.md``) as an oracle for generated answers.

Given what each node answered in each cycle and what the exporter served after the last one,
:func:`check` lists every way the exposition breaks the contract. It is written from
docs/metrics.md alone, apart from the exporter's readers and its metric catalogue (it imports
nothing of ``exporter`` but the documented bounds of ``exporter/bounds.py``): it reads the
committed page's family tables (type and labels) and label values at run time
(``tests/support/metrics_reference.py``; ``tests/expose/test_metrics_reference.py`` holds the
page to
the catalogue), and reads the answers itself:

- JSON is what RFC 8259 says. A body that is not UTF-8, starts with a BOM, is UTF-16 or
  UTF-32, holds ``NaN`` or ``Infinity`` or nests deeper than :data:`SAFE_DEPTH` may be read
  or refused (``invalid_json``); a body over the cap is refused (``too_large``, rule 5); a
  non-2xx status is ``http_status``; JSON that is not an object is refused
  (``invalid_response``). A key given twice may be read as either value.
- Rule 1, what is readable: a JSON number or a string of one (a string in JSON's number
  grammar must be read; ``+1``, ``.5``, ``5.`` and leading zeros may be), finite; JSON
  ``true``/``false`` only for flags; rule 3, Go durations; rule 4, ISO 8601 timestamps with
  a zone (RFC 3339 must be read; a lower-case ``t``/``z``, a space, ``+0530``, a leap second
  may be). Counts, heights and durations below zero may be dropped. A string is readable
  when UTF-8 can hold it; a label value over ``max_label_value_length`` and a value over the
  caps of ``exporter/bounds.py`` are not exported. Anything else gives no sample.
- Rules 2 and 5: a node or chain that cannot be read says ``_up 0``, an error is counted
  with a fitting reason, and its data series are gone.
- Every family of docs/metrics.md: which field gives which series, with which labels (every
  sample carries only its family's documented labels and the node's static ones); the network
  series from the nodes' own answers (every reading the answers allow is tried, and the
  exposition must be one of them); blocks behind and height changes from the exported
  heights and the exporter's clock.

The exposition is judged on what it shows: ``ledger_node_up 1`` means the oracle must be
able to read that ``/health`` answer, ``0`` that it may refuse it. Every sample must be one
the answers call for, with the value they give; every sample they require must be there.
The consensus-health families follow vote sessions (by their key in ``voteSessions``) and
council sets from cycle to cycle: where every earlier cycle's answer has one reading, the
counters and the oldest session's age are computed exactly; where one may be read several
ways, they must only be there (see :class:`History`).
"""

from __future__ import annotations

import calendar
import contextlib
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from exporter import bounds
from tests.support import metrics_reference
from tests.support.answers import Answer

#: A request as the oracle names it: decoded path segments and query pairs.
Request = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]
Labels = tuple[tuple[str, str], ...]
Key = tuple[str, Labels]
NOT_FOUND = Answer(b'{"error": "not found"}', 404)
#: Nesting any parser must take; deeper may be refused as a parser's limit (RFC 8259, 9).
SAFE_DEPTH = 64
REASONS = frozenset(metrics_reference.label_values("reason"))
ENDPOINTS = frozenset(metrics_reference.label_values("endpoint"))
PHASES = metrics_reference.label_values("phase")
CONTRACT_STATUSES = metrics_reference.label_values("status")
PERMISSIONS = metrics_reference.label_values("permission")


def labels_of(pairs: Iterable[tuple[str, str]]) -> Labels:
    return tuple(sorted(pairs))


# --- the configuration and the cycles, as the oracle sees them -----------------------------


@dataclass(frozen=True)
class Contract:
    blockchain: str
    address: str
    name: str
    state_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Wallet:
    blockchain: str
    address: str
    name: str


@dataclass(frozen=True)
class Setup:
    """What the exporter was configured with: node names with their static labels, the watch
    list, the block checks and the bounds."""

    nodes: tuple[tuple[str, Labels], ...]
    contracts: tuple[Contract, ...] = ()
    wallets: tuple[Wallet, ...] = ()
    hash_fields: tuple[str, ...] = ("hash", "blockHash")
    checkpoint_depth: int = 5
    max_bytes: int = 8 * 1024 * 1024
    max_chains: int = 100
    label_limit: int = bounds.DEFAULT_MAX_LABEL_VALUE_LENGTH
    max_features: int = bounds.DEFAULT_MAX_FEATURES_PER_CHAIN
    max_groups: int = bounds.DEFAULT_MAX_AUTH_GROUPS_PER_WALLET
    max_sessions: int = bounds.DEFAULT_MAX_VOTE_SESSIONS_PER_CHAIN
    max_leaders: int = bounds.DEFAULT_MAX_LEADERS_PER_CHAIN


@dataclass(frozen=True)
class Cycle:
    """One polling cycle: the exporter's clock, each node's answers (a request not listed is
    answered 404) and the requests each node was sent."""

    clock: float
    answers: Mapping[str, Mapping[Request, Answer]]
    requests: Mapping[str, Sequence[Request]] = field(default_factory=dict)

    def answer(self, node: str, segments: Sequence[str], query: Labels = ()) -> Answer:
        return self.answers.get(node, {}).get((tuple(segments), query), NOT_FOUND)


# --- JSON as RFC 8259 has it ---------------------------------------------------------------


class Obj:
    """A JSON object with every member as sent, repeated keys included."""

    __slots__ = ("by_key", "pairs")

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs
        self.by_key: dict[str, list[Any]] = {}
        for name, value in pairs:
            self.by_key.setdefault(name, []).append(value)

    def all(self, key: str) -> list[Any]:
        """Every value sent under ``key`` (empty when absent)."""
        return self.by_key.get(key, [])

    def names(self) -> list[str]:
        """The keys, once each, in the order first sent."""
        return list(self.by_key)


@dataclass(frozen=True)
class Num:
    """A JSON number, as written."""

    text: str

    @property
    def value(self) -> float:
        return float(self.text)


@dataclass(frozen=True)
class NotJson:
    """``NaN``, ``Infinity``, ``-Infinity``: not JSON, read by lenient parsers."""

    text: str


ABSENT = object()


def _parse(text: str) -> Any:
    return json.loads(
        text, object_pairs_hook=Obj, parse_float=Num, parse_int=Num, parse_constant=NotJson
    )


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, Obj):
            stack += [(item, depth + 1) for _, item in node.pairs]
        elif isinstance(node, list):
            stack += [(item, depth + 1) for item in node]
    return deepest


def _has_constant(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, NotJson):
            return True
        if isinstance(node, Obj):
            stack += [item for _, item in node.pairs]
        elif isinstance(node, list):
            stack += node
    return False


_UTF_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def _wide_encoding(body: bytes) -> str | None:
    """UTF-16 or UTF-32 as RFC 4627 (3) recognises it: a BOM, or NULs among the first bytes."""
    for bom, codec in _UTF_BOMS:
        if body.startswith(bom):
            return codec
    if len(body) >= 4:
        zeros = (body[0] == 0, body[1] == 0, body[2] == 0, body[3] == 0)
        patterns = {
            (True, True, True, False): "utf-32-be",
            (False, True, True, True): "utf-32-le",
            (True, False, True, False): "utf-16-be",
            (False, True, False, True): "utf-16-le",
        }
        return patterns.get(zeros)
    return None


@dataclass(frozen=True)
class Reading:
    """How an answer may be taken: the objects it may be read as, and the reasons it may be
    refused for (both may be possible)."""

    documents: tuple[Obj, ...]
    refusals: frozenset[str]


def read_answer(answer: Answer, max_bytes: int) -> Reading:
    """How ``answer`` may be read under the contract (see the module docstring)."""
    body = answer.body
    if not 200 <= answer.status < 300:  # an error page over the cap is both (rule 5)
        return Reading(
            (), frozenset({"http_status"} | ({"too_large"} if len(body) > max_bytes else set()))
        )
    if len(body) > max_bytes:
        return Reading((), frozenset({"too_large"}))
    refusals: set[str] = set()
    texts: list[str] = []
    if body.startswith(b"\xef\xbb\xbf"):  # may be ignored (RFC 8259, 8.1)
        refusals.add("invalid_json")
        body = body[3:]
    wide = _wide_encoding(body)
    if wide is not None:  # RFC 4627 allowed them; RFC 8259 asks for UTF-8
        refusals.add("invalid_json")
        with contextlib.suppress(UnicodeDecodeError):
            texts.append(body.decode(wide, "surrogatepass"))
    try:
        texts.append(body.decode("utf-8"))
    except UnicodeDecodeError:  # strings holding the bad bytes are unreadable
        refusals.add("invalid_json")
        texts.append(body.decode("utf-8", "surrogateescape"))
    documents: list[Obj] = []
    for text in texts:
        try:
            document = _parse(text)
        except (ValueError, RecursionError):
            refusals.add("invalid_json")
            continue
        if _has_constant(document) or _depth(document) > SAFE_DEPTH:
            refusals.add("invalid_json")
        if isinstance(document, Obj):
            documents.append(document)
        else:
            refusals.add("invalid_response")
    return Reading(tuple(documents), frozenset(refusals))


#: The fields of a node's /health: an answer with none of them (not null) is another
#: service's health check, not a ledger node (``invalid_response``).
HEALTH_FIELDS = ("nodeVersion", "nodeId", "network", "blockchains")


def read_health(answer: Answer, max_bytes: int) -> Reading:
    """How a /health ``answer`` may be read: as :func:`read_answer`, and a document without
    any of HEALTH_FIELDS (each absent or null) is refused; one sent twice, either way."""
    reading = read_answer(answer, max_bytes)
    kept: list[Obj] = []
    refusals = set(reading.refusals)
    for document in reading.documents:
        sent = [document.all(key) for key in HEALTH_FIELDS]
        if any(v is not None for values in sent for v in values):
            kept.append(document)
        if all(not values or None in values for values in sent):  # may all be null
            refusals.add("invalid_response")
    return Reading(tuple(kept), frozenset(refusals))


# --- what a value may give: rule 1, 3 and 4 ------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """The values a sample may have (none: it must be absent) and whether it must be there."""

    values: tuple[float, ...] = ()
    required: bool = False
    tolerance: float = 0.0

    def allows(self, value: float) -> bool:
        return any(value == v or abs(value - v) <= self.tolerance for v in self.values)


NEVER = Expect()


def must(value: float, tolerance: float = 0.0) -> Expect:
    return Expect((value,), True, tolerance)


def may(value: float, tolerance: float = 0.0) -> Expect:
    return Expect((value,), False, tolerance)


def either(expects: Iterable[Expect]) -> Expect:
    """One of several readings (a key sent twice): any of their values, required when every
    reading requires one."""
    listed = list(expects)
    if not listed:
        return NEVER
    values = tuple(dict.fromkeys(v for e in listed for v in e.values))
    required = all(e.required for e in listed)
    return Expect(values, required and bool(values), max(e.tolerance for e in listed))


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def readable_text(value: Any) -> bool:
    """A string UTF-8 can hold (no lone surrogate)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def number(value: Any) -> Expect:
    """A finite JSON number, or a string of one (rule 1)."""
    if isinstance(value, Num):
        number = value.value
        return must(number) if math.isfinite(number) else NEVER
    if not isinstance(value, str) or len(value) > bounds.MAX_NUMBER_CHARS:
        return NEVER
    if _JSON_NUMBER.fullmatch(value):
        number = float(value)
        return must(number) if math.isfinite(number) else NEVER
    if _DECIMAL.fullmatch(value):
        number = float(value)
        return may(number) if math.isfinite(number) else NEVER
    return NEVER


def count(value: Any) -> Expect:
    """A number that counts or indexes something: one below zero may be dropped; -0 is 0."""
    read = number(value)
    if not read.values:
        return read
    amount = read.values[0] + 0.0
    return Expect((amount,), read.required and amount >= 0)


def flag(value: Any) -> Expect:
    """JSON ``true``/``false`` only."""
    if value is True or value is False:
        return must(1.0 if value else 0.0)
    return NEVER


_GO_UNITS = {
    "ns": 1,
    "us": 1000,
    "\u00b5s": 1000,
    "\u03bcs": 1000,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_GO_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_GO_MAX = 2**63 - 1


def duration(value: Any) -> Expect:
    """A Go duration string (rule 3), in seconds: Go's syntax exactly, at most Go's int64 of
    nanoseconds; below zero may be dropped."""
    if not isinstance(value, str) or len(value) > bounds.MAX_DURATION_CHARS:
        return NEVER
    sign = -1 if value.startswith("-") else 1
    body = value[1:] if value[:1] in ("+", "-") else value
    if body == "0":
        return must(0.0)
    total, parts, position = Fraction(0), 0, 0
    while position < len(body):
        part = _GO_PART.match(body, position)
        if part is None or part.end() == position or not (part.group(1) or part.group(2)):
            return NEVER
        whole, fraction, unit = part.groups()
        amount = Fraction(int(whole or "0"))
        if fraction:
            amount += Fraction(int(fraction), 10 ** len(fraction))
        total += amount * _GO_UNITS[unit]
        parts, position = parts + 1, part.end()
    if not parts:
        return NEVER
    if total > _GO_MAX + parts:  # Go refuses it (within rounding of the last nanoseconds)
        return NEVER
    seconds = float(sign * total / 10**9)
    tolerance = parts * 2e-9 + abs(seconds) * 1e-12
    if total > _GO_MAX - parts:
        return may(seconds, tolerance)
    return Expect((seconds + 0.0,), sign > 0 or total == 0, tolerance)


_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))"
)
_ISO_LENIENT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(?:([Zz])|([+-])([0-9]{2}):?([0-9]{2}))"
)
_YEAR_1 = calendar.timegm((1, 1, 1, 0, 0, 0))
_YEAR_9999_END = calendar.timegm((9999, 12, 31, 23, 59, 59))
#: 400 years of the Gregorian calendar: 146097 days.
_GREGORIAN_CYCLE_SECONDS = 146097 * 86400


def timestamp(value: Any) -> Expect:
    """An ISO 8601 date-time with ``Z`` or an offset (rule 4), as Unix seconds."""
    if not isinstance(value, str) or len(value) > bounds.MAX_TIMESTAMP_CHARS:
        return NEVER
    strict = _RFC3339.fullmatch(value)
    match = strict or _ISO_LENIENT.fullmatch(value)
    if match is None:
        return NEVER
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    offset_hours = int(match.group(10) or 0)
    offset_minutes = int(match.group(11) or 0)
    if not 1 <= month <= 12 or hour > 23 or minute > 59 or second > 60:
        return NEVER
    if offset_hours > 23 or offset_minutes > 59:
        return NEVER
    if not 1 <= day <= calendar.monthrange(year if year else 2000, month)[1]:
        return NEVER
    offset = (offset_hours * 3600 + offset_minutes * 60) * (-1 if match.group(9) == "-" else 1)
    # year 0, which the calendar module refuses: 400 Gregorian years later, less their days
    shift = 0 if year >= 1 else 400
    whole = calendar.timegm((year + shift, month, day, hour, minute, second)) - offset
    whole -= shift // 400 * _GREGORIAN_CYCLE_SECONDS
    seconds = whole + float(Fraction(match.group(7) or "0"))
    sure = strict is not None and second < 60 and year >= 1
    sure = sure and _YEAR_1 <= whole <= _YEAR_9999_END
    return Expect((seconds,), sure, 1e-6)


def length(value: Any, kind: type) -> Expect:
    """How many entries a JSON array (or distinct keys an object) has."""
    if kind is list and isinstance(value, list):
        return must(float(len(value)))
    if kind is Obj and isinstance(value, Obj):
        distinct, written = float(len(value.names())), float(len(value.pairs))
        return must(distinct) if distinct == written else Expect((distinct, written), True)
    return NEVER


def text(value: Any, limit: int) -> str | None:
    """A label value the node sent: readable, and within ``limit`` characters."""
    if readable_text(value) and len(value) <= limit:
        return str(value)
    return None


def children(parents: Iterable[Any], key: str) -> list[Any]:
    """The values under ``key``: each one an object among ``parents`` sent under it, ABSENT
    for an object without it and for a parent that is no object (a key sent twice may hold
    an object once and something else once)."""
    found: list[Any] = []
    for parent in parents:
        found += (parent.all(key) or [ABSENT]) if isinstance(parent, Obj) else [ABSENT]
    return found


def texts(parents: Iterable[Any], key: str, limit: int) -> list[str | None]:
    return list(dict.fromkeys(text(value, limit) for value in children(parents, key)))


def field_expect(parents: Iterable[Any], key: str, reader: Callable[[Any], Expect]) -> Expect:
    return either(NEVER if v is ABSENT else reader(v) for v in children(parents, key))


# --- the expectations of one exposition ----------------------------------------------------

Samples = Mapping[Key, float]
Expectations = dict[Key, Expect]


def merge(alternatives: Sequence[Expectations]) -> Expectations:
    """Several readings of one part: a sample of any of them, required only by all."""
    if len(alternatives) == 1:
        return alternatives[0]
    merged: Expectations = {}
    for key in dict.fromkeys(k for alternative in alternatives for k in alternative):
        found = [alternative.get(key, NEVER) for alternative in alternatives]
        merged[key] = either(found)
        if any(key not in alternative for alternative in alternatives):
            merged[key] = Expect(merged[key].values, False, merged[key].tolerance)
    return merged


def label_set(labels: Mapping[str, str]) -> Labels:
    return labels_of(labels.items())


def one_sample(
    name: str, base: Mapping[str, str], names: Sequence[str], candidates: Sequence[list[str | None]]
) -> Expectations:
    """An ``_info``-like sample valued 1 whose labels come from fields (a field not readable
    gives ``""``); none when no field is readable, and maybe none when every one is empty
    (an empty label is no label); each combination when a key repeats."""
    alternatives: list[Expectations] = []
    for combination in itertools.product(*candidates):
        labels = {**base, **{n: v or "" for n, v in zip(names, combination, strict=True)}}
        if any(value is not None for value in combination):
            alternatives.append({(name, label_set(labels)): must(1.0)})
        if not any(combination):
            alternatives.append({})
    return merge(alternatives)


@dataclass
class ChainSeen:
    """What the oracle learnt of one chain of one up node, for the network series."""

    read: bool
    councils: list[frozenset[str] | None] = field(default_factory=lambda: [None])
    hashes: list[str | None] = field(default_factory=lambda: [None])
    block_height: int | None = None
    views: list[Any] = field(default_factory=lambda: [None])  # consensus configurations


@dataclass
class NodeSeen:
    up: bool
    peer_ids: list[str | None] = field(default_factory=lambda: [None])
    peers: list[frozenset[str]] = field(default_factory=lambda: [frozenset()])
    chains: dict[str, ChainSeen] = field(default_factory=dict)
    node_ids: list[str | None] = field(default_factory=lambda: [None])  # remembered nodeId
    listed: frozenset[str] | None = None  # the chain ids listed, when one reading is sure
    listed_most: int = 0  # the most ids any reading of its listing holds


class Problems(list[str]):
    def add(self, message: str) -> None:
        if len(self) < 40:
            self.append(message)


def check(setup: Setup, cycles: Sequence[Cycle], samples: Samples) -> list[str]:
    """Every way ``samples`` (the exposition after the last of ``cycles``) breaks the
    contract; empty when it keeps it."""
    return _Oracle(setup, cycles, samples).run()


class _Oracle:
    def __init__(self, setup: Setup, cycles: Sequence[Cycle], samples: Samples) -> None:
        self.setup = setup
        self.cycles = cycles
        self.cycle = cycles[-1]
        self.samples = samples
        self.expected: Expectations = {}
        self.problems = Problems()
        self.nodes: dict[str, NodeSeen] = {}

    # the exposition, read back
    def sample(self, name: str, labels: Mapping[str, str]) -> float | None:
        return self.samples.get((name, label_set(labels)))

    def expect(self, name: str, labels: Mapping[str, str], expect: Expect) -> None:
        if expect.values:
            self.expected[(name, label_set(labels))] = expect

    def add(self, expectations: Expectations) -> None:
        self.expected.update({key: e for key, e in expectations.items() if e.values})

    def run(self) -> list[str]:
        self.exporter_series()
        for name, labels in self.setup.nodes:
            self.nodes[name] = self.node(name, dict(labels))
            self.request_phases(name, {"node": name, **dict(labels)})
        self.consistency()
        self.network()
        self.compare()
        return list(self.problems)

    def exporter_series(self) -> None:
        """Every family documented, with its labels; the exporter's own: present, with sane
        values."""
        documented = metrics_reference.families()
        static = {label for _, labels in self.setup.nodes for label, _ in labels}
        for (name, labels), value in self.samples.items():
            if name not in documented:
                self.problems.add(f"{name} is not in docs/metrics.md")
            elif extra := {k for k, _ in labels} - documented[name].labels - static:
                self.problems.add(
                    f"{name} has labels {sorted(extra)} docs/metrics.md does not list"
                )
            elif name.endswith("_total") != (documented[name].kind == "counter"):
                self.problems.add(f"{name} is documented as a {documented[name].kind}")
            if name == "ledger_exporter_build_info" and value != 1.0:
                self.problems.add(f"{name} is {value}, not 1")
            if name.endswith("_duration_seconds") and not value >= 0:
                self.problems.add(f"{name}{dict(labels)} is {value}")
            if name == "ledger_node_scrape_errors_total":
                found = dict(labels)
                if found.get("endpoint") not in ENDPOINTS or found.get("reason") not in REASONS:
                    self.problems.add(f"{name} has undocumented labels {found}")
            if name.endswith("_total") and not (value >= 0 and value == int(value)):
                self.problems.add(f"{name}{dict(labels)} counts {value}")
        for name in ("ledger_exporter_build_info", "ledger_exporter_cycle_duration_seconds"):
            if not any(key[0] == name for key in self.samples):
                self.problems.add(f"{name} is missing")

    def owned(self, key: Key) -> bool:
        """Samples the answers do not govern: the exporter's own state and timings."""
        name = key[0]
        return name.startswith("ledger_exporter_") or name in (
            "ledger_node_scrape_duration_seconds",
            "ledger_node_scrape_errors_total",
            "ledger_node_retry_after_total",  # the exporter's holding back, not a field
        )

    # --- one node ------------------------------------------------------------------------
    def node(self, name: str, config_labels: dict[str, str]) -> NodeSeen:
        base = {"node": name, **config_labels}
        up = self.up_sample("ledger_node_up", base)
        reading = read_health(self.cycle.answer(name, ["health"]), self.setup.max_bytes)
        last = self.last_success(name, up)
        self.expect("ledger_node_last_success_timestamp_seconds", base, last)
        if not self.judge(f"node {name} /health", up, reading, base, "health"):
            return NodeSeen(up=False, node_ids=self.remembered_ids(name, self.cycles[:-1]))
        seen = self.health(name, base, list(reading.documents))
        ids = [i for i in _node_ids(reading.documents) if i is not None]
        unsure = len(ids) != 1 or len(reading.documents) != 1
        earlier = self.remembered_ids(name, self.cycles[:-1]) if unsure else []
        seen.node_ids = list(dict.fromkeys([*ids, *earlier])) or [None]
        return seen

    def request_phases(self, name: str, base: dict[str, str]) -> None:
        """libcurl's timings of each kind of request (not a field: the exporter's own
        measure): only of an up node, only of kinds asked of it, every phase but ``tls`` over
        plain http; once the node is timed at all, its /health (answered this cycle) is."""
        family = "ledger_node_request_duration_seconds"
        timed = any(key[0] == family and _node_of(key[1], base) for key in self.samples)
        if self.sample("ledger_node_up", base) != 1.0 or not timed:
            return
        kinds = {
            _endpoint_of(segments)
            for cycle in self.cycles
            for segments, _ in cycle.requests.get(name, ())
        }
        for kind in sorted(kinds | {"health"}):
            for phase in PHASES:
                if phase == "tls":
                    continue  # never over plain http: any such sample is unexpected
                labels = {**base, "endpoint": kind, "phase": phase}
                value = self.sample(family, labels)
                seconds = 0.0 if value is None else value  # any: _duration_seconds are >= 0
                self.expect(family, labels, Expect((seconds,), kind == "health"))

    def remembered_ids(self, name: str, cycles: Sequence[Cycle]) -> list[str | None]:
        """The ``nodeId`` the exporter may remember for ``name`` from ``cycles``: that of the
        last /health read, or any of those of the reads that may have been the last."""
        found: list[str | None] = []
        for cycle in reversed(cycles):
            reading = read_health(cycle.answer(name, ["health"]), self.setup.max_bytes)
            found += _node_ids(reading.documents)
            if reading.documents and not reading.refusals and len(reading.documents) == 1:
                return list(dict.fromkeys(found))  # surely read: the search ends here
        return list(dict.fromkeys([*found, None]))

    def up_sample(self, family: str, labels: Mapping[str, str]) -> float | None:
        value = self.sample(family, labels)
        self.expect(family, labels, Expect((0.0, 1.0), True))
        return value

    def judge(
        self, what: str, up: float | None, reading: Reading, base: Mapping[str, str], endpoint: str
    ) -> bool:
        """Whether the part was read (its ``_up`` is 1), checking the contract allows it:
        read only what can be read; refused only what may be, with an error counted."""
        if up == 1.0:
            if not reading.documents:
                self.problems.add(f"{what} is up, but its answer cannot be read")
            return bool(reading.documents)
        if up == 0.0:
            if not reading.refusals:
                self.problems.add(f"{what} is down, but its answer is readable")
            counted = [
                self.sample(
                    "ledger_node_scrape_errors_total",
                    {**base, "endpoint": endpoint, "reason": reason},
                )
                for reason in reading.refusals
            ]
            if reading.refusals and not any(value and value >= 1 for value in counted):
                reasons = sorted(reading.refusals)
                self.problems.add(f"{what} is down with no {endpoint} error counted as {reasons}")
        return False

    def last_success(self, name: str, up: float | None) -> Expect:
        """The clock of the last cycle whose /health was read: this one when the node is up,
        else an earlier one (any of those whose answer may have been read)."""
        if up == 1.0:
            return must(self.cycle.clock)
        choices: list[float] = []
        for cycle in reversed(self.cycles[:-1]):
            reading = read_health(cycle.answer(name, ["health"]), self.setup.max_bytes)
            if reading.documents:
                choices.append(cycle.clock)
            if not reading.refusals:  # surely read: the search ends here
                return Expect(tuple(choices), True)
        return Expect(tuple(choices), False)

    def health(self, name: str, base: dict[str, str], documents: list[Obj]) -> NodeSeen:
        limit = self.setup.label_limit
        networks = children(documents, "network")
        network_ids = texts(networks, "peerId", limit)
        top_ids = texts(documents, "peerId", limit)
        peer_ids: list[str | None] = []
        for found in network_ids:  # an empty one is as good as none: the top-level may do
            peer_ids += [found] if found else [found, *top_ids]
        peer_ids = list(dict.fromkeys(peer_ids))
        self.add(
            one_sample(
                "ledger_node_info",
                base,
                ("node_version", "node_id", "peer_id"),
                [
                    texts(documents, "nodeVersion", limit),
                    texts(documents, "nodeId", limit),
                    peer_ids,
                ],
            )
        )
        self.expect("ledger_node_peers", base, field_expect(networks, "peerCount", count))
        listings = children(documents, "blockchains")
        self.expect(
            "ledger_node_blockchains", base, field_expect(documents, "blockchains", _list_length)
        )
        seen = NodeSeen(up=True, peer_ids=peer_ids, peers=_peer_sets(networks))
        lists = [listing for listing in listings if isinstance(listing, list)]
        seen.listed_most = max(map(len, lists), default=0)
        if len(listings) == 1 and len(lists) == 1:
            entries = lists[0]
            if all(isinstance(e, str) and e and text(e, limit) == e for e in entries):
                seen.listed = frozenset(entries)
        sure, maybe = self.chain_ids(listings)
        self.chains(name, base, sure, maybe, seen)
        self.watch(name, base, sure, maybe)
        return seen

    def chain_ids(self, listings: list[Any]) -> tuple[list[str], set[str]]:
        """The ids a node lists that must be polled, and those that may be: readable,
        non-empty, within the label bound, once each; past ``max_blockchains_per_node``
        (or with ``blockchains`` sent twice) any of them."""
        per_listing: list[list[str]] = []
        maybe: set[str] = set()
        for listing in listings:
            ids: list[str] = []
            for entry in listing if isinstance(listing, list) else ():
                kept = text(entry, self.setup.label_limit)
                if kept == "":
                    maybe.add(kept)
                elif kept is not None and kept not in ids:
                    ids.append(kept)
            per_listing.append(ids)
        if len(per_listing) == 1 and len(per_listing[0]) <= self.setup.max_chains:
            return per_listing[0], maybe
        return [], maybe | {i for ids in per_listing for i in ids}

    # --- chains ----------------------------------------------------------------------------
    def chains(
        self, name: str, base: dict[str, str], sure: list[str], maybe: set[str], seen: NodeSeen
    ) -> None:
        polled = {
            dict(labels)["blockchain"]
            for (family, labels) in self.samples
            if family == "ledger_blockchain_up" and _node_of(labels, base)
        }
        for chain in sure:
            if chain not in polled:
                self.problems.add(f"node {name} lists chain {chain!r}, which is not polled")
        for chain in polled - set(sure) - maybe:
            self.problems.add(f"node {name} has series of chain {chain!r} it does not list")
        if len(polled) > self.setup.max_chains:
            self.problems.add(f"node {name} has {len(polled)} chains polled")
        for chain in sorted(polled & (set(sure) | maybe)):
            seen.chains[chain] = self.chain(name, {**base, "blockchain": chain})

    def chain(self, name: str, labels: dict[str, str]) -> ChainSeen:
        chain = labels["blockchain"]
        up = self.up_sample("ledger_blockchain_up", labels)
        reading = read_answer(self.cycle.answer(name, ["blockchains", chain]), self.setup.max_bytes)
        seen = ChainSeen(read=False)
        base = {k: v for k, v in labels.items() if k != "blockchain"}
        if self.judge(f"chain {chain!r} of node {name}", up, reading, base, "blockchain"):
            seen = self.status(labels, list(reading.documents))
            self.consensus_history(name, labels, list(reading.documents))
        self.block(name, chain, seen)
        return seen

    def status(self, labels: dict[str, str], documents: list[Obj]) -> ChainSeen:
        consensus = children(documents, "consensus")
        # the plain gauges as the page says (each family's "Read from" line): a field of the
        # status itself or of its consensus settings, read as a count, flag, ...
        for family, (path, how) in metrics_reference.sources(CHAIN_STATUS).items():
            place, _, key = path.rpartition(".")
            within = {"": documents, "consensus": consensus}.get(place)
            if within is not None and how in READ_AS:
                self.expect(family, labels, field_expect(within, key, READ_AS[how]))
        sessions = children(documents, "voteSessions")
        self.expect(
            "ledger_blockchain_vote_sessions",
            labels,
            either(must(0.0) if s is ABSENT else length(s, Obj) for s in sessions),
        )
        self.expect("ledger_blockchain_vote_round", labels, _highest_round(sessions))
        required = _highest_round(sessions, "consensusRequired")
        self.expect("ledger_blockchain_vote_consensus_required", labels, required)
        limit = self.setup.label_limit
        kinds = [texts(consensus, "consensusType", limit), texts(documents, "keyType", limit)]
        names = ("consensus_type", "key_type")
        self.add(one_sample("ledger_blockchain_consensus_info", labels, names, kinds))
        self.features(labels, children(documents, "features"))
        councils = [_council(c) for c in children(documents, "councilMembers")]
        return ChainSeen(
            read=True,
            councils=list(dict.fromkeys(c for cs in councils for c in cs)),
            views=list(dict.fromkeys(v for d in documents for v in _views(d, labels["node"]))),
        )

    # --- consensus health, across cycles ---------------------------------------------------
    def consensus_history(self, name: str, labels: dict[str, str], documents: list[Obj]) -> None:
        """The counters and the oldest session's age of a chain read this cycle."""
        chain = labels["blockchain"]
        earlier = [self.chain_state(cycle, name, chain) for cycle in self.cycles[:-1]]
        alternatives: list[Expectations] = []
        for document in documents:
            history = History(self.setup.label_limit, self.setup.max_sessions)
            for cycle, state in zip(self.cycles, earlier, strict=False):
                history.fold(cycle.clock, state)
            history.fold(self.cycle.clock, document)
            alternatives.append(self.consensus_samples(history, labels, document))
        self.add(merge(alternatives))

    def chain_state(self, cycle: Cycle, node: str, chain: str) -> Obj | object | None:
        """How ``chain`` of ``node`` was read in ``cycle``: its one document, None when surely
        not read, UNSURE otherwise."""
        health = read_health(cycle.answer(node, ["health"]), self.setup.max_bytes)
        if not health.documents:
            return None
        if health.refusals or len(health.documents) != 1:
            return UNSURE
        sure, maybe = self.chain_ids(children(health.documents, "blockchains"))
        if chain in maybe:
            return UNSURE
        if chain not in sure:
            return None
        status = read_answer(cycle.answer(node, ["blockchains", chain]), self.setup.max_bytes)
        if not status.documents:
            return None
        if status.refusals or len(status.documents) != 1:
            return UNSURE
        return status.documents[0]

    def consensus_samples(
        self, history: History, labels: dict[str, str], document: Obj
    ) -> Expectations:
        found: Expectations = {}
        counters = (
            ("ledger_blockchain_vote_round_changes_total", history.rounds),
            ("ledger_blockchain_council_changes_total", history.council_changes),
        )
        for family, value in counters:
            found[(family, label_set(labels))] = ANYTHING if history.unsure else must(value)
        age = history.oldest_age()
        if age is not None:
            found[("ledger_blockchain_vote_session_age_seconds", label_set(labels))] = age
        leader = "ledger_blockchain_leader_failed_rounds_total"
        councils = children([document], "councilMembers")
        sure, maybe = _leader_keys(councils, self.setup.label_limit)
        failures = {} if history.unsure else history.failures
        crowded = len(sure | maybe | set(failures)) > self.setup.max_leaders
        for key in sorted(sure | maybe | set(failures)):
            count = float(failures.get(key, 0))
            labelled = (leader, label_set({**labels, "leader": key}))
            if history.unsure or crowded:  # the first ones by name, or any count: may be
                found[labelled] = Expect((count,), False, math.inf)
            else:
                found[labelled] = must(count) if key in sure or key in failures else may(count)
        if history.unsure:  # any leader series may be there, at any count
            for sample in self.samples:
                if sample[0] == leader and _node_of(sample[1], labels):
                    found.setdefault(sample, Expect((0.0,), False, math.inf))
        return found

    def features(self, labels: dict[str, str], maps: list[Any]) -> None:
        alternatives: list[Expectations] = []
        for flags in maps:
            found: Expectations = {}
            if not isinstance(flags, Obj):
                alternatives.append(found)
                continue
            for name in flags.names():
                read = either(flag(value) for value in flags.all(name))
                kept = text(name, self.setup.label_limit)
                if read.values and kept is not None:
                    key = (
                        "ledger_blockchain_feature_enabled",
                        label_set({**labels, "feature": kept}),
                    )
                    found[key] = read
            if len(found) > self.setup.max_features:  # the first ones by name: any may be
                found = {key: Expect(e.values, False) for key, e in found.items()}
            alternatives.append(found)
        self.add(merge(alternatives))

    def block(self, name: str, chain: str, seen: ChainSeen) -> None:
        """The checkpoint block asked of the node this cycle, if any: the hashes it may give."""
        asked = [
            query
            for segments, query in self.cycle.requests.get(name, ())
            if segments == ("blockchains", chain, "blocks")
        ]
        if not asked:
            return
        heights = {value for key, value in asked[0] if key == "height"}
        seen.block_height = int(next(iter(heights))) if len(heights) == 1 else None
        answer = self.cycle.answer(name, ["blockchains", chain, "blocks"], asked[0])
        reading = read_answer(answer, self.setup.max_bytes)
        hashes: list[str | None] = [None] if reading.refusals else []
        for document in reading.documents:
            hashes += _hashes(document, self.setup.hash_fields)
        if not seen.read:  # "the nodes whose block was read": a chain unread may count or not
            hashes.append(None)
        seen.hashes = list(dict.fromkeys(hashes))

    # --- watch lists -----------------------------------------------------------------------
    def watch(self, name: str, base: dict[str, str], sure: list[str], maybe: set[str]) -> None:
        """Each watched object on a chain the node lists: ``_up`` required where it surely
        lists it, and its series from its answer when up."""
        listed = set(sure) | maybe
        for contract in self.setup.contracts:
            if contract.blockchain not in listed:
                continue
            labels = {**base, "blockchain": contract.blockchain, "contract": contract.name}
            path = ["blockchains", contract.blockchain, "contracts", contract.address]
            certain = contract.blockchain in sure
            documents = self.watched(name, "contract", labels, path, sure=certain)
            if documents is not None:
                self.contract(labels, documents)
            state = [*path, "state"]
            documents = self.watched(name, "contract_state", labels, state, sure=certain)
            if documents is not None:
                self.state(labels, documents, contract.state_keys)
        for wallet in self.setup.wallets:
            if wallet.blockchain not in listed:
                continue
            labels = {**base, "blockchain": wallet.blockchain, "wallet": wallet.name}
            query = (("blockchainId", wallet.blockchain),)
            path = ["wallets", wallet.address]
            certain = wallet.blockchain in sure
            documents = self.watched(name, "wallet", labels, path, sure=certain, query=query)
            if documents is not None:
                self.wallet(labels, documents)

    def watched(
        self,
        name: str,
        endpoint: str,
        labels: dict[str, str],
        path: list[str],
        *,
        sure: bool,
        query: Labels = (),
    ) -> list[Obj] | None:
        family = {"contract": "ledger_contract_up", "contract_state": "ledger_contract_state_up"}
        up_family = family.get(endpoint, "ledger_wallet_up")
        up = self.sample(up_family, labels)
        self.expect(up_family, labels, Expect((0.0, 1.0), sure))
        if up is None:
            return None
        reading = read_answer(self.cycle.answer(name, path, query), self.setup.max_bytes)
        base = {k: v for k, v in labels.items() if k not in ("blockchain", "contract", "wallet")}
        if self.judge(f"{endpoint} {path} of node {name}", up, reading, base, endpoint):
            return list(reading.documents)
        return None

    def contract(self, labels: dict[str, str], documents: list[Obj]) -> None:
        alternatives: list[Expectations] = []
        for status in texts(documents, "status", self.setup.label_limit):
            found: Expectations = {}
            if status is not None:
                for other in dict.fromkeys((*CONTRACT_STATUSES, status)):
                    key = ("ledger_contract_status", label_set({**labels, "status": other}))
                    found[key] = must(1.0 if other == status else 0.0)
            alternatives.append(found)
            if status == "":  # "" is a status sent, or none: either
                alternatives.append({})
        self.add(merge(alternatives))
        self.expect("ledger_contract_version", labels, field_expect(documents, "version", count))
        limit = self.setup.label_limit
        fields = [texts(documents, key, limit) for key in ("address", "vmType", "codeHash")]
        names = ("address", "vm_type", "code_hash")
        self.add(one_sample("ledger_contract_info", labels, names, fields))

    def state(self, labels: dict[str, str], documents: list[Obj], keys: Sequence[str]) -> None:
        version = field_expect(documents, "version", count)
        self.expect("ledger_contract_state_version", labels, version)
        for key in keys:
            values = children(documents, "state")
            for part in key.split("."):
                values = [
                    v for parent in values if isinstance(parent, Obj) for v in parent.all(part)
                ]
            read = either(flag(v) if isinstance(v, bool) else number(v) for v in values)
            self.expect("ledger_contract_state_value", {**labels, "key": key}, read)

    def wallet(self, labels: dict[str, str], documents: list[Obj]) -> None:
        self.expect("ledger_wallet_enabled", labels, field_expect(documents, "enabled", flag))
        satellites = field_expect(documents, "satelliteWallets", _list_length)
        self.expect("ledger_wallet_satellite_wallets", labels, satellites)
        alternatives: list[Expectations] = []
        for groups in children(documents, "authGroups"):
            found: Expectations = {}
            if not isinstance(groups, Obj):
                alternatives.append(found)
                continue
            readable = 0
            for group in groups.names():
                flags = groups.all(group)  # sent twice, as flags and as no object: either
                kept = text(group, self.setup.label_limit)
                any_flag = False
                for permission in PERMISSIONS:
                    read = field_expect(flags, permission, flag)
                    any_flag |= bool(read.values)
                    if read.values and kept is not None:
                        extra = {"group": kept, "permission": permission}
                        found[("ledger_wallet_permission", label_set({**labels, **extra}))] = read
                readable += any_flag and kept is not None
            if readable > self.setup.max_groups:  # the first ones by name: any may be
                found = {key: Expect(e.values, False) for key, e in found.items()}
            alternatives.append(found)
        self.add(merge(alternatives))
        limit = self.setup.label_limit
        fields = [texts(documents, key, limit) for key in ("address", "keyType", "publicKey")]
        names = ("address", "key_type", "public_key")
        self.add(one_sample("ledger_wallet_info", labels, names, fields))

    # --- series computed from other series --------------------------------------------------
    def consistency(self) -> None:
        """Blocks behind, seconds behind and the height's last change, from the exported
        heights: the chain's head (the highest height a strict majority of the not-syncing
        readers reached) minus the node's, never below 0; 0 at or above the head, else the
        time since one of the cycles; the clock of the cycle that first saw the node's
        current height. Reorganisations: a count no higher than the cycles
        after the first."""
        heights: dict[Key, float] = {
            key: value
            for key, value in self.samples.items()
            if key[0] == "ledger_blockchain_height"
        }
        # the chain's head: the highest height a strict majority of the not-syncing readers
        # reached (of all of them when every one is syncing)
        readers: dict[str, tuple[list[float], list[float]]] = {}
        for (_, labels), value in heights.items():
            chain = dict(labels)["blockchain"]
            steady, syncing = readers.setdefault(chain, ([], []))
            is_syncing = self.samples.get(("ledger_blockchain_syncing", labels)) == 1.0
            (syncing if is_syncing else steady).append(value)
        highest: dict[str, float] = {}
        for chain, (steady, syncing) in readers.items():
            ranked = sorted(steady or syncing, reverse=True)
            highest[chain] = ranked[len(ranked) // 2]
        # how long ago the head first passed a node's height: 0 at the head, else the time
        # since one of the cycles (which one, the heights of every cycle would say)
        since = tuple(dict.fromkeys(self.cycle.clock - cycle.clock for cycle in self.cycles))
        # a rewritten block can be counted at most once a cycle after the first, on any chain
        # read (with or without a height) whose block was read before
        reorgs = Expect(tuple(float(n) for n in range(len(self.cycles))), False)
        for (name, labels), up in self.samples.items():
            if name == "ledger_blockchain_up" and up == 1.0:
                self.expect("ledger_blockchain_reorgs_total", dict(labels), reorgs)
        for (_, labels), value in heights.items():
            found = dict(labels)
            chain = found["blockchain"]
            lag = max(0.0, highest[chain] - value)
            self.expect("ledger_blockchain_blocks_behind", found, must(lag))
            behind = must(0.0) if value >= highest[chain] else Expect(since, True)
            self.expect("ledger_blockchain_behind_seconds", found, behind)
            self.expect(
                "ledger_blockchain_height_last_change_timestamp_seconds",
                found,
                self.height_seen_since(found["node"], chain, value),
            )

    def height_seen_since(self, node: str, chain: str, height: float) -> Expect:
        clock = self.cycle.clock
        for cycle in reversed(self.cycles[:-1]):
            before = self.definite_height(cycle, node, chain)
            if before is None or before != height:
                break
            clock = cycle.clock
        return must(clock)

    def definite_height(self, cycle: Cycle, node: str, chain: str) -> float | None:
        """The height ``node`` surely reported for ``chain`` in ``cycle`` (None: not sure)."""
        health = read_health(cycle.answer(node, ["health"]), self.setup.max_bytes)
        if health.refusals or len(health.documents) != 1:
            return None
        sure, _ = self.chain_ids(children(health.documents, "blockchains"))
        status = read_answer(cycle.answer(node, ["blockchains", chain]), self.setup.max_bytes)
        if chain not in sure or status.refusals or len(status.documents) != 1:
            return None
        read = field_expect(status.documents, "blockHeight", count)
        return read.values[0] if read.required and len(read.values) == 1 else None

    def network(self) -> None:
        """The network series: each reading the answers allow is tried; the exposition must
        be one of them."""
        up = {name: seen for name, seen in self.nodes.items() if seen.up}
        chains = sorted({chain for seen in up.values() for chain in seen.chains})
        for chain in chains:
            readers = {n: s.chains[chain] for n, s in up.items() if chain in s.chains}
            self.one_of(f"the checkpoint of {chain!r}", self.checkpoints(chain, readers))
            self.one_of(f"the councils of {chain!r}", self.councils(chain, readers))
            self.one_of(f"the configurations of {chain!r}", self.configurations(chain, readers))
        self.one_of("the peer partitions", self.partitions(up))
        self.unexpected_chains(up)

    def unexpected_chains(self, up: dict[str, NodeSeen]) -> None:
        """The chains each up node alone lists (when two or more list chains; no fleet pins
        expect.blockchains): exactly when every listing is sure, else at most all it lists."""
        family = "ledger_node_unexpected_blockchains"
        listed = {name: seen.listed for name, seen in up.items()}
        if any(ids is None for ids in listed.values()):
            for name, seen in up.items():
                allowed = tuple(float(n) for n in range(seen.listed_most + 1))
                self.expect(family, self.labels(name), Expect(allowed, True))
            return
        sure = {name: ids or frozenset() for name, ids in listed.items()}
        listers = sum(1 for ids in sure.values() if ids)
        for name, ids in sure.items():
            others = [o for other, o in sure.items() if other != name]
            alone = [c for c in ids if listers >= 2 and not any(c in o for o in others)]
            self.expect(family, self.labels(name), must(float(len(alone))))

    def labels(self, node: str, **extra: str) -> dict[str, str]:
        return {"node": node, **dict(dict(self.setup.nodes)[node]), **extra}

    def checkpoints(self, chain: str, readers: dict[str, ChainSeen]) -> Iterator[Expectations]:
        names = sorted(readers)
        asked = {s.block_height for s in readers.values() if s.block_height is not None}
        for hashes in itertools.product(*(readers[n].hashes for n in names)):
            compared = [(n, h) for n, h in zip(names, hashes, strict=True) if h is not None]
            if not compared:
                yield {}
                continue
            found: Expectations = {}
            height = next(iter(asked)) if len(asked) == 1 else None
            if height is not None:
                key = ("ledger_network_blockchain_checkpoint_height", (("blockchain", chain),))
                found[key] = must(float(height))
            counts = _majority([h for _, h in compared])
            key = ("ledger_network_blockchain_checkpoint_hashes", (("blockchain", chain),))
            found[key] = must(float(len(counts[0])))
            for node, value in compared:
                labels = label_set(self.labels(node, blockchain=chain))
                found[("ledger_blockchain_checkpoint_agrees", labels)] = must(
                    1.0 if value == counts[1] else 0.0
                )
            yield found

    def councils(self, chain: str, readers: dict[str, ChainSeen]) -> Iterator[Expectations]:
        """Council views and agreement, and the majority's members that are polled nodes'
        remembered ``nodeId`` (and up and reading the chain): every reading tried."""
        names = sorted(n for n, s in readers.items() if s.read)
        polled = sorted(self.nodes)
        choices = [readers[n].councils for n in names] + [self.nodes[n].node_ids for n in polled]
        network = (("blockchain", chain),)
        for combination in itertools.product(*choices):
            councils, ids = combination[: len(names)], combination[len(names) :]
            compared = [(n, c) for n, c in zip(names, councils, strict=True) if c is not None]
            if not compared:
                yield {}
                continue
            distinct, winner = _majority([c for _, c in compared])
            found: Expectations = {
                ("ledger_network_blockchain_council_views", network): must(float(len(distinct)))
            }
            for node, council in compared:
                labels = label_set(self.labels(node, blockchain=chain))
                found[("ledger_blockchain_council_agrees", labels)] = must(
                    1.0 if council == winner else 0.0
                )
            if winner is not None:
                keys = dict(zip(polled, ids, strict=True))
                members = winner & {i for i in ids if i is not None}
                reading = members & {keys[n] for n in names}
                found[("ledger_network_blockchain_council_members_polled", network)] = must(
                    float(len(members))
                )
                found[("ledger_network_blockchain_council_members_up", network)] = must(
                    float(len(reading))
                )
            yield found

    def configurations(self, chain: str, readers: dict[str, ChainSeen]) -> Iterator[Expectations]:
        """Consensus configurations compared by value among the nodes that read the chain."""
        names = sorted(n for n, s in readers.items() if s.read)
        for views in itertools.product(*(readers[n].views for n in names)):
            compared = [(n, v) for n, v in zip(names, views, strict=True) if v is not None]
            if not compared:
                yield {}
                continue
            distinct, winner = _majority([v for _, v in compared])
            network = (("blockchain", chain),)
            found: Expectations = {
                ("ledger_network_blockchain_consensus_views", network): must(float(len(distinct)))
            }
            for node, view in compared:
                labels = label_set(self.labels(node, blockchain=chain))
                found[("ledger_blockchain_consensus_agrees", labels)] = must(
                    1.0 if view == winner else 0.0
                )
            yield found

    def partitions(self, up: dict[str, NodeSeen]) -> Iterator[Expectations]:
        if not up:
            yield {}
            return
        names = sorted(up)
        choices = [list(itertools.product(up[n].peer_ids, up[n].peers)) for n in names]
        for combination in itertools.product(*choices):
            ids = {n: c[0] for n, c in zip(names, combination, strict=True)}
            lists = {n: c[1] for n, c in zip(names, combination, strict=True)}
            links = {
                n: {m for m in names if m != n and (ids[m] in lists[n] or ids[n] in lists[m])}
                for n in names
            }
            sizes = _components(links)
            found: Expectations = {
                ("ledger_network_peer_partitions", ()): must(float(len(sizes))),
                ("ledger_network_peer_largest_partition_nodes", ()): must(float(max(sizes))),
            }
            for node in names:
                labels = label_set(self.labels(node))
                found[("ledger_node_polled_peers", labels)] = must(float(len(links[node])))
            yield found

    def one_of(self, what: str, outcomes: Iterable[Expectations]) -> None:
        """The exposition's samples of these keys must be exactly one of ``outcomes``."""
        listed = list(itertools.islice(outcomes, 4096))
        keys = {key for outcome in listed for key in outcome}
        for outcome in listed:
            if all(self.matches(key, outcome.get(key, NEVER)) for key in keys):
                self.expected.update({key: outcome.get(key, NEVER) for key in keys})
                return
        shown = {_show(key): self.samples[key] for key in keys if key in self.samples}
        self.problems.add(f"{what} match no reading of the answers: {shown}")
        for key in keys:  # reported once here, not again as missing or unexpected
            self.expected[key] = (
                Expect((self.samples[key],), False) if key in self.samples else NEVER
            )

    def matches(self, key: Key, expect: Expect) -> bool:
        value = self.samples.get(key)
        if value is None:
            return not expect.required
        return expect.allows(value)

    def compare(self) -> None:
        for key, expect in self.expected.items():
            value = self.samples.get(key)
            if value is None:
                if expect.required:
                    self.problems.add(f"missing {_show(key)} (expected {list(expect.values)})")
            elif not expect.allows(value):
                self.problems.add(f"{_show(key)} is {value}, expected {list(expect.values)}")
        for key, value in self.samples.items():
            if key not in self.expected and not self.owned(key):
                self.problems.add(f"unexpected {_show(key)} {value}: no field sent gives it")


def _show(key: Key) -> str:
    name, labels = key
    return name + "{" + ",".join(f"{k}={v!r}" for k, v in labels) + "}"


def _node_of(labels: Labels, base: Mapping[str, str]) -> bool:
    found = dict(labels)
    return all(found.get(k) == v for k, v in base.items())


def _endpoint_of(segments: Sequence[str]) -> str:
    """The ``endpoint`` label of a request to the API path ``segments`` (docs/metrics.md)."""
    if segments[:1] == ("health",):
        return "health"
    if segments[:1] == ("wallets",):
        return "wallet"
    if len(segments) >= 4 and segments[2] == "contracts":
        return "contract_state" if len(segments) >= 5 else "contract"
    return "block" if len(segments) >= 3 else "blockchain"


def _list_length(value: Any) -> Expect:
    return length(value, list)


#: The answer the chain families are read from, as docs/metrics.md names it.
CHAIN_STATUS = "GET /blockchains/{id}"
#: How docs/metrics.md says a field is read ("Read from: ..., read as a count"), as the
#: oracle reads it; the vote sessions' count (absent: 0) and highest round are read apart.
READ_AS: dict[str, Callable[[Any], Expect]] = {
    "a count": count,
    "a flag": flag,
    "a timestamp": timestamp,
    "a duration": duration,
    "a number": number,
    "the length of a list": _list_length,
}


def _highest_round(sessions: list[Any], field_name: str = "round") -> Expect:
    """The highest ``round`` (or ``field_name``) among the vote sessions: sure values set the floor,
    values that may be read (below zero, odd strings, a session sent twice) may top it."""
    alternatives = []
    for listing in sessions:
        if not isinstance(listing, Obj):
            alternatives.append(NEVER)
            continue
        sure: list[float] = []
        maybe: list[float] = []
        for key in listing.names():
            values = listing.all(key)
            for session in values:
                read = field_expect([session], field_name, count)
                maybe += read.values
                if read.required and len(values) == 1 and read.values:
                    sure.append(min(read.values))  # a field sent twice: either may be read
        floor = max(sure) if sure else -math.inf
        allowed = tuple(dict.fromkeys(v for v in (*sure, *maybe) if v >= floor))
        alternatives.append(Expect(allowed, bool(sure)))
    return either(alternatives)


def _council(value: Any) -> list[frozenset[str] | None]:
    """The council set a ``councilMembers`` value may be read as: every member readable (an
    empty one, or one over the text cap, may make the list unreadable)."""
    if not isinstance(value, list):
        return [None]
    if not all(readable_text(member) for member in value):
        return [None]
    members = frozenset(value)
    if all(0 < len(m) <= bounds.MAX_TEXT_CHARS for m in value):
        return [members]
    return [None, members]


def _peer_sets(networks: list[Obj]) -> list[frozenset[str]]:
    """The ``networkPeers`` sets a node may be read as listing."""
    found: list[frozenset[str]] = []
    for value in children(networks, "networkPeers"):
        if not isinstance(value, list):
            found.append(frozenset())
            continue
        good = frozenset(
            v for v in value if readable_text(v) and 0 < len(v) <= bounds.MAX_TEXT_CHARS
        )
        found.append(good)
        if len(good) != len(set(map(repr, value))):
            found.append(frozenset())  # a garbled list may be no list at all
    return list(dict.fromkeys(found)) or [frozenset()]


def _hashes(block: Obj, fields: Sequence[str]) -> list[str | None]:
    """The hash a block may give: the first of ``fields`` present that holds a non-empty
    readable string; a field present but unreadable may end the search or be passed over."""
    if not fields:
        return [None]
    values = block.all(fields[0])
    if not values:
        return _hashes(block, fields[1:])
    found: list[str | None] = []
    for value in values:
        if readable_text(value) and 0 < len(value) <= bounds.MAX_TEXT_CHARS:
            found.append(value)
        else:
            found += [None, *_hashes(block, fields[1:])]
    return list(dict.fromkeys(found))


def _majority(values: list[Any]) -> tuple[set[Any], Any]:
    """The distinct values, and the one a strict majority holds (None when none does)."""
    distinct = set(values)
    winner = next((v for v in distinct if 2 * values.count(v) > len(values)), None)
    return distinct, winner


def _components(links: dict[str, set[str]]) -> list[int]:
    """The sizes of the groups ``links`` make."""
    seen: set[str] = set()
    sizes = []
    for start in links:
        if start in seen:
            continue
        before = len(seen)
        stack = [start]
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack += links[node] - seen
        sizes.append(len(seen) - before)
    return sizes


# --- consensus health: sessions and councils across cycles, configurations by value --------

#: A chain whose reading in a cycle is not sure (several readings, or maybe refused).
UNSURE = object()
#: Where the exporter's counters stop.
MAX_COUNT = 2**64 - 1
#: Any value, but a sample there.
ANYTHING = Expect((0.0,), True, math.inf)
Sessions = dict[str, tuple[float | None, str | None]]


class History:
    """One node's chain followed through the cycles as docs/metrics.md says: the sessions open at
    the last read (by key) with their first sightings, rounds risen between consecutive
    reads (against the leader of the earlier one), council changes. Once a cycle's reading
    is not sure, ``unsure`` is set and the counters may hold any count."""

    def __init__(self, label_limit: int, max_sessions: int) -> None:
        self.label_limit, self.max_sessions = label_limit, max_sessions
        self.unsure = False
        self.paired = False  # the last cycle read the chain: its rounds pair with the next
        self.sessions: Sessions = {}
        self.first_seen: dict[str, float] = {}
        self.current: Sessions | None = {}  # this cycle's sessions (None: not sure)
        self.council: frozenset[str] | None = None
        self.rounds = 0.0
        self.council_changes = 0.0
        self.failures: dict[str, int] = {}
        self.clock = 0.0

    def fold(self, clock: float, state: Obj | object | None) -> None:
        """One cycle: the chain's document, None when not read, UNSURE."""
        self.clock = clock
        if state is None:
            self.paired = False
            return
        if not isinstance(state, Obj):
            self.unsure, self.paired = True, False
            return
        self.current = _sessions(state, self.label_limit, self.max_sessions)
        council = _one_council(state)
        if self.current is None or council is UNSURE:
            self.unsure = True
        if self.unsure or self.current is None:
            return
        if self.paired:
            self._rises(self.current)
        self.first_seen = {
            sid: self.first_seen[sid] if sid in self.sessions else clock for sid in self.current
        }
        self.sessions, self.paired = self.current, True
        if isinstance(council, frozenset):
            if self.council is not None and council != self.council:
                self.council_changes += 1
            self.council = council

    def _rises(self, sessions: Sessions) -> None:
        for sid, (now, _) in sessions.items():
            before, leader = self.sessions.get(sid, (None, None))
            if before is None or now is None or now <= before:
                continue
            rise = int(now - before)  # counters stop at 2**64 - 1 (docs/metrics.md says so)
            self.rounds = min(self.rounds + rise, MAX_COUNT)
            if leader is not None:
                self.failures[leader] = min(self.failures.get(leader, 0) + rise, MAX_COUNT)

    def oldest_age(self) -> Expect | None:
        """The oldest open session's age now; None when surely none is open."""
        if self.current is None:
            return Expect((0.0,), False, math.inf)
        if not self.current:
            return None
        if self.unsure:
            return ANYTHING
        return must(self.clock - min(self.first_seen[sid] for sid in self.current))


def _sessions(document: Obj, label_limit: int, most: int) -> Sessions | None:
    """The sessions a status document surely holds, by key: round and leader; None when they
    may be read several ways (a key sent twice, a round that may or may not be read, more
    sessions than followed)."""
    listings = document.all("voteSessions")
    if len(listings) > 1:
        return None
    if not listings or not isinstance(listings[0], Obj):
        return {}
    listing = listings[0]
    if len(listing.pairs) != len(listing.names()):
        return None
    found: Sessions = {}
    for sid, session in listing.pairs:
        if not readable_text(sid) or not 0 < len(sid) <= bounds.MAX_SESSION_ID_CHARS:
            continue  # not followed
        if not isinstance(session, Obj):
            found[sid] = (None, None)
            continue
        rounds, leaders = session.all("round"), session.all("currentLeader")
        if len(rounds) > 1 or len(leaders) > 1:
            return None
        read = count(rounds[0]) if rounds else NEVER
        if read.values and not read.required:
            return None
        leader = text(leaders[0], label_limit) if leaders else None
        found[sid] = (read.values[0] if read.values else None, leader or None)
    return found if len(found) <= most else None


def _one_council(document: Obj) -> frozenset[str] | object | None:
    """The council set a document surely gives (None: none), or UNSURE."""
    values = document.all("councilMembers")
    if not values:
        return None
    readings = _council(values[0])
    return readings[0] if len(values) == 1 and len(readings) == 1 else UNSURE


def _leader_keys(values: list[Any], label_limit: int) -> tuple[set[str], set[str]]:
    """The council keys that surely get a leader series, and those that may."""
    sets = [
        {key for key in council if 0 < len(key) <= label_limit} if council is not None else set()
        for value in values
        for council in _council(value)
    ]
    if not sets:
        return set(), set()
    sure = set.intersection(*sets)
    return sure, set.union(*sets) - sure


def _node_ids(documents: Sequence[Obj]) -> list[str | None]:
    """The ``nodeId`` values /health answers may give as council keys (None: none readable):
    a key is no label, so one over the label length still counts, up to the text cap."""
    found: list[str | None] = []
    for value in children(documents, "nodeId"):
        kept = text(value, bounds.MAX_TEXT_CHARS) if value is not ABSENT else None
        found.append(kept or None)
    return list(dict.fromkeys(found))


#: A setting that may be compared other than the oracle reads it: it may differ from all.
_ELSE = object()


def _setting(value: Any) -> list[Any]:
    """How a setting compares by value: numbers (and strings of one) as numbers, Go
    durations as seconds, other strings as sent; _ELSE among them where the contract leaves
    the reading open (lenient number forms, NaN, nested values)."""
    if value is ABSENT or value is None:
        return [None]
    if isinstance(value, bool):
        return [("flag", value)]
    if isinstance(value, Num):
        amount = value.value
        return [("number", amount)] if math.isfinite(amount) else [_ELSE]
    if isinstance(value, str):
        if _JSON_NUMBER.fullmatch(value) and math.isfinite(float(value)):
            return [("number", float(value))]
        read = duration(value)
        if read.values:
            exact = read.required and len(read.values) == 1
            return [("number", read.values[0])] if exact else [_ELSE]
        if _DECIMAL.fullmatch(value) or not readable_text(value):
            return [_ELSE]
        return [("text", value)]
    return [_ELSE]  # NaN-like constants, nested objects and arrays


def _settings(value: Any) -> list[Any]:
    """An object of settings compared by value (key order ignored; a key sent twice read
    either way), or a lone setting."""
    if not isinstance(value, Obj):
        return _setting(value)
    choices = [
        list(dict.fromkeys((key, form) for item in value.all(key) for form in _setting(item)))
        for key in value.names()
    ]
    found: list[Any] = []
    for combination in itertools.islice(itertools.product(*choices), 64):
        unsure = any(form is _ELSE for _, form in combination)
        found.append(_ELSE if unsure else frozenset(combination))
    return list(dict.fromkeys(found))


def _views(document: Obj, node: str) -> list[Any]:
    """The consensus configurations a status document may give (None: ``consensus`` is no
    object, so no view); one the oracle cannot read surely is this node's own."""
    found: list[Any] = []
    for consensus in children([document], "consensus"):
        if not isinstance(consensus, Obj):
            found.append(None)
            continue
        for key_type in children([document], "keyType"):
            for features in children([document], "features"):
                for parts in itertools.product(
                    _settings(consensus), _setting(key_type), _settings(features)
                ):
                    found.append(("else", node) if _ELSE in parts else parts)
    return list(dict.fromkeys(found))
