"""Readers of node values: Go durations, ISO 8601 timestamps, numbers, counts, booleans.

These decide what becomes a sample and what becomes "no sample" (contract rules 1, 3 and 4),
so every table below pairs accepted forms with their look-alikes that must be refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest

from exporter.bounds import (
    MAX_DURATION_CHARS,
    MAX_NUMBER_CHARS,
    MAX_TEXT_CHARS,
    MAX_TIMESTAMP_CHARS,
)
from exporter.errors import DurationError
from exporter.values import (
    parse_go_duration,
    parse_timestamp,
    read_bool,
    read_count,
    read_duration,
    read_length,
    read_number,
    read_text,
    read_timestamp,
)

# 2024-05-01T12:00:00Z, checked with `date -u -d 2024-05-01T12:00:00Z +%s`.
NOON = 1714564800.0
MICRO_SIGN = "\u00b5"  # µ, what Go's time package prints
GREEK_MU = "\u03bc"  # μ, which Go's ParseDuration accepts as well
ARABIC_ONE = "\u0661"  # a Unicode digit Python's \d and int() accept but Go and JSON do not


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h2m3.5s", 3723.5),
        ("90s", 90.0),
        ("500ms", 0.5),
        ("2h0m0s", 7200.0),
        ("1m30s", 90.0),
        ("0", 0.0),
        ("-0", 0.0),
        ("+0", 0.0),
        ("0s", 0.0),
        ("1.5h", 5400.0),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("1us", 1e-6),
        (f"1{MICRO_SIGN}s", 1e-6),
        (f"1{GREEK_MU}s", 1e-6),
        ("300ns", 3e-7),
        ("1ms500us", 0.0015),
        ("1h1h", 7200.0),
        ("-1s", -1.0),
        ("-1m30s", -90.0),
        ("+2m", 120.0),
        ("0.000001s", 1e-6),
        ("100000h", 3.6e8),
        # The three forms the simulator's old parser decided differently, as Go decides them
        ("-0s", 0.0),
        ("+5s", 5.0),
        ("2562047h47m16.854775807s", 9223372036.854775807),  # Go's longest duration
        ("-2562047h47m16.854775808s", -9223372036.854775808),  # and its most negative
        ("9223372036854775807ns", 9223372036.854775807),
        ("1.9999999999ns", 1e-9),  # fractions below a nanosecond are truncated, as in Go
    ],
    ids=lambda value: repr(value) if isinstance(value, str) else None,
)
def test_parse_go_duration_accepts_go_syntax(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds, rel=1e-12, abs=0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        "15",
        "1x",
        "s",
        "ms",
        ".s",
        "1S",
        "1H",
        "1sec",
        "1e3s",
        "1,5s",
        "1h 2m",
        "1..5s",
        "1s ",
        " 1s",
        "+",
        "-",
        "--1s",
        "+-1s",
        "1m-1s",
        "h1",
        "0x10s",
        f"{ARABIC_ONE}s",
        f"1{ARABIC_ONE}m",
        " 2s",  # Go refuses surrounding spaces; the simulator's old parser stripped them
        "2s\n",
        "2562047h47m16.854775808s",  # one nanosecond past Go's int64
        "9" * 30 + "h",  # once read as infinity
        "1" + "0" * 400 + "s",
    ],
    ids=repr,
)
def test_parse_go_duration_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(DurationError, match="invalid duration"):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5", "invalid duration '5': missing unit; use Go syntax such as 2s, 1m30s or 500ms"),
        ("5x", "invalid duration '5x': unknown unit 'x'; use Go syntax such as 2s, 1m30s or 500ms"),
        ("", "invalid duration '': use Go syntax such as 2s, 1m30s or 500ms"),
        ("999999999h", "invalid duration '999999999h': longer than Go's limit of 292 years"),
    ],
)
def test_parse_go_duration_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_go_duration(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2024-05-01T12:00:00Z", NOON),
        ("2024-05-01t12:00:00z", NOON),
        ("2024-05-01 12:00:00Z", NOON),
        ("2024-05-01T14:00:00+02:00", NOON),
        ("2024-05-01T14:00:00+0200", NOON),
        ("2024-05-01T06:30:00-0530", NOON),
        ("2024-05-01T06:30:00-05:30", NOON),
        ("2024-05-01T12:00:00+00:00", NOON),
        ("2024-05-01T12:00:00-00:00", NOON),
        ("2024-05-02T11:59:00+23:59", NOON),
        ("2024-05-01T12:00:00.5Z", NOON + 0.5),
        ("2024-05-01T12:00:00.250Z", NOON + 0.25),
        ("2024-05-01T12:00:00.123456Z", NOON + 0.123456),
        ("2024-05-01T12:00:00.123456789Z", NOON + 0.123456789),
        ("2024-05-01T14:00:00.750+02:00", NOON + 0.75),
        ("1970-01-01T00:00:00Z", 0.0),
        ("2024-02-29T00:00:00Z", 1709164800.0),
    ],
    ids=repr,
)
def test_parse_timestamp_accepts_iso8601_with_zone(text: str, seconds: float) -> None:
    assert parse_timestamp(text) == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        "2024-05-01T12:00:00",  # no zone: cannot be placed on the time line
        "2024-05-01T12:00:00.5",
        "2024-05-01",
        "12:00:00Z",
        "2024-13-01T12:00:00Z",  # month 13
        "2024-00-10T12:00:00Z",
        "2023-02-29T12:00:00Z",  # not a leap year
        "2024-05-32T12:00:00Z",
        "2024-05-01T24:00:00Z",
        "2024-05-01T12:60:00Z",
        "2024-05-01T12:00:61Z",
        "2024-05-01T12:00:00+24:00",  # offsets end at 23:59
        "2024-05-01T12:00:00+02:60",
        "2024-05-01T12:00:00+2:00",
        "2024-05-01T12:00:00+02",
        "2024-05-01T12:00:00 +02:00",
        "2024-05-01T12:00:00.Z",
        "2024-05-01T12:00Z",
        "2024-05-01X12:00:00Z",
        "2024-5-1T12:00:00Z",
        " 2024-05-01T12:00:00Z",
        "2024-05-01T12:00:00Z ",
        "2024-05-01T12:00:00ZZ",
        "0000-01-01T00:00:00Z",
        f"202{ARABIC_ONE}-05-01T12:00:00Z",
        "garbage",
        "",
    ],
    ids=repr,
)
def test_parse_timestamp_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - datetime's own messages vary by case
        parse_timestamp(text)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (42, 42.0),
        (0, 0.0),
        (-7, -7.0),
        (2.5, 2.5),
        (-0.25, -0.25),
        (10**20, 1e20),
        ("42", 42.0),
        ("-3.5", -3.5),
        ("+1", 1.0),
        ("1e3", 1000.0),
        ("2.5E-3", 0.0025),
        (".5", 0.5),
        ("007", 7.0),
        (True, None),
        (False, None),
        ("nan", None),
        ("NaN", None),
        ("inf", None),
        ("-inf", None),
        ("Infinity", None),
        ("1e400", None),
        (math.nan, None),
        (math.inf, None),
        (-math.inf, None),
        (10**400, None),
        ("", None),
        (" 42", None),
        ("42 ", None),
        ("4 2", None),
        ("0x10", None),
        ("1_000", None),
        ("1,5", None),
        ("e3", None),
        (f"4{ARABIC_ONE}", None),
        ("true", None),
        (None, None),
        ([], None),
        ([1], None),
        ({}, None),
        ({"value": 1}, None),
    ],
    ids=repr,
)
def test_read_number(value: object, expected: float | None) -> None:
    result = read_number(value)
    assert result == expected
    if expected is not None:
        assert type(result) is float


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, 5.0),
        (0, 0.0),
        ("12", 12.0),
        (1.5, 1.5),
        (-1, None),
        ("-1", None),
        (-0.5, None),
        (True, None),
        ("x", None),
        (None, None),
        ([3], None),
    ],
    ids=repr,
)
def test_read_count_refuses_negatives(value: object, expected: float | None) -> None:
    assert read_count(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, 1.0),
        (False, 0.0),
        ("true", None),
        ("false", None),
        ("True", None),
        (1, None),
        (0, None),
        (1.0, None),
        ("1", None),
        (None, None),
        ([], None),
        ({}, None),
    ],
    ids=repr,
)
def test_read_bool_only_json_booleans(value: object, expected: float | None) -> None:
    result = read_bool(value)
    assert result == expected
    assert result is None or type(result) is float


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("90s", 90.0),
        ("1m30s", 90.0),
        ("2h0m0s", 7200.0),
        ("250ms", 0.25),
        ("0s", 0.0),
        ("0", 0.0),
        ("-1s", None),
        ("-0.5ms", None),
        ("90", None),
        ("bad", None),
        ("", None),
        (90, None),
        (1.5, None),
        (True, None),
        (None, None),
        (["1s"], None),
    ],
    ids=repr,
)
def test_read_duration(value: object, expected: float | None) -> None:
    assert read_duration(value) == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01T12:00:00Z", NOON),
        ("2024-05-01T14:00:00.5+02:00", NOON + 0.5),
        ("2024-05-01T12:00:00", None),
        ("2024-13-01T12:00:00Z", None),
        ("yesterday", None),
        ("", None),
        (NOON, None),
        (int(NOON), None),
        (None, None),
        (True, None),
        ({}, None),
    ],
    ids=repr,
)
def test_read_timestamp(value: object, expected: float | None) -> None:
    assert read_timestamp(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1.4.2", "1.4.2"),
        ("", ""),
        ("ünïcode", "ünïcode"),
        (1, None),
        (1.5, None),
        (True, None),
        (None, None),
        (["a"], None),
        ({"a": "b"}, None),
    ],
    ids=repr,
)
def test_read_text(value: object, expected: str | None) -> None:
    assert read_text(value) == expected


@pytest.mark.parametrize(
    ("value", "container", "expected"),
    [
        (["a", "b", "c"], list, 3.0),
        ([], list, 0.0),
        ([None, 1, "x", {}], list, 4.0),
        ({"s1": {}, "s2": {}}, dict, 2.0),
        ({}, dict, 0.0),
        ({"a": 1}, list, None),
        (["a"], dict, None),
        ("abc", list, None),
        (3, list, None),
        (None, list, None),
        (None, dict, None),
    ],
    ids=repr,
)
def test_read_length(
    value: object, container: type[list[object]] | type[dict[str, object]], expected: float | None
) -> None:
    assert read_length(value, container) == expected


@pytest.mark.parametrize(
    ("reader", "value"), [(read_count, "-0"), (read_count, -0.0), (read_duration, "-0s")]
)
def test_negative_zero_is_exported_as_zero(
    reader: Callable[[object], float | None], value: object
) -> None:
    result = reader(value)
    assert result == 0.0 and math.copysign(1.0, result) == 1.0


def _short_id(value: object) -> str | None:
    """Test ids of long strings: their length and start, never megabytes of text."""
    if isinstance(value, str) and len(value) > 40:
        return f"{value[:12]!r}...({len(value)} chars)"
    return repr(value) if isinstance(value, str) else None


LONE_HIGH = "\ud800"  # what json.loads makes of the escape "\\ud800" and of raw ED A0 80
LONE_LOW = "\udc00"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # Prometheus 2.42 ingests every one of these in both formats (checked against the
        # real server): label values may hold any UTF-8; only \\, \n and " are escaped.
        ("a\x00b", "a\x00b"),
        ("a\rb\tc\x7f", "a\rb\tc\x7f"),
        ("line\nbreak", "line\nbreak"),
        ('quote"back\\slash', 'quote"back\\slash'),
        ("\ufffe\uffff\u2028", "\ufffe\uffff\u2028"),
        ("\U0001f600", "\U0001f600"),  # a surrogate pair in JSON, one character here
        ("x" * MAX_TEXT_CHARS, "x" * MAX_TEXT_CHARS),
        # what cannot be encoded in UTF-8 at all: no value, as for a wrong type
        (LONE_HIGH, None),
        (LONE_LOW, None),
        (f"1.4.2{LONE_HIGH}", None),
        (f"ok{LONE_LOW}{LONE_HIGH}ok", None),  # a pair in the wrong order
        ("\ud83d\ude00", None),  # CESU-8 bytes: two lone surrogates, not one character
        ("x" * (MAX_TEXT_CHARS + 1), None),
        ("x" * 4_000_000, None),
    ],
    ids=_short_id,
)
def test_read_text_refuses_what_utf8_cannot_hold_and_overlong(
    value: str, expected: str | None
) -> None:
    assert read_text(value) == expected


@pytest.mark.parametrize(
    "body",
    [b'"\\ud800"', b'"\xed\xa0\x80"', b'"\\udfff tail"', b'"\xed\xa0\xbd\xed\xb8\x80"'],
    ids=["escape", "raw-ED-A0-80", "low-escape", "raw-CESU-8-pair"],
)
def test_surrogates_json_accepts_are_unreadable(body: bytes) -> None:
    decoded = json.loads(body)  # json.loads lets these through (surrogatepass)
    assert isinstance(decoded, str)
    assert read_text(decoded) is None


def test_read_text_with_a_smaller_cap() -> None:
    assert read_text("abcd", max_chars=4) == "abcd"
    assert read_text("abcde", max_chars=4) is None


@pytest.mark.parametrize(
    ("reader", "value", "expected"),
    [
        (read_duration, "0" * (MAX_DURATION_CHARS - 2) + "1s", 1.0),
        (read_duration, "0" * (MAX_DURATION_CHARS - 1) + "1s", None),
        (read_duration, "0s" * 1_000_000, None),  # the 2 MB bomb: refused before parsing
        (read_duration, f"1s{LONE_HIGH}", None),
        (read_timestamp, "2024-05-01T12:00:00." + "0" * (MAX_TIMESTAMP_CHARS - 21) + "Z", NOON),
        (read_timestamp, "2024-05-01T12:00:00." + "0" * (MAX_TIMESTAMP_CHARS - 20) + "Z", None),
        (read_timestamp, "2024-05-01T12:00:00." + "1" * 2_000_000 + "Z", None),
        (read_number, "1" * 78, float("1" * 78)),  # a uint256 amount
        (read_number, "0" * (MAX_NUMBER_CHARS - 1) + "7", 7.0),
        (read_number, "0" * MAX_NUMBER_CHARS + "7", None),
        (read_number, "9" * 2_000_000, None),
        (read_count, "0" * MAX_NUMBER_CHARS + "7", None),
    ],
    ids=_short_id,
)
def test_parsed_strings_have_a_length_cap(
    reader: Callable[[object], float | None], value: str, expected: float | None
) -> None:
    assert reader(value) == expected


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_go_duration, "0s" * 1_000_000),
        (parse_go_duration, "1" * (MAX_DURATION_CHARS + 1) + "s"),
        (parse_timestamp, "2024-05-01T12:00:00." + "5" * 1_000_000 + "Z"),
    ],
    ids=["duration-bomb", "duration-over-cap", "timestamp-over-cap"],
)
def test_overlong_parses_fail_without_echoing_the_text(
    parse: Callable[[str], float], text: str
) -> None:
    with pytest.raises(ValueError, match="characters") as caught:
        parse(text)
    assert len(str(caught.value)) < 200
