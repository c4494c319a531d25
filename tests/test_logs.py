"""Log lines: logfmt exactly as go-kit's logfmt (go-logfmt) writes values, and the level and
format checks every command shares."""

from __future__ import annotations

import argparse
import logging
import sys

import hypothesis
import logfmtkv
import pytest
from hypothesis import strategies as st

from exporter.flags import Parser, apply_environment, log_format, log_level
from exporter.logs import LogfmtFormatter, logfmt, logfmt_value, setup_logging
from tests.support.generation import examples
from tests.support.loglines import UnparsableLogError, parse_line

#: go-logfmt's own encoder cases (encode_test.go, TestEncodeKeyval) for string values:
#: what it writes for each. The one difference is the empty value: go-logfmt writes
#: ``k=``; this exporter writes ``k=""``, which go-logfmt reads as the same empty value and a
#: person reads as one.
GO_LOGFMT_CASES = [
    ("v", "v"),
    ("null", '"null"'),  # quoted, so that it is not read back as a null
    ("<nil>", "<nil>"),
    ("v v", '"v v"'),
    (" ", '" "'),
    ('"', '"\\""'),
    ("=", '"="'),
    ("\\", "\\"),  # a backslash alone needs no quotes
    ("=\\", '"=\\\\"'),  # but is escaped inside them
    ('\\"', '"\\\\\\""'),
    ("\ufffd", '"\\ufffd"'),
    ("\ufffd\x00", '"\\ufffd\\u0000"'),
]


@pytest.mark.parametrize(
    ("value", "written"),
    [
        *GO_LOGFMT_CASES,
        ("", '""'),
        ("plain", "plain"),
        ("a=b", '"a=b"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("C:\\my dir", '"C:\\\\my dir"'),
        ("line\nnext", '"line\\nnext"'),
        ("carriage\rreturn", '"carriage\\rreturn"'),
        ("tab\there", '"tab\\there"'),
        ("\x1b[31mred", '"\\u001b[31mred"'),
        ("expected 'abc'", "\"expected 'abc'\""),  # single quotes are text, kept
        ("'abc'", "'abc'"),  # and need no quoting of their own
        # Beyond go-logfmt: what a terminal or log viewer acts on is escaped too (DEL, C1
        # such as NEL and CSI, the line and paragraph separators, bidirectional controls,
        # tag characters past U+FFFF as a surrogate pair, as JSON and go-logfmt read them)
        ("\x7f", '"\\u007f"'),
        ("next\x85line", '"next\\u0085line"'),
        ("\x9b31m", '"\\u009b31m"'),
        ("a\u2028b\u2029c", '"a\\u2028b\\u2029c"'),
        ("v1\u202e2.1", '"v1\\u202e2.1"'),
        ("\u2067x\u2069\u200f", '"\\u2067x\\u2069\\u200f"'),
        ("tag\U000e0041", '"tag\\udb40\\udc41"'),
        ("e\u0301\u0301\u0301", '"e\u0301\u0301\\u0301"'),  # the third mark on one letter
        ("µs", "µs"),
        ("日本", "日本"),
        (42, "42"),
        (0.5, "0.5"),
    ],
    ids=repr,
)
def test_logfmt_values_as_go_logfmt_writes_them(value: object, written: str) -> None:
    assert logfmt_value(value) == written


@pytest.mark.parametrize(("value", "written"), GO_LOGFMT_CASES, ids=repr)
def test_the_parser_reads_go_logfmts_own_cases_back(value: str, written: str) -> None:
    """The test parser agrees with go-logfmt on its own cases: what it reads is the value."""
    assert logfmtkv.parse(f"k={written}", strict=True) == {"k": value}


def test_a_lone_surrogate_is_escaped_and_reads_back_as_a_replacement() -> None:
    """A lone surrogate (what surrogateescape makes of a byte that is not UTF-8) cannot be
    written as UTF-8: it is escaped, and a reader takes it as U+FFFD, as go-logfmt does."""
    assert logfmt_value("a\udcff") == '"a\\udcff"'
    assert logfmtkv.parse(logfmt({"k": "a\udcff"}), strict=True) == {"k": "a\ufffd"}


@hypothesis.settings(max_examples=examples(300), deadline=None)
@hypothesis.given(st.text())
def test_every_text_reads_back_as_written(text: str) -> None:
    """Any text, through the log's quoting and back through a strict logfmt parser, is the
    same text (a lone surrogate, which UTF-8 cannot carry, reads back as U+FFFD), alone or
    between other fields."""
    expected = "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in text)
    line = logfmt({"ts": "t", "k": text, "after": "x y"})
    assert logfmtkv.parse(line, strict=True, duplicates="error") == {
        "ts": "t",
        "k": expected,
        "after": "x y",
    }


def test_a_formatted_record_parses_with_its_traceback() -> None:
    """A whole record, an exception's multi-line traceback included, is one parsable line."""
    try:
        raise ValueError('bad "value"\nsecond line')
    except ValueError:
        record = logging.LogRecord(
            "ledger_exporter", logging.ERROR, __file__, 1, "failed: %s", ("x=1",), sys.exc_info()
        )
    record.fields = {"node": "node 1", "empty": ""}
    line = LogfmtFormatter().format(record)
    assert "\n" not in line
    fields = parse_line(line)
    assert (fields["level"], fields["msg"], fields["node"], fields["empty"]) == (
        "error",
        "failed: x=1",
        "node 1",
        "",
    )
    assert fields["exc"].startswith("Traceback")
    assert 'ValueError: bad "value"\nsecond' in fields["exc"]


@pytest.mark.parametrize(
    "line",
    [
        "ts=1 level=info msg='a b'",  # single quotes are no quoting: b' is a stray key
        "ts=1 level=info msg=a expected_node_id='02ab'",  # quoted by the caller
        'ts=1 level=info msg="a',
        'ts=1 level=info msg="a\\x41"',  # not an escape go-logfmt reads
        "ts=1 level=info msg=a msg=b",
        "level=info ts=1 msg=a",
        "ts=1 level=verbose msg=a",
        "Traceback (most recent call last):",
    ],
)
def test_the_log_check_refuses_what_a_collector_would_misread(line: str) -> None:
    with pytest.raises(UnparsableLogError):
        parse_line(line)


def test_logfmt_line() -> None:
    record = logging.LogRecord(
        "ledger_exporter", logging.WARNING, __file__, 1, "node a down", (), None
    )
    record.fields = {"node": "a", "error": "read: connection reset\r\n"}
    line = LogfmtFormatter().format(record)
    assert line.split(" ", 1)[1] == (
        'level=warn msg="node a down" node=a error="read: connection reset\\r\\n"'
    )


@pytest.mark.parametrize(("level", "fmt"), [("verbose", "logfmt"), ("info", "xml")])
def test_setup_logging_refuses_what_the_commands_would_refuse(level: str, fmt: str) -> None:
    with pytest.raises(ValueError, match="unknown"):
        setup_logging(level, fmt)


def _parser() -> Parser:
    parser = Parser(prog="test", argument_default=argparse.SUPPRESS)
    parser.add_argument("--log.level", dest="log_level", type=log_level)
    parser.add_argument("--log.format", dest="log_format", type=log_format)
    return parser


DEFAULTS = {"log_level": "info", "log_format": "logfmt"}


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        ([], {}, {"log_level": "info", "log_format": "logfmt"}),
        (
            [],
            {"LEDGER_EXPORTER_LOG_LEVEL": "debug"},
            {"log_level": "debug", "log_format": "logfmt"},
        ),
        (
            ["--log.level=warn"],
            {"LEDGER_EXPORTER_LOG_LEVEL": "verbose"},
            {"log_level": "warn", "log_format": "logfmt"},
        ),
        ([], {"LEDGER_EXPORTER_LOG_FORMAT": "json"}, {"log_level": "info", "log_format": "json"}),
    ],
)
def test_environment_fills_what_the_command_line_left_out(
    argv: list[str], environ: dict[str, str], expected: dict[str, str]
) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    assert apply_environment(parser, args, DEFAULTS, environ) == []
    assert vars(args) == expected


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"LEDGER_EXPORTER_LOG_LEVEL": "verbose"},
            "test: error: environment variable LEDGER_EXPORTER_LOG_LEVEL='verbose': unknown log "
            "level 'verbose'; use one of debug, info, warn, error (see --help)\n",
        ),
        (
            {"LEDGER_EXPORTER_LOG_FORMAT": "JSON"},
            "test: error: environment variable LEDGER_EXPORTER_LOG_FORMAT='JSON': unknown log "
            "format 'JSON'; did you mean 'json'? use one of logfmt, json (see --help)\n",
        ),
    ],
)
def test_a_bad_variable_is_one_line_and_status_2(
    environ: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = _parser()
    with pytest.raises(SystemExit) as exited:
        apply_environment(parser, parser.parse_args([]), DEFAULTS, environ)
    assert exited.value.code == 2
    assert capsys.readouterr().err == message


def test_a_misspelt_variable_is_reported_and_the_operators_own_are_not() -> None:
    parser = _parser()
    environ = {"LEDGER_EXPORTER_LOG_LEVLE": "debug", "LEDGER_EXPORTER_NODE_PASSWORD": "x"}
    assert apply_environment(parser, parser.parse_args([]), DEFAULTS, environ) == [
        "ignoring unknown environment variable LEDGER_EXPORTER_LOG_LEVLE; "
        "did you mean LEDGER_EXPORTER_LOG_LEVEL?"
    ]
