"""The metric reference, ``docs/metrics.md``, read as data: each family's type and labels from
its group's table. Independent of the code's catalogue on purpose: the contract's oracle and the
scrape tests hold the exporter to what the committed page promises its users.
"""

from __future__ import annotations

import re
from functools import cache
from typing import NamedTuple

from tests.support.testdata import REPO

PAGE = REPO / "docs" / "metrics.md"
#: ``| [`name`](#name) | type | `label`, `label` | unit |``
_ROW = re.compile(
    r"^\| \[`(?P<name>[a-z_:]+)`\]\(#[a-z_:]+\) \| (?P<kind>gauge|counter) \| (?P<labels>[^|]*) \|"
)


class Documented(NamedTuple):
    """One family as the page documents it."""

    kind: str
    labels: frozenset[str]


@cache
def families() -> dict[str, Documented]:
    """Family (sample name, counters with ``_total``) -> its documented type and labels."""
    found: dict[str, Documented] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            labels = frozenset(re.findall(r"`([a-z_]+)`", match["labels"]))
            found[match["name"]] = Documented(match["kind"], labels)
    assert found, f"no family table found in {PAGE}"
    return found


@cache
def label_values(label: str) -> tuple[str, ...]:
    """The values the page's label table lists for ``label`` (``endpoint``, ``reason``...)."""
    text = PAGE.read_text(encoding="utf-8")
    row = re.search(rf"^\| `{label}` \| (.*) \|$", text, re.M)
    assert row, f"{PAGE} documents no label {label!r}"
    meaning = row[1].split(":", 1)[1] if ":" in row[1] else ""
    return tuple(re.findall(r"`([^`]+)`", meaning))


#: ``**Read from:** `path` of `GET /endpoint`, read as how.`` below a family's heading
_SOURCE = re.compile(
    r"^\*\*Read from:\*\* `(?P<path>[A-Za-z.]+)` of `(?P<answer>[^`]+)`, read as (?P<how>[^.]+)\.$"
)


@cache
def sources(answer: str) -> dict[str, tuple[str, str]]:
    """Family -> (the dotted path of the field it is read from, how it is read: ``a count``,
    ``a flag``...), for the families the page says are read from one field of ``answer``
    (``GET /blockchains/{id}``)."""
    found: dict[str, tuple[str, str]] = {}
    family = ""
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^### `([a-z_:]+)`$", line)
        if heading:
            family = heading[1]
        source = _SOURCE.match(line)
        if source and source["answer"] == answer:
            found[family] = (source["path"], source["how"])
    return found
