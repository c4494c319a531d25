"""Log output in logfmt or JSON, the two formats Prometheus exporters use (``--log.format``)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from exporter.text import UNSAFE, piled_marks

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}
FORMATS = ("logfmt", "json")
#: What --log.level and --log.format default to, for every command.
DEFAULT_LEVEL = "info"
DEFAULT_FORMAT = "logfmt"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = {
        "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
        "level": "warn" if record.levelno == logging.WARNING else record.levelname.lower(),
        "msg": record.getMessage(),
    }
    fields.update(getattr(record, "fields", {}))
    if record.exc_info:
        fields["exc"] = logging.Formatter().formatException(record.exc_info)
    return fields


_LOGFMT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: What makes a value quoted: go-logfmt's needsQuotedValueRune (a space or control
#: character, '=', '"' or U+FFFD) and every other character :func:`exporter.text.visible`
#: escapes (a terminal or log viewer would act on them).
_QUOTED = re.compile(f'[\\x00-\\x20="\\ufffd]|{UNSAFE.pattern}')
#: What is escaped inside the quotes: backslash, quote, U+FFFD (as go-logfmt does) and the
#: same unsafe characters.
_ESCAPED = re.compile(f'[\\\\"\\ufffd]|{UNSAFE.pattern}')


def _escape(found: re.Match[str]) -> str:
    """One character as go-logfmt escapes it inside quotes: ``\\n``-style where it has one,
    else ``\\uXXXX`` (a surrogate pair past U+FFFF: JSON's escapes, which go-logfmt reads)."""
    char = found[0]
    named = _LOGFMT_ESCAPES.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def logfmt_value(value: object) -> str:
    """A value as go-kit's logfmt (go-logfmt) writes it, the one place log values are quoted:
    bare unless it is empty, ``null`` or holds a space, ``=``, ``"``, a control character or
    another character :data:`exporter.text.UNSAFE` names; inside the quotes backslash, quote,
    newline, carriage return and tab escaped as ``\\n``, the others as ``\\uXXXX``. Callers
    pass values as they are (never pre-quoted with ``repr``: a parser keeps such quotes as
    part of the value)."""
    text = str(value)
    piled = None if text.isascii() else piled_marks()  # a stack of combining marks
    bare = text and text != "null" and not _QUOTED.search(text)
    if bare and (piled is None or not piled.search(text)):
        return text
    escaped = _ESCAPED.sub(_escape, text)
    if piled is not None:  # looked for in the text as given: escapes are ASCII
        escaped = piled.sub(_escape, escaped)
    return f'"{escaped}"'


def logfmt(fields: Mapping[str, Any]) -> str:
    """``key=value key="a value"``: one logfmt line (the log's, and ``/probe``'s debug answer)."""
    return " ".join(f"{key}={logfmt_value(value)}" for key, value in fields.items())


class LogfmtFormatter(logging.Formatter):
    """``ts=... level=info msg="..." key=value``."""

    def format(self, record: logging.LogRecord) -> str:
        return logfmt(_fields(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(record), default=str)


def setup_logging(level: str, fmt: str) -> None:
    """Send the exporter's logs to stderr in the chosen format and level (the commands check
    both first; anything else here is a programming error)."""
    if level not in LEVELS or fmt not in FORMATS:
        raise ValueError(f"log level {level!r} or format {fmt!r} unknown")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    logger = logging.getLogger("ledger_exporter")
    logger.handlers[:] = [handler]
    logger.setLevel(LEVELS[level])
    logger.propagate = False
