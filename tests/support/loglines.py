"""The exporter's log read back as a log collector reads it: each line through a real
logfmt parser (``logfmtkv`` in its strict mode, which rejects what go-logfmt rejects and
unescapes as go-logfmt does) or, for ``--log.format=json``, through ``json``.

:class:`~tests.support.processes.ExporterProcess` checks every line its exporter wrote when
it stops, so every end-to-end run's log is held to this.
"""

from __future__ import annotations

import json
from typing import Any

import logfmtkv

#: The keys every log line starts with.
LINE_KEYS = ("ts", "level", "msg")
LEVELS = frozenset({"debug", "info", "warn", "error"})


class UnparsableLogError(AssertionError):
    """A log line a logfmt (or JSON) reader would not read as the exporter meant it."""


def parse_line(line: str) -> dict[str, Any]:
    """One log line's fields, as Loki or go-logfmt would read them; raises
    UnparsableLogError for a line that is not one record (``ts``, ``level``, ``msg`` first,
    each key once and with a value) or that has a value in single quotes (quoted by its
    caller, e.g. with ``repr``: a parser keeps the quotes as part of the value)."""
    try:
        if line.startswith("{"):
            fields: dict[str, Any] = json.loads(line)
        else:
            pairs = logfmtkv.parse_pairs(line, strict=True)
            fields = dict(pairs)
            if len(fields) < len(pairs) or None in fields.values():
                raise ValueError("a key repeated or without a value")
    except ValueError as error:  # logfmtkv's errors and json's are ValueErrors
        raise UnparsableLogError(f"log line does not parse ({error}): {line!r}") from None
    if tuple(fields)[:3] != LINE_KEYS or fields["level"] not in LEVELS:
        raise UnparsableLogError(f"log line is no record (ts, level, msg first): {line!r}")
    quoted = [key for key, value in fields.items() if _single_quoted(value)]
    if quoted:
        raise UnparsableLogError(f"log line has {quoted} in single quotes: {line!r}")
    return fields


def _single_quoted(value: object) -> bool:
    return isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == "'"


def parse_log(text: str) -> list[dict[str, Any]]:
    """Every complete line of a log (a last line without its newline is left out: a
    process killed while writing it)."""
    lines = text.split("\n")[:-1]
    return [parse_line(line) for line in lines]
