"""Log output in logfmt or JSON, the two formats Prometheus exporters use (``--log.format``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from exporter.text import UNSAFE, visible

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


def _needs_quotes(char: str) -> bool:
    """go-logfmt's needsQuotedValueRune (a space or control character, '=', '"' or U+FFFD),
    and every other character :mod:`exporter.text` makes visible (NEL, U+2028, U+2029, the
    bidirectional controls): a terminal or log viewer would act on them."""
    return char <= " " or char in '="\ufffd' or UNSAFE.match(char) is not None


def _logfmt_value(value: Any) -> str:
    """A value as go-kit's logfmt writes it: bare unless it needs quotes; inside quotes
    backslash, quote, newline, carriage return and tab escaped, the other characters of
    :data:`exporter.text.UNSAFE` (controls, separators, bidirectional controls) as \\uXXXX."""
    text = str(value)
    if text == "null":  # quoted so that it is not read back as a null value
        return '"null"'
    if not any(_needs_quotes(char) for char in text):
        return text
    escaped = "".join(_LOGFMT_ESCAPES.get(char) or visible(char) for char in text)
    return f'"{escaped}"'


def logfmt(fields: Mapping[str, Any]) -> str:
    """``key=value key="a value"``: one logfmt line (the log's, and ``/probe``'s debug answer)."""
    return " ".join(f"{key}={_logfmt_value(value)}" for key, value in fields.items())


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
