"""Log lines: logfmt exactly as go-kit's logfmt (go-logfmt) writes values, and the level and
format checks every command shares."""

from __future__ import annotations

import argparse
import logging

import pytest

from exporter.flags import Parser, apply_environment, log_format, log_level
from exporter.logs import LogfmtFormatter, _logfmt_value, setup_logging


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("plain", "plain"),
        ("", ""),  # go-logfmt writes key= for an empty value
        ("null", '"null"'),  # quoted, so that it is not read back as a null
        ("two words", '"two words"'),
        ("a=b", '"a=b"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("C:\\dir", "C:\\dir"),  # a backslash alone needs no quotes
        ("C:\\my dir", '"C:\\\\my dir"'),  # but is escaped inside them
        ("line\nnext", '"line\\nnext"'),
        ("carriage\rreturn", '"carriage\\rreturn"'),  # once left bare
        ("tab\there", '"tab\\there"'),  # once left unescaped
        ("nul\x00", '"nul\\u0000"'),
        ("\x1b[31mred", '"\\u001b[31mred"'),
        # Beyond go-logfmt: what a terminal or log viewer acts on is escaped too (DEL, C1
        # such as NEL and CSI, the line and paragraph separators, bidirectional controls)
        ("\x7f", '"\\u007f"'),
        ("next\x85line", '"next\\u0085line"'),
        ("\x9b31m", '"\\u009b31m"'),
        ("a\u2028b\u2029c", '"a\\u2028b\\u2029c"'),
        ("v1\u202e2.1", '"v1\\u202e2.1"'),
        ("\u2067x\u2069\u200f", '"\\u2067x\\u2069\\u200f"'),
        ("µs", "µs"),
        ("\ufffd", '"\ufffd"'),
        (42, "42"),
        (0.5, "0.5"),
    ],
    ids=repr,
)
def test_logfmt_values_as_go_logfmt_writes_them(value: object, written: str) -> None:
    assert _logfmt_value(value) == written


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
