"""Text a node sends cannot reorder the status page, nor reach a terminal raw.

A hostile node puts a right-to-left override (U+202E) and other bidirectional and control
characters in its version, its peer id, a chain id and a watched contract's status: the page,
laid out by headless Chromium, still reads in the order it was written (alert names and node
names where they belong), each such character shown as ``\\u202e``; the probe's debug answer
and the log carry none of them raw.
"""

from __future__ import annotations

import json
import logging
import sys
import unicodedata
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from exporter.logs import JsonFormatter, LogfmtFormatter
from exporter.text import UNSAFE, isolated, visible
from tests.support.browser import laid_out
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode
from tests.support.http import fetch
from tests.support.processes import ready_exporter
from tests.support.waiting import wait_until

RLO = "\u202e"  # right-to-left override: what follows it reads backwards
HOSTILE_CHAIN = f"c{RLO}2"
HOSTILE_STATUS = f"PAUSED{RLO} (by node)"
CONTRACT = "/blockchains/c1/contracts/0x1"


def _hostile(fake: FakeNode) -> FakeNode:
    """A node whose version, peer id, second chain and watched contract carry U+202E and
    friends; its second chain cannot be read (a problem line with the chain id in its lead)."""
    health = health_doc(["c1", HOSTILE_CHAIN], version=f"1.4{RLO}.2\x1b[2J\r\u2066")
    health["network"]["peerId"] = f"12D3{RLO}KooW\x85\u2028"
    fake.play(health, {"c1": chain_doc(10)})
    fake.set(f"/blockchains/{quote(HOSTILE_CHAIN, safe='')}", {"error": "no"}, status=500)
    fake.set(CONTRACT, {"status": HOSTILE_STATUS, "version": 3, "codeHash": "h"})
    return fake


def _config(tmp_path: Path, fake: FakeNode, extra: str = "") -> Path:
    config = tmp_path / "config.yml"
    config.write_text(
        "scrape_interval: 1s\nnodes:\n"
        f"  - {{name: validator-1, url: '{fake.url}'}}\n"
        "  - {name: validator-2, url: 'http://127.0.0.1:9/'}\n"
        "watch:\n  contracts: [{blockchain: c1, address: '0x1', name: token}]\n" + extra
    )
    return config


@pytest.mark.integration
def test_a_right_to_left_override_from_a_node_reorders_nothing_on_the_page(
    tmp_path: Path, fake_node: FakeNode
) -> None:
    with ready_exporter(_config(tmp_path, _hostile(fake_node))) as exporter:
        wait_until(
            lambda: b"LedgerWatchedContractNotActive" in fetch(exporter.base + "/").body,
            timeout=60,
            message="the paused contract never showed",
        )
        html = fetch(exporter.base + "/").text
        cells = laid_out(exporter.base + "/")
    assert len(cells) > 10, html
    for cell in cells:  # every line and cell reads as written, alert names included
        assert cell.on_screen == cell.text, cell
    shown = {cell.text for cell in cells}
    assert "1.4\\u202e.2\\u001b[2J\\u000d\\u2066" in shown  # the version, made visible
    lines = [cell for cell in cells if "Ledger" in cell.text]  # the problem lines
    assert any("LedgerWatchedContractNotActive" in cell.text for cell in lines), shown
    assert any("LedgerBlockchainDown" in cell.text for cell in lines), shown
    status = next(cell for cell in lines if "LedgerWatchedContractNotActive" in cell.text)
    assert status.text.index("validator-1") < status.text.index("PAUSED\\u202e")
    assert status.text.endswith("notACTIVELedgerWatchedContractNotActive")  # no spaces counted
    assert not UNSAFE.search(html), "a control or bidirectional character reached the page"


@pytest.mark.integration
def test_the_probe_debug_answer_carries_no_control_byte_a_node_sent(
    tmp_path: Path, fake_node: FakeNode
) -> None:
    _hostile(fake_node)
    # debug=true answers only where the config turns it on (probe.debug, off by default)
    allowed = f"probe:\n  debug: true\n  allowed_targets: ['{fake_node.url}']\n"
    with ready_exporter(_config(tmp_path, fake_node, allowed)) as exporter:
        query = urlencode({"target": fake_node.url, "debug": "true"})
        body = fetch(f"{exporter.base}/probe?{query}", timeout=30).body.decode()
        log = exporter.log()
    text = body.replace("\n", "")  # the lines themselves
    assert not UNSAFE.search(text), [line for line in body.splitlines() if UNSAFE.search(line)]
    assert '\\u202e.2\\u001b[2J\\u000d\\u2066"' in body  # the version label, made visible
    assert "12D3\\u202eKooW\\u0085\\u2028" in body  # the peer id label
    assert not UNSAFE.search(log.replace("\n", "")), "the log carries a raw control character"


def test_visible_and_isolated() -> None:
    assert visible(f"a{RLO}b\x1b\x85\u2028\u2029\u200f\u061c\u2067\ud800é") == (
        "a\\u202eb\\u001b\\u0085\\u2028\\u2029\\u200f\\u061c\\u2067\\ud800é"
    )
    assert visible("עברית 1.2") == "עברית 1.2"  # right-to-left letters kept: isolated
    # invisible format characters, with which a node's id could pass for another's
    assert visible("n\u200bo\u00add\ufeffe\u2060-\U000e0031") == (
        "n\\u200bo\\u00add\\ufeffe\\u2060-\\U000e0031"
    )
    assert isolated(f"x{RLO}") == "\u2068x\\u202e\u2069"


def test_every_format_control_and_default_ignorable_character_is_made_visible() -> None:
    """Nothing invisible passes: every control, format character and line or paragraph
    separator Unicode knows (the Python here has its database), and the default ignorable
    characters that are none of those (Hangul fillers, variation selectors, ...)."""
    hidden = [
        chr(code)
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in {"Cc", "Cf", "Zl", "Zp", "Cs"}
    ]
    hidden += ["\u034f", "\u115f", "\u1160", "\u3164", "\uffa0", "\ufe0f", "\U000e0100"]
    assert [c for c in hidden if visible(c) == c] == []


def test_combining_marks_piled_on_one_character_are_made_visible_past_two() -> None:
    """Hundreds of marks on one letter paint over the page around it; two are shown."""
    assert visible("e\u0301\u0331\u0301\u0331") == "e\u0301\u0331\\u0301\\u0331"
    assert visible("v" + "\u0301" * 800).count("\\u0301") == 798
    for text in ("नमस्ते", "ก้้", "résumé", "Ἀθῆναι"):  # scripts' own marks, two at most
        assert visible(text) == text


@pytest.mark.parametrize("formatter", [LogfmtFormatter(), JsonFormatter()])
def test_log_lines_carry_no_separator_or_bidirectional_control(
    formatter: LogfmtFormatter | JsonFormatter,
) -> None:
    record = logging.LogRecord("ledger_exporter", logging.WARNING, __file__, 1, "m", (), None)
    sent = f"v1\x85next\u2028line\u2029para{RLO}x\x1b[31m\x9b"
    record.fields = {"version": sent}
    line = formatter.format(record)
    assert not UNSAFE.search(line), line
    if isinstance(formatter, JsonFormatter):
        assert json.loads(line)["version"] == sent
