"""A node's answer body as JSON: decoded as Python's ``json`` reads it, or, on the fast path,
straight into the fields a reader uses (msgspec's typed decoding, in C).

The fast path is an optimisation only, never a second reading of odd answers: it takes a body
only where the slow path would read the same values from it, and hands any other body back
(``None``), to be decoded the slow way and read as before. A body must be ASCII (so it is
valid UTF-8 with no raw surrogate, which msgspec does not check in the parts it skips, and
not UTF-16 or UTF-32, which ``json`` detects and msgspec does not), nest at most
MAX_FAST_DEPTH deep (so neither decoder nears Python's recursion limit: the two meet it at
call sites a few frames apart, and a part kept as JSON text is decoded deeper still), and
fit the types; ``json`` accepts what msgspec refuses (``NaN``, ``1e400``,
a lone surrogate escape), so a body msgspec refuses is always left to ``json``.
"""

from __future__ import annotations

import functools
import json
from typing import Any, NamedTuple

import msgspec
from msgspec import UNSET, Raw, UnsetType
from msgspec.structs import astuple

from exporter.model.fields import CHAIN_STATUS_FIELDS, TOP, Field
from exporter.values import read_list_length

#: How deep a body may nest for the fast path: far below the recursion limit (1000), and a
#: body of at most twice as many bytes cannot nest deeper, so it is not even counted.
MAX_FAST_DEPTH = 800

#: A JSON scalar as sent: what the plain readers (exporter.values) are given either way.
Scalar = bool | int | float | str | None


def decode_json(body: bytes) -> Any:
    """The body as ``json.loads`` reads it. An integer of more digits than Python converts
    (``sys.get_int_max_str_digits()``, 4300) is valid JSON: the body is read again with such
    integers as floats (infinite, so no reader takes them), rather than refusing the whole
    answer for one field."""
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:  # an integer too long to convert (nothing else raises a plain one)
        return json.loads(body, parse_int=_integer)


def _integer(text: str) -> int | float:
    """A JSON integer; past Python's conversion limit, its float (infinite)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def fits_fast_path(body: bytes) -> bool:
    """The body is ASCII and shallow enough for the fast path (see the module's docstring):
    short, or with few brackets (counting them costs about a microsecond a kilobyte)."""
    if not body.isascii():
        return False
    return len(body) <= 2 * MAX_FAST_DEPTH or (
        body.count(b"[") + body.count(b"{") <= MAX_FAST_DEPTH
    )


def _decoded_as(field: Field) -> Any:
    """How the fast path decodes a field of the chain status itself: the parts every node of a
    chain sends alike (``Field.shared``) as JSON text, read once a cycle for all the nodes that
    send the same (:meth:`~exporter.model.storage.Shared.part`); a list whose length is read
    as a list of strings (or a scalar, unreadable); any other field as a JSON scalar."""
    if field.shared:
        return Raw | UnsetType
    if field.read is read_list_length:
        return list[str] | Scalar | UnsetType
    return Scalar | UnsetType


#: The chain status's own fields (``Field.at`` TOP), in the order of ChainStatusFields.values.
FAST_FIELDS = tuple(field for field in CHAIN_STATUS_FIELDS if field.at == TOP)
_NAMED = {f"field{position}": field for position, field in enumerate(FAST_FIELDS)}
#: What the fast path decodes of a chain status: each of FAST_FIELDS in order (``astuple``
#: gives their values), UNSET where absent; any other shape is the slow path's. (A struct
#: without GC tracking, as cheap to make as msgspec makes anything.)
ChainStatusFields = msgspec.defstruct(
    "ChainStatusFields",
    [(name, _decoded_as(field), UNSET) for name, field in _NAMED.items()],
    rename={name: field.name for name, field in _NAMED.items()},
    gc=False,
)
_CHAIN_STATUS = msgspec.json.Decoder(ChainStatusFields)


def decode_chain_status(body: bytes) -> msgspec.Struct | None:
    """The chain status's fields (a ChainStatusFields), or None when the body is not for the
    fast path (it may still be valid JSON the slow path reads, or invalid JSON it refuses)."""
    if not fits_fast_path(body):
        return None
    try:
        decoded: msgspec.Struct = _CHAIN_STATUS.decode(body)
    except msgspec.DecodeError:  # ValidationError too: a shape for the slow path
        return None
    return decoded


class BlockHashes(NamedTuple):
    """What the block fast path decoded: the value of each configured hash field, in the
    configured order, UNSET where absent."""

    values: tuple[Scalar | UnsetType, ...]


class BlockHashDecoder:
    """The typed fast path of a block answer (``GET /blockchains/{id}/blocks?height=``):
    only the configured hash fields, each a JSON scalar or absent, everything else skipped
    (a block's transactions are never built as Python objects). A body that is not an
    object, or whose hash field holds an array or object, is handed back (None) like any
    body :func:`fits_fast_path` refuses: the slow path reads (or refuses) it."""

    __slots__ = ("_decoder",)

    def __init__(self, fields: tuple[str, ...]) -> None:
        names = [f"field{position}" for position in range(len(fields))]
        struct = msgspec.defstruct(
            "BlockHashFields",
            [(name, Scalar | UnsetType, UNSET) for name in names],
            rename=dict(zip(names, fields, strict=True)),
            gc=False,
        )
        self._decoder = msgspec.json.Decoder(struct)

    def __call__(self, body: bytes) -> BlockHashes | None:
        if not fits_fast_path(body):
            return None
        try:
            return BlockHashes(astuple(self._decoder.decode(body)))
        except msgspec.DecodeError:  # ValidationError too: a shape for the slow path
            return None


@functools.lru_cache(maxsize=8)
def block_hash_decoder(fields: tuple[str, ...]) -> BlockHashDecoder | None:
    """The decoder of ``fields`` (one config's block_hash_fields), made once, not per poll:
    a config (and a reload or two) has one list of them. None when msgspec cannot name a
    field so (a quote, a backslash or a control character in it: the config allows any
    text): those blocks are read by the slow path, as before the fast one existed."""
    try:
        return BlockHashDecoder(fields)
    except (ValueError, TypeError):
        return None
