"""Readers for JSON values sent by nodes: liberal in what they accept, strict in what they return.

Each ``read_*`` function returns a float ready to export, or ``None`` when the value is absent,
``null``, or of a type or form that cannot be read; ``None`` means "no sample" (contract rule 1).
A string longer than its cap (:mod:`exporter.bounds`) is refused before it is parsed, and a
string UTF-8 cannot hold (a lone surrogate, which ``json.loads`` lets through) is never read,
so no later layer (labels, the status page, logs) ever sees one.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from datetime import UTC, datetime, timedelta, timezone

from exporter.bounds import (
    MAX_DURATION_CHARS,
    MAX_NUMBER_CHARS,
    MAX_TEXT_CHARS,
    MAX_TIMESTAMP_CHARS,
)
from exporter.errors import DurationError

_UNIT_NANOSECONDS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC greek mu, as Go accepts both
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
#: Go's time.Duration is an int64 of nanoseconds: about 292 years either way.
_MAX_NANOSECONDS = (1 << 63) - 1
_GO_SYNTAX = "use Go syntax such as 2s, 1m30s or 500ms"
# re.ASCII: without it \d also matches non-ASCII digits (Arabic-Indic, ...) that Go and JSON refuse.
_DURATION_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)", re.ASCII)
#: UTF-16 surrogates: json.loads accepts them alone ("\\ud800", raw ED A0 80), UTF-8 cannot
#: encode them, and a label or page holding one fails to render.
_SURROGATE = re.compile("[\ud800-\udfff]")
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?"
    r"(?:([Zz])|([+-])(\d{2}):?(\d{2}))",
    re.ASCII,
)


def parse_go_duration(text: str) -> float:
    """Parse a Go duration string (``1h2m3.5s``, ``500ms``, ``0``) into seconds.

    The one parser of the package, exactly as Go's time.ParseDuration: an optional sign
    (``-0s``, ``+5s``), no spaces (``" 2s"`` is refused), a unit after every number except a
    lone ``0``, and at most Go's int64 nanoseconds. Raises DurationError naming the value; a
    text over MAX_DURATION_CHARS is refused unparsed and unquoted (it may be megabytes).
    """
    if len(text) > MAX_DURATION_CHARS:
        raise DurationError(f"invalid duration: longer than {MAX_DURATION_CHARS} characters")
    negative = text[:1] == "-"
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    if not body:
        raise DurationError(f"invalid duration {text!r}: {_GO_SYNTAX}")
    total, position = 0, 0
    while position < len(body):
        nanoseconds, position = _duration_part(text, body, position)
        total += nanoseconds
        if total > _MAX_NANOSECONDS + negative:
            raise DurationError(f"invalid duration {text!r}: longer than Go's limit of 292 years")
    return (-total if negative else total) / 1e9


def format_go_duration(seconds: float) -> str:
    """``15.0`` as ``15s``, ``3600.0`` as ``1h``, ``0.1`` as ``100ms``: the largest unit that
    writes it whole, as the docs and ``--help`` show a default duration (read back by
    :func:`parse_go_duration`)."""
    for unit, size in (("h", 3600.0), ("m", 60.0), ("s", 1.0), ("ms", 0.001)):
        count = seconds / size
        if count >= 1 and abs(count - round(count)) < 1e-9:
            return f"{round(count)}{unit}"
    return f"{seconds}s"


def _duration_part(text: str, body: str, position: int) -> tuple[int, int]:
    """Nanoseconds of the ``<number><unit>`` at ``position`` (truncated as Go does), and
    where the next part starts."""
    part = _DURATION_PART.match(body, position)
    if part is None:  # the pattern matches anywhere, if only the empty string
        raise DurationError(f"invalid duration {text!r}: {_GO_SYNTAX}")
    whole, fraction, unit_name = part.groups()
    if not whole and not fraction:
        raise DurationError(f"invalid duration {text!r}: {_GO_SYNTAX}")
    if not unit_name:
        raise DurationError(f"invalid duration {text!r}: missing unit; {_GO_SYNTAX}")
    scale = _UNIT_NANOSECONDS.get(unit_name)
    if scale is None:
        raise DurationError(f"invalid duration {text!r}: unknown unit {unit_name!r}; {_GO_SYNTAX}")
    nanoseconds = int(whole or "0") * scale
    if fraction:
        nanoseconds += int(fraction) * scale // 10 ** len(fraction)
    return nanoseconds, part.end()


def parse_timestamp(text: str) -> float:
    """Parse an ISO 8601 date-time with ``Z`` or a UTC offset into Unix seconds.

    Fractions of any length are kept to float precision. A time without a zone is refused:
    it cannot be placed on the Unix time line without guessing. A text over
    MAX_TIMESTAMP_CHARS is refused unparsed and unquoted.
    """
    if len(text) > MAX_TIMESTAMP_CHARS:
        raise ValueError(f"invalid timestamp: longer than {MAX_TIMESTAMP_CHARS} characters")
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid timestamp {text!r}: expected e.g. 2024-05-01T12:00:00Z")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = float(match.group(7)) if match.group(7) else 0.0
    if match.group(8):
        zone = UTC
    else:
        hours, minutes = int(match.group(10)), int(match.group(11))
        if hours > 23 or minutes > 59:
            raise ValueError(f"invalid timestamp {text!r}: offset out of range")
        offset = timedelta(hours=hours, minutes=minutes)
        zone = timezone(-offset if match.group(9) == "-" else offset)
    moment = datetime(year, month, day, hour, minute, second, tzinfo=zone)
    return moment.timestamp() + fraction


def read_number(value: object) -> float | None:
    """A finite JSON number, or a JSON string holding one (``"42"``); booleans are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and len(value) <= MAX_NUMBER_CHARS and _NUMBER_TEXT.fullmatch(value):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def read_count(value: object) -> float | None:
    """A number that counts something (a height, a queue length): never negative."""
    number = read_number(value)
    return number + 0.0 if number is not None and number >= 0 else None  # -0 becomes 0


def read_bool(value: object) -> float | None:
    """JSON ``true``/``false`` as 1/0; nothing else counts as a boolean."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return None


def read_duration(value: object) -> float | None:
    """A non-negative Go duration string, in seconds."""
    if not isinstance(value, str):
        return None
    parse = _parsed_duration if len(value) <= MAX_DURATION_CHARS else parse_go_duration
    try:
        seconds = parse(value)
    except ValueError:
        return None
    return seconds + 0.0 if seconds >= 0 else None  # "-0s" becomes 0


def read_timestamp(value: object) -> float | None:
    """An ISO 8601 timestamp string with a zone, as Unix seconds."""
    if not isinstance(value, str):
        return None
    parse = _parsed_timestamp if len(value) <= MAX_TIMESTAMP_CHARS else parse_timestamp
    try:
        return parse(value)
    except (ValueError, OverflowError):
        return None


#: Texts whose parsed value is remembered: every node sends the same consensus durations and
#: nodes in step the same last message time, each cycle (both are at most 64 characters, so
#: the memory is bounded; a text that does not parse is not remembered).
PARSED_KEPT = 1024


@functools.lru_cache(maxsize=PARSED_KEPT)
def _parsed_duration(text: str) -> float:
    return parse_go_duration(text)


@functools.lru_cache(maxsize=PARSED_KEPT)
def _parsed_timestamp(text: str) -> float:
    return parse_timestamp(text)


def is_text(value: str) -> bool:
    """UTF-8 can hold ``value``: it has no lone surrogate. Label values and the status page
    may hold any other character (NUL and controls too: Prometheus ingests them, and the
    exposition escapes backslash, newline and double quote)."""
    return value.isascii() or _SURROGATE.search(value) is None


def read_text(value: object, max_chars: int = MAX_TEXT_CHARS) -> str | None:
    """A JSON string of at most ``max_chars`` characters that UTF-8 can hold, as is; interned,
    so the thousands of nodes reporting the same version or type share one copy (an
    interned string is still freed once nothing uses it)."""
    if not isinstance(value, str) or len(value) > max_chars or not is_text(value):
        return None
    return sys.intern(value)


class LabelTexts:
    """Reads the strings of one answer that become label values: as :func:`read_text` under
    the configured ``max_chars``, counting in ``dropped`` the ones refused for their length
    (a bound the operator set, unlike a string UTF-8 cannot hold, which is simply unread)."""

    __slots__ = ("dropped", "max_chars")

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.dropped = 0

    def __call__(self, value: object) -> str | None:
        if not isinstance(value, str) or not self.fits(value) or not is_text(value):
            return None
        return sys.intern(value)

    def fits(self, value: str) -> bool:
        """``value`` is within the length cap; one over it is counted as dropped."""
        if len(value) <= self.max_chars:
            return True
        self.dropped += 1
        return False


def read_length(
    value: object, container: type[list[object]] | type[dict[str, object]]
) -> float | None:
    """The number of entries of a JSON array or object of the expected kind."""
    return float(len(value)) if isinstance(value, container) else None


def read_list_length(value: object) -> float | None:
    """The number of entries of a JSON array (a list of members, peers, chains)."""
    return read_length(value, list)


def read_object_size(value: object) -> float | None:
    """The number of members of a JSON object (the vote sessions by id)."""
    return read_length(value, dict)
