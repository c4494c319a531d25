"""Every default the shipped configs' comments and docs/configuration.md's config table
state is the real one.

A stated default that is a value (``Default: 15s.``, a table cell such as `` `512` ``) is
checked by the parser itself: a config setting the key to that value must read exactly as
the same config without the key. A default stated in words (``Default: the address.``) is
checked by a reviewed predicate on a config without the key; a new one fails until it is
given one. A new user found ``max_concurrency: 64`` called the default while it was 512.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.config.exporter import Config, parse_config
from tests.support.testdata import REPO

SHIPPED_CONFIGS = sorted((REPO / "config").glob("*.yml"))
CONFIGURATION = REPO / "docs" / "configuration.md"

#: The smallest config with every section a stated default may sit in.
BASE: dict[str, Any] = {
    "nodes": [{"name": "a", "url": "http://127.0.0.1:9/"}],
    "probe": {"allowed_targets": [r"http://127\.0\.0\.1:9/"]},
    "dns_sd_configs": [{"names": ["nodes.example"]}],
    "watch": {
        "contracts": [{"blockchain": "c", "address": "0xc0"}],
        "wallets": [{"blockchain": "c", "address": "0xa0"}],
    },
}

#: Defaults stated in words, reviewed: each predicate holds for BASE, which leaves them out.
PROSE_DEFAULTS: dict[str, Callable[[Config], bool]] = {
    "every chain the node's /health lists": lambda c: c.nodes[0].blockchains is None,
    "the system's CAs": lambda c: c.nodes[0].tls.ca_file is None,
    "the address": lambda c: (
        c.watch.contracts[0].name == c.watch.contracts[0].address
        and c.watch.wallets[0].name == c.watch.wallets[0].address
    ),
    "every node that lists the chain": lambda c: c.watch.contracts[0].nodes is None,
}

_LITERAL = r"\[[^\]]*\]|\{[^}]*\}|[^\s.,;()]+"
_STATED = re.compile(rf"Default: (?:(?P<literal>{_LITERAL})(?=\.|,|;|\s*\(|$)|(?P<prose>[^.,;]+))")


@dataclass(frozen=True)
class Stated:
    """A default stated somewhere: where, for which key path (None: no key follows), what."""

    where: str
    key: str | None
    text: str
    literal: bool


def _key_line(line: str) -> tuple[int, bool, str] | None:
    """(indent of the key, whether it opens a list item, key) of a YAML key line."""
    match = re.match(r"^(\s*)(- )?([A-Za-z_]+):", line)
    if match is None:
        return None
    return len(match.group(1)) + (2 if match.group(2) else 0), bool(match.group(2)), match[3]


def stated_in_config(path: Path) -> Iterator[Stated]:
    """``Default:`` in each comment block, bound to the key line right below the block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    stack: list[tuple[int, str]] = []  # (indent, prefix of its children) of enclosing keys
    comment: list[str] = []
    for number, line in enumerate(lines, 1):
        if line.strip().startswith("#"):
            comment.append(line.strip().lstrip("#").strip())
            continue
        found = _key_line(line)
        key = None
        if found is not None:
            indent, item, name = found
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if item and stack:  # a list item: its keys, this one and later ones, are key[].x
                stack[-1] = (
                    stack[-1][0],
                    stack[-1][1].removesuffix("[].").removesuffix(".") + "[].",
                )
            key = (stack[-1][1] if stack else "") + name
            stack.append((indent, key + "."))
        for match in _STATED.finditer(" ".join(comment)):
            literal = match.group("literal") is not None
            text = (match.group("literal") or match.group("prose")).strip()
            yield Stated(f"{path.name}:{number}", key, text, literal)
        comment = []


def stated_in_docs() -> Iterator[Stated]:
    """The config table's rows whose default cell starts with a value in backticks."""
    lines = CONFIGURATION.read_text(encoding="utf-8").splitlines()
    start = lines.index("## Configuration file")
    end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith("## ")), len(lines))
    for number in range(start, end):
        row = re.match(r"^\| `([a-z_.\[\]]+)` \| `([^`]+)`", lines[number])
        if row:
            yield Stated(f"configuration.md:{number + 1}", row[1], row[2], True)


def _set(document: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``document`` with ``key`` (``a.b``, ``nodes[].c``) set to ``value``."""
    result = copy.deepcopy(document)
    node: Any = result
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part.removesuffix("[]"), [{}] if part.endswith("[]") else {})
        if part.endswith("[]"):
            node = node[0]
    node[parts[-1]] = value
    return result


def _parse(document: dict[str, Any]) -> Config:
    return parse_config(yaml.safe_dump(document))


def is_default(key: str, text: str) -> bool:
    """Whether setting ``key`` to the YAML ``text`` reads as leaving it out."""
    return _parse(_set(BASE, key, yaml.safe_load(text))) == _parse(BASE)


ALL_STATED = [s for path in SHIPPED_CONFIGS for s in stated_in_config(path)]
ALL_STATED += list(stated_in_docs())


def test_the_configs_and_the_docs_state_defaults() -> None:
    """The scanners find what they are meant to (a broken regex must not pass silently)."""
    wheres = {s.where.split(":")[0] for s in ALL_STATED}
    assert {"example.yml", "probe.yml"} <= wheres
    assert "configuration.md" in wheres
    keys = {s.key for s in ALL_STATED if s.literal}
    assert {"max_concurrency", "network_checks.checkpoint_depth", "probe.max_in_flight"} <= keys


@pytest.mark.parametrize(
    "stated", [s for s in ALL_STATED if s.literal], ids=lambda s: f"{s.where}:{s.key}"
)
def test_a_stated_default_value_is_the_real_one(stated: Stated) -> None:
    assert stated.key is not None, f"{stated.where}: 'Default: {stated.text}' but no key below"
    assert is_default(stated.key, stated.text), (
        f"{stated.where}: {stated.key} is said to default to {stated.text}, it does not"
    )


@pytest.mark.parametrize("stated", [s for s in ALL_STATED if not s.literal], ids=lambda s: s.where)
def test_a_default_stated_in_words_is_reviewed_and_true(stated: Stated) -> None:
    check = PROSE_DEFAULTS.get(stated.text)
    assert check is not None, (
        f"{stated.where}: 'Default: {stated.text}' is not a value; add a predicate to "
        "PROSE_DEFAULTS that checks it"
    )
    assert check(_parse(BASE)), f"{stated.where}: 'Default: {stated.text}' is not true"


def test_every_reviewed_prose_default_is_still_stated() -> None:
    assert set(PROSE_DEFAULTS) == {s.text for s in ALL_STATED if not s.literal}


@pytest.mark.parametrize(
    ("key", "text", "default"),
    [
        ("max_concurrency", "512", True),
        ("max_concurrency", "64", False),  # what config/example.yml used to call the default
        ("scrape_timeout", "10s", True),
        ("network_checks.block_hash_fields", "[hash, blockHash]", True),
        ("network_checks.block_hash_fields", "[blockHash, hash]", False),
        ("nodes[].tls_config.insecure_skip_verify", "true", False),
    ],
)
def test_the_check_tells_a_default_from_another_value(key: str, text: str, default: bool) -> None:
    assert is_default(key, text) is default
