"""YAML loading that remembers the line of every key, so config errors can point at it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]
_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlSyntaxError(Exception):
    """The file is not valid YAML; the message names the line."""


@dataclass
class LocatedYaml:
    """Plain Python data from a YAML document plus the line (1-based) of each key path."""

    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    duplicates: list[tuple[Path, int]] = field(default_factory=list)

    def line_of(self, path: Path) -> int | None:
        """Line of the closest known ancestor of ``path``."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None


def load_located(text: str) -> LocatedYaml:
    """Parse one YAML document; mapping keys must be scalars, duplicates are recorded."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise YamlSyntaxError(_describe(error)) from None
    located = LocatedYaml(data=None)
    if root is None:
        return located
    located.data = _convert(root, (), located)
    return located


def _convert(node: yaml.Node, path: Path, located: LocatedYaml) -> Any:
    located.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        own = [(key, value) for key, value in node.value if key.tag != _MERGE_TAG]
        for key_node, value_node in own:
            key_text = str(_scalar(key_node))
            key_path = (*path, key_text)
            if key_text in result:
                located.duplicates.append((key_path, key_node.start_mark.line + 1))
            located.lines[key_path] = key_node.start_mark.line + 1
            result[key_text] = _convert(value_node, key_path, located)
        for key_node, value_node in _merged(node):
            key_text = str(_scalar(key_node))
            if key_text not in result:  # the mapping's own keys win over merged ones
                key_path = (*path, key_text)
                located.lines[key_path] = key_node.start_mark.line + 1
                result[key_text] = _convert(value_node, key_path, located)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, index), located) for index, item in enumerate(node.value)]
    return _scalar(node)


def _merged(node: yaml.MappingNode) -> list[tuple[yaml.Node, yaml.Node]]:
    """The entries that ``<<: *defaults`` (or ``<<: [*a, *b]``, earlier ones winning) merges
    into ``node``, as YAML's merge key type says; their lines are those of the anchor."""
    entries: list[tuple[yaml.Node, yaml.Node]] = []
    for key_node, value_node in node.value:
        if key_node.tag != _MERGE_TAG:
            continue
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                line = source.start_mark.line + 1
                raise YamlSyntaxError(f"line {line}: '<<' merges only mappings or lists of them")
            for inner_key, inner_value in source.value:
                if inner_key.tag == _MERGE_TAG:  # a merge inside the merged mapping
                    entries.extend(_merged(source))
                else:
                    entries.append((inner_key, inner_value))
    seen: set[str] = set()
    unique = []
    for key_node, value_node in entries:
        key_text = str(_scalar(key_node))
        if key_text not in seen:
            seen.add(key_text)
            unique.append((key_node, value_node))
    return unique


def _scalar(node: yaml.Node) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        raise YamlSyntaxError(f"line {node.start_mark.line + 1}: keys must be plain scalars")
    constructor = yaml.SafeLoader(stream="")
    try:
        return constructor.construct_object(node, deep=True)
    except yaml.YAMLError as error:
        raise YamlSyntaxError(_describe(error)) from None
    except (ValueError, TypeError, AttributeError):  # a tag the text does not fit: ``!!int x``
        line = node.start_mark.line + 1
        raise YamlSyntaxError(f"line {line}: the value is not a valid {node.tag}") from None
    finally:
        constructor.dispose()


def _describe(error: yaml.YAMLError) -> str:
    """``line L, column C: problem``, without PyYAML's echo of the source line (a secret?)."""
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return str(error).replace("\n", " ")
    mark = error.problem_mark
    context = ""
    if error.context:
        started = error.context_mark
        where = f" (from line {started.line + 1})" if started else ""
        context = f"{error.context}{where}, "
    problem = error.problem or "not valid YAML"
    return f"line {mark.line + 1}, column {mark.column + 1}: {context}{problem}"
