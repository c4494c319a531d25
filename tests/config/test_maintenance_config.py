"""The config's ``maintenance`` list: what it reads (times with an offset, quoted or as YAML
reads them unquoted; node and chain entries) and how an entry applies on the wall clock.
The refused entries are ``testdata/config/invalid-maintenance-*.yml``
(``tests/config/test_config.py`` reads them)."""

from __future__ import annotations

import re

import pytest

from exporter.config.exporter import parse_config
from exporter.config.maintenance import MaintenanceEntry
from exporter.errors import ConfigError
from tests.support.testdata import REPO

NODES = "nodes:\n  - name: a\n    url: http://127.0.0.1:7740/\n"
#: 2026-11-28T18:00:00Z as Unix seconds.
EVENING = 1_795_888_800.0


@pytest.mark.parametrize(
    "until",
    [
        "2026-11-28T18:00:00Z",
        "'2026-11-28T18:00:00Z'",
        "2026-11-28T19:00:00+01:00",
        '"2026-11-28T12:30:00-05:30"',
        "2026-11-28t18:00:00z",
        "2026-11-28T18:00:00.000Z",
    ],
)
def test_until_is_a_time_with_an_offset_quoted_or_not(until: str) -> None:
    config = parse_config(
        NODES + f"maintenance:\n  - node: a\n    until: {until}\n    reason: kernel upgrade\n"
    )
    assert config.maintenance == (MaintenanceEntry("a", "", EVENING, "kernel upgrade"),)


def test_node_and_chain_entries_in_the_files_order() -> None:
    config = parse_config(
        NODES + "maintenance:\n"
        "  - blockchain: 02d29a77\n    until: 2026-11-28T18:00:00Z\n    reason: chain upgrade\n"
        "  - node: a\n    until: 2026-11-28T20:00:00+02:00\n    reason: 'disk swap: rack 4'\n"
    )
    assert config.maintenance == (
        MaintenanceEntry("", "02d29a77", EVENING, "chain upgrade"),
        MaintenanceEntry("a", "", EVENING, "disk swap: rack 4"),
    )
    assert config.maintenance[0].until_text == "2026-11-28T18:00:00Z"


def test_no_list_and_an_empty_list_are_no_maintenance() -> None:
    assert parse_config(NODES).maintenance == ()
    assert parse_config(NODES + "maintenance: []\n").maintenance == ()


def test_an_entry_long_past_still_loads_and_never_applies() -> None:
    """A file must not turn invalid with time: an old entry left in it is harmless."""
    config = parse_config(
        NODES + "maintenance:\n  - node: a\n    until: 2001-01-01T00:00:00Z\n    reason: old\n"
    )
    (entry,) = config.maintenance
    assert not entry.applies_at(EVENING)


def test_an_entry_applies_until_its_until_on_the_wall_clock() -> None:
    entry = MaintenanceEntry("a", "", EVENING, "kernel upgrade")
    assert entry.applies_at(EVENING - 0.001)
    assert not entry.applies_at(EVENING)
    assert not entry.applies_at(EVENING + 3600)


def test_an_entry_naming_a_node_removed_by_the_same_edit_is_refused() -> None:
    """A reload that drops a node but keeps its entry is refused whole (the running config
    stays), naming the entry."""
    with pytest.raises(ConfigError) as caught:
        parse_config(
            NODES + "maintenance:\n  - node: b\n    until: 2026-11-28T18:00:00Z\n    reason: r\n"
        )
    assert caught.value.problems == ["line 5: maintenance[0].node: names no configured node: 'b'"]


def test_the_examples_commented_entries_are_valid() -> None:
    text = (REPO / "config" / "example.yml").read_text(encoding="utf-8")
    block = re.search(r"^# maintenance:\n(#   .*\n)+", text, re.MULTILINE)
    assert block is not None
    entries = re.sub(r"^# ", "", block[0], flags=re.MULTILINE)
    config = parse_config(text.replace(block[0], entries))
    assert [(e.node, e.reason) for e in config.maintenance] == [
        ("validator-2", "kernel upgrade"),
        ("", "chain software upgrade"),
    ]
    assert [e.until for e in config.maintenance] == [EVENING, EVENING + 1800]
