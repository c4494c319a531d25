"""Validation of YAML documents that reports every problem at once, with key path and line.

Shared by the exporter's config and its web config: unknown keys are refused, and a problem
never stops the walk, so the operator sees the whole list in one run.

A problem never quotes a value from a secret position: each reader names its file's secret
positions (``Reader.secret``), and the helpers that render values (``Reader.quote`` and
``Reader.instead``) and key paths (``Reader.where``) refuse to show them. A value reached
through a YAML alias of a secret is a secret too, and mappings and lists are described by
their kind, never rendered (they may hold one).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from exporter.config.yamlsource import LocatedYaml, Path, load_located
from exporter.errors import ConfigError, YamlSyntaxError

#: Longest text of a value a problem quotes (a long one is cut, marked with "...").
QUOTED_LENGTH = 60
NOT_SHOWN = "(value not shown)"


@contextmanager
def checking(source: str) -> Iterator[None]:
    """Turn an exception the checks did not foresee into a ConfigError that names only its
    type: its message might quote a value, and it would reach the log and a reload's answer."""
    try:
        yield
    except ConfigError:
        raise
    except Exception as error:  # a bug: the file is refused all the same, and says why
        name = type(error).__name__
        problem = f"the check failed unexpectedly ({name}); please report this as a bug"
        raise ConfigError(source, [problem]) from error


def read_document(path: str) -> tuple[str, str]:
    """The text of a config file (and its name for messages); raises ConfigError."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), path
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(path, [f"cannot read the file: {error}"]) from None


def locate(text: str, source: str) -> LocatedYaml:
    """Parse YAML keeping lines; raises ConfigError on a syntax error."""
    try:
        return load_located(text)
    except YamlSyntaxError as error:
        raise ConfigError(source, [f"invalid YAML: {error}"]) from None


def is_text(value: str) -> bool:
    """True when ``value`` can be a file name, a variable name or a request's text: no NUL,
    no lone surrogate (a YAML ``"\\ud800"`` escape makes one)."""
    return "\0" not in value and not any("\ud800" <= char <= "\udfff" for char in value)


def dotted(path: Path) -> str:
    """``("nodes", 2, "url")`` as ``nodes[2].url``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


class Reader:
    """Walks YAML data, converting values and collecting problems instead of stopping."""

    def __init__(self, located: LocatedYaml, source: str | None = None) -> None:
        self.located = located
        self._found: list[tuple[int, str]] = []
        self.base_dir = os.path.dirname(os.path.abspath(source)) if source else None
        for path, line in located.duplicates:
            self._found.append((line, f"line {line}: {self.where(path)}: key given more than once"))

    @property
    def problems(self) -> list[str]:
        """Every problem found so far, in the order of the lines they point at (problems of
        the whole file first), so the operator reads them top to bottom."""
        return [message for _, message in sorted(self._found, key=lambda found: found[0])]

    def problem(self, path: Path, message: str) -> None:
        line = self.located.line_of(path)
        where = f"line {line}: " if line is not None else ""
        self._found.append((line or 0, f"{where}{self.where(path)}: {message}"))

    def secret(self, path: Path) -> bool:
        """True when the value at ``path`` is a secret (a subclass names its file's)."""
        return False

    def secret_key(self, path: Path) -> bool:
        """True when the last key of ``path`` may itself hold a secret, as a flow mapping's
        ``{password S3CRET}`` (a missing colon) makes one (a subclass names its file's)."""
        return False

    def is_secret(self, path: Path) -> bool:
        """True when the value at ``path``, or at any path sharing its YAML node, is secret."""
        return any(self.secret(shared) for shared in self.located.sharing(path))

    def where(self, path: Path) -> str:
        """``path`` as ``nodes[2].url``, with each key that may hold a secret not shown."""
        shown = tuple(
            "<key not shown>" if isinstance(part, str) and self.secret_key(path[: i + 1]) else part
            for i, part in enumerate(path)
        )
        return dotted(shown)

    def quote(self, path: Path, value: Any) -> str:
        """``value`` (found at ``path``) as a problem may show it: a short repr, or what kind
        of value it is when it is a secret, a mapping or a list."""
        if self.is_secret(path):
            return NOT_SHOWN
        if isinstance(value, dict):
            return "a mapping"
        if isinstance(value, list):
            return "a list"
        if isinstance(value, str) and len(value) > QUOTED_LENGTH:
            return repr(value[:QUOTED_LENGTH]) + "..."
        return repr(value)

    def instead(self, path: Path, value: Any) -> str:
        """The end of a "must be X" problem: ``, not 5``, or `` (value not shown)``."""
        quoted = self.quote(path, value)
        return f" {quoted}" if quoted == NOT_SHOWN else f", not {quoted}"

    def mapping(
        self, value: Any, path: Path, allowed: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.problem(path, "must be a mapping of keys to values")
            return {}
        for key in value:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                self.problem((*path, key), f"unknown key; {hint}allowed keys: {', '.join(allowed)}")
        for key in required:
            if key not in value:
                self.problem(path, f"missing required key '{key}'")
        return {key: item for key, item in value.items() if key in allowed}

    def string(self, value: Any, path: Path) -> str:
        if not isinstance(value, str) or not value:
            self.problem(path, f"must be a non-empty string{self.instead(path, value)}")
            return ""
        if not is_text(value):
            self.problem(path, f"must not hold NUL or a lone surrogate such as \\ud800 {NOT_SHOWN}")
            return ""
        return value

    def boolean(self, value: Any, path: Path) -> bool:
        if not isinstance(value, bool):
            self.problem(path, f"must be true or false{self.instead(path, value)}")
            return False
        return value

    def resolve(self, name: str) -> str:
        """A relative path is relative to the config file's folder, as in Prometheus."""
        return os.path.join(self.base_dir, name) if self.base_dir else name

    def readable_file(self, value: Any, path: Path) -> str | None:
        if value is None:
            return None
        name = self.string(value, path)
        if name and not os.access(self.resolve(name), os.R_OK):
            self.problem(path, f"file {self.quote(path, name)} does not exist or is not readable")
        return self.resolve(name) if name else None
