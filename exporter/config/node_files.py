"""``node_files``: node lists kept in files of their own, as Prometheus' ``file_sd_configs``.

Each file (YAML, or JSON, which YAML reads too) holds a list of node entries written
exactly as under ``nodes`` and read by the same code (:func:`read_node_list`), with the same
checks and the same care for secrets. Relative ``*_file`` paths in a node file are relative
to that file's folder. The files a config's globs match are listed afresh at every look, so
a file that appears is read, and one that goes away takes its nodes with it.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from exporter.config.nodes import (
    Expectation,
    NodeConfig,
    check_pinned_chains,
    is_secret,
    is_secret_key,
    read_node_list,
)
from exporter.config.schema import Reader, checking, locate
from exporter.config.yamlsource import Path
from exporter.errors import ConfigError

#: A node file larger than this is refused unread: a node list of thousands of nodes is
#: far smaller, and a file written wrong (a log, a dump) must not fill the memory.
MAX_NODE_FILE_BYTES = 4 * 1024 * 1024


class _NodeFileReader(Reader):
    """Reads one node file: secrets are where they are in a ``nodes`` entry."""

    def secret(self, path: Path) -> bool:
        return is_secret(path)

    def secret_key(self, path: Path) -> bool:
        return is_secret_key(path)


def matching_files(patterns: tuple[str, ...]) -> list[str]:
    """The regular files the globs (absolute) match now, each once, sorted by name."""
    found: set[str] = set()
    for pattern in patterns:
        found.update(name for name in glob.glob(pattern) if os.path.isfile(name))
    return sorted(found)


def read_node_file(path: str, longest_label: int) -> tuple[tuple[NodeConfig, ...], list[int]]:
    """The nodes of the node file at ``path`` and the line of each entry; raises ConfigError
    listing every problem (``longest_label``: the config's max_label_value_length)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_NODE_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigError(path, [f"cannot read the file: {error.strerror or error}"]) from None
    if len(raw) > MAX_NODE_FILE_BYTES:
        limit = MAX_NODE_FILE_BYTES // (1024 * 1024)
        raise ConfigError(path, [f"the file is larger than {limit} MiB; split it"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(path, ["the file is not UTF-8 text"]) from None
    return parse_node_file(text, path, longest_label)


def parse_node_file(
    text: str, source: str, longest_label: int
) -> tuple[tuple[NodeConfig, ...], list[int]]:
    """Validate a node file's text (see :func:`read_node_file`)."""
    reader = _NodeFileReader(locate(text, source), source)
    with checking(source):
        nodes = _nodes(reader, reader.located.data, longest_label)
    if reader.problems:
        raise ConfigError(source, reader.problems)
    lines = [reader.located.line_of((index,)) or 0 for index in range(len(nodes))]
    return nodes, lines


def _nodes(reader: Reader, data: Any, longest_label: int) -> tuple[NodeConfig, ...]:
    if data is None:  # an empty file: no nodes (yet)
        return ()
    if not isinstance(data, list):
        reader.problem((), "must be a list of node entries, each as under nodes in the config")
        return ()
    nodes = read_node_list(reader, data, ())
    pinned: list[tuple[Path, Expectation | None]] = [
        ((index, "expect", "blockchains"), node.expect) for index, node in enumerate(nodes)
    ]
    check_pinned_chains(reader, pinned, longest_label)
    return nodes


def node_file_names(patterns: tuple[str, ...], longest_label: int) -> frozenset[str]:
    """The names of the nodes in the node files that can be read now (the others are left
    out: they are reported when the exporter reads them)."""
    names: set[str] = set()
    for path in matching_files(patterns):
        try:
            nodes, _ = read_node_file(path, longest_label)
        except ConfigError:
            continue
        names.update(node.name for node in nodes)
    return frozenset(names)
