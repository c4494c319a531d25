"""YAML loading that remembers the line of every key, so config errors can point at it.

A syntax error names its line and column and what went wrong, never the text found there: the
text may be a secret (an unquoted password starting with ``*`` is read as an alias name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from exporter.errors import YamlSyntaxError

Path = tuple[str | int, ...]
_MERGE_TAG = "tag:yaml.org,2002:merge"
#: Quoted text in PyYAML's messages: a token kind such as '<block end>', one YAML indicator or
#: white-space character ('@', '\\t'), or else text of the document, which is never shown.
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_SAFE_QUOTED = re.compile(r"""'<[a-z ]+>'|'[-?:,\[\]{}#&*!|>%@`. ]'|"'"|'\\[tnr]'|'"'""")
#: What the operator can do about PyYAML's problems that quote document text.
_HINTS = (
    ("found undefined alias", "an alias (*name) that no anchor defines", "*", "an alias"),
    ("found duplicate anchor", "an anchor (&name) defined twice", "&", "an anchor"),
    ("could not determine a constructor", "an unknown tag", "!", "a tag"),
    ("found undefined tag handle", "an unknown tag handle", "!", "a tag"),
    ("expected chomping or indentation", "a bad block scalar header", "| or >", "a block scalar"),
)


@dataclass
class LocatedYaml:
    """Plain Python data from a YAML document plus the line (1-based) of each key path."""

    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    duplicates: list[tuple[Path, int]] = field(default_factory=list)
    #: For each path whose node appears at other paths too (YAML anchors and aliases, merge
    #: keys): those other paths, so a value that is a secret in one place is one everywhere.
    shared: dict[Path, list[Path]] = field(default_factory=dict)
    _seen: dict[int, list[Path]] = field(default_factory=dict, init=False, repr=False)

    def sharing(self, path: Path) -> list[Path]:
        """``path`` and every other path whose value is the very same YAML node."""
        return [path, *self.shared.get(path, ())]

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
        located = LocatedYaml(data=None)
        if root is not None:
            located.data = _convert(root, (), located)
    except yaml.YAMLError as error:
        raise YamlSyntaxError(_describe(error, text)) from None
    except RecursionError:
        raise YamlSyntaxError("collections are nested too deeply") from None
    located._seen.clear()
    return located


def _convert(node: yaml.Node, path: Path, located: LocatedYaml) -> Any:
    located.lines.setdefault(path, node.start_mark.line + 1)
    paths = located._seen.setdefault(id(node), [])
    for other in paths:
        located.shared.setdefault(path, []).append(other)
        located.shared.setdefault(other, []).append(path)
    paths.append(path)
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
        raise YamlSyntaxError(_describe(error, "")) from None
    except (ValueError, TypeError, AttributeError):  # a tag the text does not fit: ``!!int x``
        line = node.start_mark.line + 1
        raise YamlSyntaxError(f"line {line}: the value is not a valid {node.tag}") from None
    finally:
        constructor.dispose()


def _describe(error: yaml.YAMLError, text: str) -> str:
    """``line L, column C: problem``, without PyYAML's echo of the source line nor any text of
    the document (an alias, anchor or tag name may be a password written unquoted)."""
    if isinstance(error, yaml.reader.ReaderError):  # a control character: its code is shown
        line = text.count("\n", 0, error.position) + 1
        column = error.position - text.rfind("\n", 0, error.position)
        code = ord(error.character) if isinstance(error.character, str) else error.character
        return (
            f"line {line}, column {column}: character #x{code:04x} is not allowed;"
            " write it as an escape in a double-quoted string"
        )
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem_mark is None:
        return _unquoted(str(error).replace("\n", " "))
    mark = error.problem_mark
    context = ""
    if error.context:
        started = error.context_mark
        where = f" (from line {started.line + 1})" if started else ""
        context = f"{_unquoted(error.context)}{where}, "
    problem = _unquoted(error.problem or "not valid YAML")
    said = f"{error.context or ''} {error.problem or ''}"
    for start, description, indicator, reading in _HINTS:
        if start in said:
            context = ""
            problem = (
                f"{description}; an unquoted value starting with {indicator} is read as"
                f" {reading}: quote it"
            )
    return f"line {mark.line + 1}, column {mark.column + 1}: {context}{problem}"


def _unquoted(message: str) -> str:
    """``message`` with each quoted piece of document text replaced (token kinds and single
    YAML indicators stay: they say what was expected and found, and hold no secret)."""

    def replace(match: re.Match[str]) -> str:
        return match.group() if _SAFE_QUOTED.fullmatch(match.group()) else "(text not shown)"

    return _QUOTED.sub(replace, message)
