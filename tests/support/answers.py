"""Node answers for the generated suites: valid ones drawn from the node API document, and
mutators that break them the ways nodes in the field do.

Valid answers come from ``api/ledger-node-api.yaml`` (through :mod:`tests.nodeapi`): each
object schema becomes a fixed-dictionaries strategy of its named properties, and every other
schema (strings with a pattern or a format, counts, booleans, anything-goes values) is drawn by
hypothesis-jsonschema. Objects are built here, once, rather than by hypothesis-jsonschema per
draw: the same answers, five times faster.

Mutators are composable strategies over the drawn document and then over its bytes:

- :data:`DOCUMENT_MUTATORS` replace the value at one place of the document, a documented
  field mostly (a missing or null field, a wrong type, a number as a string, huge,
  negative, NaN-like and -0 numbers, deep nesting, long arrays, odd and control characters,
  lone surrogates, odd keys, duplicate keys), each one fitting the value's JSON type;
- :data:`BYTE_MUTATORS` work on the encoded body (a BOM, UTF-16, invalid UTF-8, a raw UTF-8
  surrogate, truncation, trailing garbage, whitespace, an HTML page);
- a :class:`Plan` says how one answer is made (valid, or mutated in its document, its
  bytes, both, or its HTTP status); :func:`answers` composes ``plans()`` with a document
  strategy, and :func:`make_answer` applies a plan to a document.

Hypothesis draws the plans (small numbers and seeds) before the documents: it makes the
choices late in a large test case mostly the simplest, which would leave most answers
unmutated. A mutator's own choices come from a ``random.Random`` seeded by the plan.

The document may hold values JSON has and Python does not: :class:`Pairs` (an object
written member by member, keys repeated), :class:`Token` (a number written as is: ``NaN``,
``1e400``, a 5000-digit integer) and :class:`Deep` (nesting deeper than Python's recursion
limit). :func:`encode` writes them.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from tests.support import nodeapi

#: The cap the suites configure (``max_response_bytes``): long arrays reach it now and then.
MAX_RESPONSE_BYTES = 256 * 1024


@dataclass(frozen=True)
class Pairs:
    """A JSON object written member by member, in order, so a key may repeat."""

    members: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Token:
    """A JSON number (or a non-JSON literal such as ``NaN``) written exactly as ``text``."""

    text: str


@dataclass(frozen=True)
class Deep:
    """``inner`` inside ``depth`` arrays (or objects ``{"a": ...}``): written without
    recursion, so it may be nested past what a recursive parser takes."""

    depth: int
    inner: Any
    objects: bool = False


@dataclass(frozen=True)
class Answer:
    """What a node answers one request: an HTTP status and the body's bytes."""

    body: bytes
    status: int = 200

    def __repr__(self) -> str:  # failing examples print whole fleets: keep them readable
        shown = self.body if len(self.body) <= 300 else self.body[:300] + b"..."
        size = "" if len(self.body) <= 300 else f", {len(self.body)} bytes"
        return f"Answer({shown!r}{size}{'' if self.status == 200 else f', {self.status}'})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis's reports
        printer.text(repr(self))


# --- valid answers, from the document ----------------------------------------------------

#: Keys that JSON allows and nodes send: the field names' neighbours and worse.
EXTRA_KEYS = st.one_of(st.sampled_from(["", "x", "status", "hash", "__proto__"]), st.text())
#: Any JSON value, small (hypothesis-jsonschema's strategy for the empty schema).
ANY_JSON = from_schema({})


@cache
def documents(name: str) -> st.SearchStrategy[Any]:
    """Valid answers of schema ``name`` of ``components/schemas`` (built once): mostly
    complete (every field the document names, maps not empty), which the mutators then
    take apart; now and then sparse (any field may be left out)."""
    reference = {"$ref": f"#/components/schemas/{name}"}
    full, sparse = _strategy(reference, complete=True), _strategy(reference, complete=False)
    return st.sampled_from([True, True, True, False]).flatmap(lambda f: full if f else sparse)


#: Go's duration units, as the document's GoDuration pattern lists them.
GO_UNITS = ("ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h")
#: Schemas drawn by a strategy of this module rather than hypothesis-jsonschema: a
#: GoDuration through ``st.from_regex`` of its pattern costs 5 ms a draw, most of the time a
#: chain status takes. The same strings (``test_drawn_answers_are_valid_per_the_document``
#: validates them against the document).
LEAVES: dict[str, st.SearchStrategy[str]] = {
    "GoDuration": st.one_of(
        st.sampled_from(["0", "-0", "+0"]),
        st.tuples(
            st.sampled_from(["", "-", "+"]),
            st.lists(
                st.tuples(
                    st.integers(0, 10**6).map(str),
                    st.sampled_from(["", ".", ".5", ".250", ".000000001"]),
                    st.sampled_from(GO_UNITS),
                ).map("".join),
                min_size=1,
                max_size=4,
            ).map("".join),
        ).map("".join),
    ),
}


def _strategy(node: Any, complete: bool) -> st.SearchStrategy[Any]:
    reference = node.get("$ref", "") if isinstance(node, dict) else ""
    drawn_here = LEAVES.get(reference.rpartition("/")[2])
    if drawn_here is not None:
        return drawn_here
    node = nodeapi.resolve(node)
    if node.get("type") == "object":
        return _object(node, complete)
    if node.get("type") == "array":
        items = _strategy(node.get("items", {}), complete)
        return st.lists(items, min_size=int(complete), max_size=4)
    leaf = {k: v for k, v in node.items() if k not in ("description", "examples")}
    return from_schema(leaf)


def _object(node: dict[str, Any], complete: bool) -> st.SearchStrategy[Any]:
    """Named properties (optional unless ``complete``: nodes vary, and the document requires
    none but the contract event's), and members the document does not name where it allows
    them."""
    named = {key: _strategy(value, complete) for key, value in node.get("properties", {}).items()}
    required = {
        key: named.pop(key) for key in list(named) if complete or key in node.get("required", ())
    }
    base = st.fixed_dictionaries(required, optional=named)
    extra = node.get("additionalProperties", True)
    if extra is False:
        return base
    # never a named property's key: one left out of a sparse draw would come back as an
    # extra member holding any value, which the document does not allow it
    names = frozenset(node.get("properties", {}))
    keys = EXTRA_KEYS.filter(lambda key: key not in names)
    if extra is True:  # members no one documents: a few, of any JSON value
        others = st.dictionaries(keys, ANY_JSON, max_size=2)
    else:  # a map whose values have a schema (vote sessions, flags, auth groups)
        least = int(complete and not named and not required)
        values = _strategy(extra, complete)
        others = st.dictionaries(keys, values, min_size=least, max_size=3)
    return st.tuples(base, others).map(lambda parts: {**parts[1], **parts[0]})


# --- values nodes in the field send ------------------------------------------------------

ODD_TEXTS = (
    "",
    " ",
    "\x00",
    "\x01\x1f\x7f",
    "tab\there",
    "cr\rlf\n",
    'quote"',
    "back\\slash",
    '\\"\\n',
    "a\\nb",
    'x\\"y',
    "end\\",
    "\\\\",
    'new\nline"and\\',
    "\u2028\u2029",
    "\ufeffbom",
    "\u202eevil",
    "e\u0301",
    "\U0001f600",
    "\U0010ffff",
    "\ud800",
    "\udfff",
    "a\ud83dz",
    "%2F..%00",
    "..",
    "{}",
    "ü" * 5,
    "x" * 1025,
    "y" * 4097,
)
ODD_NUMBERS = (
    0,
    -1,
    -0.0,
    1.5,
    -2.5,
    2**53 + 1,
    2**63,
    2**64 + 1,
    10**30,
    1e308,
    -1e308,
    5e-324,
    Token("NaN"),
    Token("Infinity"),
    Token("-Infinity"),
    Token("-0"),
    Token("1E+2"),
    Token("1e400"),
    Token("-1e400"),
    Token("1" * 5000),
    Token("0.0e-999"),
    Token("-" + "9" * 400),
)
NUMERIC_STRINGS = (
    "42",
    "-7",
    "4.2e1",
    "0.5",
    "-0",
    "+42",
    ".5",
    "5.",
    "007",
    " 42",
    "42 ",
    "0x2A",
    "1_000",
    "\u0664\u0662",
    "NaN",
    "Infinity",
    "inf",
    "1e400",
    "1" * 300,
    "",
    "-",
    "1e",
    "--1",
)
DURATIONS = (
    "0",
    "-0",
    "0s",
    "-0s",
    "+5s",
    "-5s",
    "1h2m3.5s",
    "90s",
    "500ms",
    "2h0m0s",
    "1.5\u00b5s",
    "1.5\u03bcs",
    "3us",
    "7ns",
    ".5s",
    "1.s",
    "1h1h",
    "0009s",
    "2562047h47m16.854775807s",
    "2562047h47m16.854775808s",
    "9999999999999h",
    "0.1ns",
    "5",
    "1d",
    "1 s",
    " 1s",
    "1S",
    "h",
    ".s",
    "1..5s",
    "\u0661s",
    "",
    "0s" * 40,
    "1e3s",
    "-",
)
TIMESTAMPS = (
    "2024-05-01T12:00:00Z",
    "2024-05-01T12:00:00.123456789Z",
    "2024-05-01T12:00:00+05:30",
    "2024-05-01T12:00:00-00:00",
    "1970-01-01T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "2024-05-01t12:00:00z",
    "2024-05-01 12:00:00Z",
    "2024-05-01T12:00:00+0530",
    "2016-12-31T23:59:60Z",
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-23:59",
    "2024-05-01T12:00:00",
    "2024-13-01T00:00:00Z",
    "2024-02-30T00:00:00Z",
    "2024-05-01T24:00:00Z",
    "2024-05-01T12:00:00+24:00",
    "2024-05-01",
    "1714564800",
    "2024-05-01T12:00:00.Z",
    "\uff12\uff10\uff12\uff14-05-01T12:00:00Z",
    "2024-05-01T12:00:00Z ",
    "2024-05-01T12:00:00." + "9" * 60 + "Z",
)
#: Characters that make texts odd: controls, quotes and backslashes (escaping), non-BMP,
#: combining marks, bidi controls, separators JSON allows and JavaScript does not.
ODD_CHARACTERS = (
    '\x00\x01\x1f\x7f\t\r\n"\\/ %.\u00e9\u0301\u202e\u2028\u2029\ufeff\U0001f600\U0010ffff'
)
SURROGATE_CHARACTERS = "\ud800\udbff\udc00\udfff"


def odd_text(rnd: random.Random) -> str:
    """A text nodes send where ids and names go: a listed odd one, a random mix of odd
    characters (lone surrogates now and then), or a long one (some over the size cap)."""
    kind = rnd.randrange(10)
    if kind < 5:
        return rnd.choice(ODD_TEXTS)
    if kind < 9:
        pool = ODD_CHARACTERS + "abc" + (SURROGATE_CHARACTERS if kind == 8 else "")
        return "".join(rnd.choice(pool) for _ in range(rnd.randrange(1, 12)))
    return rnd.choice("zq") * rnd.choice([1025, 4097, 70_000, 300_000])


def scalar(rnd: random.Random) -> Any:
    """Any JSON scalar, the odd ones often: numbers, numeric strings, durations, times."""
    kind = rnd.randrange(9)
    if kind == 0:
        return rnd.choice([None, True, False])
    if kind == 1:
        return rnd.choice([rnd.randrange(-(2**70), 2**70), rnd.uniform(-1e6, 1e6)])
    if kind == 2:
        return rnd.choice(ODD_NUMBERS)
    if kind == 3:
        return rnd.choice(NUMERIC_STRINGS)
    if kind == 4:
        return rnd.choice(DURATIONS)
    if kind == 5:
        return rnd.choice(TIMESTAMPS)
    return odd_text(rnd)


def small_json(rnd: random.Random) -> Any:
    """A scalar, or a small array or object of them."""
    kind = rnd.randrange(4)
    if kind == 0:
        return [scalar(rnd) for _ in range(rnd.randrange(4))]
    if kind == 1:
        return {odd_text(rnd)[:20]: scalar(rnd) for _ in range(rnd.randrange(3))}
    return scalar(rnd)


# --- mutators over the document ----------------------------------------------------------

Path = tuple[str | int, ...]
#: What a mutator returns to remove the member at its place.
DELETE = object()
#: A mutator: the replacement of the value at one place of the document (or DELETE), its
#: choices made by a seeded random (see :func:`plans`: hypothesis draws the seed).
Mutator = Callable[[random.Random, Any], Any]


def _missing(rnd: random.Random, value: Any) -> Any:
    return DELETE


def _null(rnd: random.Random, value: Any) -> Any:
    return None


def _wrong_type(rnd: random.Random, value: Any) -> Any:
    """A value of another type, as nodes confuse them: a flag as ``"true"`` or ``1``, a
    number as a string or a flag, a text as a number, a list as an object or a string."""
    if isinstance(value, bool):
        choices: list[Any] = ["true", "false", "True", "1", "0", 1, 0, "yes", [value], {}]
    elif isinstance(value, int | float):
        text = repr(value)
        choices = [text, f" {text}", f"{text}s", True, False, [value], {"value": value}]
    elif isinstance(value, str):
        choices = [0, 1, 2.5, True, [value], {"value": value}, len(value)]
    elif isinstance(value, list):
        first = value[0] if value else 1
        choices = [{}, {"0": first}, ",".join(map(str, value[:5])), len(value), first]
    elif isinstance(value, dict):
        choices = [[], list(value.values())[:3], "{}", 0, True]
    else:
        choices = [0, "", "null", [], {}, False]
    return rnd.choice(choices)


def _numeric_string(rnd: random.Random, value: Any) -> Any:
    """A number as a string: the plain form, and forms almost like it."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return rnd.choice([str(value), f"{value:e}", f" {value}", f"+{value}", f"{value}\n"])
    return rnd.choice(NUMERIC_STRINGS)


def _odd_number(rnd: random.Random, value: Any) -> Any:
    return rnd.choice(ODD_NUMBERS)


def _odd_value(rnd: random.Random, value: Any) -> Any:
    """A duration, a timestamp or a text where any of them may be: forms that are almost
    right and forms that are wrong."""
    return rnd.choice([rnd.choice(DURATIONS), rnd.choice(TIMESTAMPS), odd_text(rnd)])


def _deep(rnd: random.Random, value: Any) -> Any:
    """Nested arrays or objects, some past what a recursive parser takes."""
    depth = rnd.choice([3, 20, 100, 3000, 100_000])
    return Deep(depth, scalar(rnd), objects=rnd.random() < 0.5)


def _long(rnd: random.Random, value: Any) -> Any:
    """A long array or object (peers, council, flags, groups, sessions by the thousand)."""
    size = rnd.choice([300, 3000, 30_000])
    template = rnd.choice(["text", "bool", "number", "session", "group"])
    items: list[Any]
    if template == "text":
        items = [f"k{index}" for index in range(size)]
    elif template == "bool":
        items = [index % 3 == 0 for index in range(size)]
    elif template == "number":
        items = list(range(size))
    elif template == "session":
        items = [{"sessionId": f"s{i}", "round": i % 7} for i in range(size)]
    else:
        items = [{"read": True, "update": i % 2 == 0} for i in range(size)]
    if isinstance(value, dict) or rnd.random() < 0.5:
        return {f"f{index:05d}": item for index, item in enumerate(items)}
    return items


def _odd_text(rnd: random.Random, value: Any) -> Any:
    return odd_text(rnd)


def _odd_key(rnd: random.Random, value: Any) -> Any:
    """One member of an object under an odd name (a feature, group or session named so)."""
    if not isinstance(value, dict) or not value:
        return {odd_text(rnd): value}
    key = rnd.choice(sorted(value))
    renamed = {k: v for k, v in value.items() if k != key}
    renamed[odd_text(rnd)] = value[key]
    return renamed


def _duplicate_key(rnd: random.Random, value: Any) -> Any:
    """An object with one member written twice, with two different values."""
    if not isinstance(value, dict) or not value:
        return Pairs((("k", value), ("k", small_json(rnd))))
    members = list(value.items())
    key, old = members[rnd.randrange(len(members))]
    other = _same_kind(rnd, old) if rnd.random() < 0.5 else small_json(rnd)
    members.insert(rnd.randrange(len(members) + 1), (key, other))
    return Pairs(tuple(members))


def _same_kind(rnd: random.Random, value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return rnd.choice([0, 1, 99, 12345])
    if isinstance(value, str):
        return rnd.choice(["other", "", "ACTIVE"])
    return value


DOCUMENT_MUTATORS: dict[str, Mutator] = {
    "missing": _missing,
    "null": _null,
    "wrong_type": _wrong_type,
    "numeric_string": _numeric_string,
    "odd_number": _odd_number,
    "odd_value": _odd_value,
    "deep": _deep,
    "long": _long,
    "odd_text": _odd_text,
    "odd_key": _odd_key,
    "duplicate_key": _duplicate_key,
}
_ANY = ("missing", "null", "wrong_type")
_CONTAINER = (*_ANY, "deep", "long")
#: The mutators that make sense for a value of each JSON type (the others waste examples).
APPLICABLE: dict[type, tuple[str, ...]] = {
    bool: _ANY,
    int: (*_ANY, "numeric_string", "odd_number"),
    float: (*_ANY, "numeric_string", "odd_number"),
    str: (*_ANY, "numeric_string", "odd_value", "odd_text"),
    list: _CONTAINER,
    dict: (*_CONTAINER, "odd_key", "duplicate_key"),
}


def applicable(value: Any, mutators: Sequence[str]) -> list[str]:
    """Those of ``mutators`` that fit ``value`` (all of them for a value of no JSON type)."""
    fitting = APPLICABLE.get(type(value), tuple(DOCUMENT_MUTATORS))
    return [name for name in mutators if name in fitting] or list(mutators)


def places(document: Any, limit: int = 400) -> list[Path]:
    """Paths to the values of ``document`` (breadth first, the root first), at most
    ``limit``, the first 20 members of each object or array; the members of a
    :class:`Pairs` are not entered."""
    found: list[Path] = []
    queue: list[tuple[Path, Any]] = [((), document)]
    while queue and len(found) < limit:
        path, value = queue.pop(0)
        found.append(path)
        if isinstance(value, dict):
            queue += [((*path, key), value[key]) for key in list(value)[:20]]
        elif isinstance(value, list):
            queue += [((*path, index), item) for index, item in enumerate(value[:20])]
    return found


@cache
def field_names() -> frozenset[str]:
    """Every property name the node API document gives: where readers look."""
    names: set[str] = set()
    stack: list[Any] = [nodeapi.document()["components"]["schemas"]]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            properties = node.get("properties")
            names.update(properties if isinstance(properties, dict) else ())
            stack += node.values()
        elif isinstance(node, list):
            stack += node
    return frozenset(names)


def replace_at(document: Any, path: Path, value: Any) -> Any:
    """A copy of ``document`` with the value at ``path`` replaced (DELETE: removed)."""
    if not path:
        return {} if value is DELETE else value
    head, rest = path[0], path[1:]
    if isinstance(document, dict) and isinstance(head, str):
        copy = dict(document)
        if not rest and value is DELETE:
            copy.pop(head, None)
        else:
            copy[head] = replace_at(document[head], rest, value)
        return copy
    if isinstance(document, list) and isinstance(head, int):
        listed = list(document)
        if not rest and value is DELETE:
            del listed[head]
        else:
            listed[head] = replace_at(document[head], rest, value)
        return listed
    return document


def value_at(document: Any, path: Path) -> Any:
    for part in path:
        document = document[part]
    return document


@dataclass(frozen=True)
class Mutation:
    """Where a mutation goes and which: numbers drawn by hypothesis, read modulo the
    places and mutators found in the document; ``seed`` makes the mutator's own choices."""

    place: int
    mutator: int
    seed: int
    anywhere: bool = False  # any place, not only the documented fields


def mutate(document: Any, mutation: Mutation, mutators: Sequence[str]) -> Any:
    """``document`` with ``mutation`` applied: at a documented field mostly (where readers
    look), else at any place or the root."""
    where = places(document)
    named = [path for path in where if path and path[-1] in field_names()]
    candidates = where if mutation.anywhere or not named else named
    path = candidates[mutation.place % len(candidates)]
    fitting = applicable(value_at(document, path), mutators)
    mutator = DOCUMENT_MUTATORS[fitting[mutation.mutator % len(fitting)]]
    value = mutator(random.Random(mutation.seed), value_at(document, path))
    return replace_at(document, path, value)


def mutated(document: Any, mutations: Sequence[Mutation], mutators: Sequence[str]) -> Any:
    """``document`` with each of ``mutations`` applied in turn (until the root is written
    member by member: a :class:`Pairs` is not entered again)."""
    for mutation in mutations:
        document = mutate(document, mutation, mutators)
        if isinstance(document, Pairs):
            break
    return document


# --- encoding, and mutators over the bytes -----------------------------------------------


def encode(document: Any, ascii_only: bool = True) -> bytes:
    """``document`` as JSON bytes. Without ``ascii_only``, a lone surrogate is written as the
    three bytes UTF-8 would give it (ED A0 80 for U+D800), as careless encoders do."""
    return _json_text(document, ascii_only).encode("utf-8", "surrogatepass")


_RAW = re.compile(r'"\\u0000\\u0001raw(\d+)\\u0001\\u0000"')


def _json_text(document: Any, ascii_only: bool) -> str:
    """json.dumps, with the values it cannot write (Pairs, Token, Deep) put in afterwards
    where it wrote a placeholder string for them."""
    raw: list[str] = []

    def placeholder(value: Any) -> str:
        if isinstance(value, Token):
            text = value.text
        elif isinstance(value, Deep):
            opening, closing = ('{"a":', "}") if value.objects else ("[", "]")
            inner = _json_text(value.inner, ascii_only)
            text = opening * value.depth + inner + closing * value.depth
        elif isinstance(value, Pairs):
            members = (
                json.dumps(key, ensure_ascii=ascii_only) + ":" + _json_text(item, ascii_only)
                for key, item in value.members
            )
            text = "{" + ",".join(members) + "}"
        else:
            raise TypeError(f"not JSON: {value!r}")
        raw.append(text)
        return f"\x00\x01raw{len(raw) - 1}\x01\x00"

    text = json.dumps(document, ensure_ascii=ascii_only, default=placeholder)
    return _RAW.sub(lambda match: raw[int(match.group(1))], text) if raw else text


ByteMutator = Callable[[random.Random, bytes], bytes]
INVALID_UTF8 = (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80", b"\xf4\x90\x80\x80")


def _bom(rnd: random.Random, body: bytes) -> bytes:
    return b"\xef\xbb\xbf" + body


def _utf16(rnd: random.Random, body: bytes) -> bytes:
    codec = rnd.choice(["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
    return body.decode("utf-8", "surrogatepass").encode(codec, "surrogatepass")


def _invalid_utf8(rnd: random.Random, body: bytes) -> bytes:
    """Bytes UTF-8 does not allow, inside a string (after a quote) or anywhere."""
    bad = rnd.choice(INVALID_UTF8)
    quotes = [index + 1 for index, byte in enumerate(body) if byte == ord('"')]
    at = rnd.choice(quotes) if quotes and rnd.random() < 0.7 else rnd.randrange(len(body) + 1)
    return body[:at] + bad + body[at:]


def _truncated(rnd: random.Random, body: bytes) -> bytes:
    return body[: rnd.randrange(max(1, len(body)))]


def _trailing(rnd: random.Random, body: bytes) -> bytes:
    return body + rnd.choice([b"x", b"\x00", b"{}", b" \r\n\t", b",", b"]"])


def _whitespace(rnd: random.Random, body: bytes) -> bytes:
    """Valid JSON still: whitespace before, after and between the tokens."""
    pad = rnd.choice([b" ", b"\n", b"\r\n", b"\t", b" \n\t\r "])
    return pad + body.replace(b",", b"," + pad).replace(b":", pad + b":") + pad


def _html(rnd: random.Random, body: bytes) -> bytes:
    return b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>"


BYTE_MUTATORS: dict[str, ByteMutator] = {
    "bom": _bom,
    "utf16": _utf16,
    "invalid_utf8": _invalid_utf8,
    "truncated": _truncated,
    "trailing": _trailing,
    "whitespace": _whitespace,
    "html": _html,
}

#: How an answer is made: left valid, mutated in its document, its bytes, both, or its
#: HTTP status; :data:`HOW` has them in the proportions the suites use.
HOW = ("document",) * 12 + ("valid",) * 3 + ("bytes",) * 2 + ("both",) * 2 + ("status",)
#: Only what breaks the bytes or the exchange.
RAW_HOW = ("bytes", "both", "status")
SEED = st.integers(0, 2**32 - 1)
MUTATIONS = st.builds(Mutation, SEED, SEED, SEED, st.sampled_from([False, False, True]))


@dataclass(frozen=True)
class Plan:
    """How one answer will be made from its document (drawn before any document: hypothesis
    makes its later choices in a test case mostly the simplest ones, so every choice of a
    fleet is drawn up front, and the documents last)."""

    how: str = "valid"
    mutations: tuple[Mutation, ...] = ()
    byte_mutator: int = 0
    seed: int = 0
    ascii_only: bool = True
    status: int = 200


@st.composite
def plans(draw: st.DrawFn, hows: Sequence[str] = HOW) -> Plan:
    """How an answer will be made: ``hows`` in their proportions."""
    how = draw(st.sampled_from(hows))
    if how == "valid":
        return Plan(ascii_only=draw(st.booleans()))
    mutations = (
        draw(st.lists(MUTATIONS, min_size=1, max_size=3)) if how in ("document", "both") else []
    )
    return Plan(
        how,
        tuple(mutations),
        draw(SEED),
        draw(SEED),
        draw(st.booleans()),
        draw(st.sampled_from([404, 500, 302, 204])) if how == "status" else 200,
    )


def make_answer(
    document: Any, plan: Plan, mutators: Sequence[str] = tuple(DOCUMENT_MUTATORS)
) -> Answer:
    """``document`` as a node answers it, made as ``plan`` says."""
    if plan.mutations:
        document = mutated(document, plan.mutations, mutators)
    body = encode(document, plan.ascii_only)
    if plan.how in ("bytes", "both"):
        names = sorted(BYTE_MUTATORS)
        mutator = BYTE_MUTATORS[names[plan.byte_mutator % len(names)]]
        body = mutator(random.Random(plan.seed), body)
    if plan.status == 204:
        return Answer(b"", 204)
    return Answer(body, plan.status)


def answers(
    document: st.SearchStrategy[Any], hows: Sequence[str] = HOW
) -> st.SearchStrategy[Answer]:
    """Answers made of documents drawn from ``document``: the plan first, then the
    document (for one answer per test case; a fleet draws all its plans first)."""
    return st.tuples(plans(hows), document).map(lambda drawn: make_answer(drawn[1], drawn[0]))
