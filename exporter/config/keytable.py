"""Plain config keys, each declared once: a field of the frozen dataclass that holds it.

A plain key is a value with a default (a number, a duration, a size, a list of names). Its
declaration is the field itself, ``name: int = setting(default, Whole(1), "what it does")``:
the field's name is the key, its default is the default, the check validates what the file
gives, and the text documents it. The config loader reads every such field with
:func:`read_settings`, the allowed keys of a section are derived from them, and
``make docs`` writes the reference table of docs/configuration.md and the settings blocks
of config/example.yml from them (tools/render_docs.py), so a new plain key is one field.

The cardinality bounds (:class:`exporter.bounds.Bounds`) sit below the config in the layers;
they declare their keys in a :class:`exporter.bounds.BoundKey` and are read here the same way.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from exporter.bounds import BoundKey, Bounds
from exporter.config.schema import Reader
from exporter.config.yamlsource import Path
from exporter.values import format_go_duration, parse_go_duration

#: The key of a field's metadata that holds its :class:`Key`.
KEY = "config_key"
_SIZE = re.compile(r"(\d{1,15})\s*(B|KiB|MiB|GiB)?", re.ASCII)
_SIZE_UNITS = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


class Check:
    """How a key's value is validated and how its default is written in YAML."""

    def read(self, reader: Reader, value: Any, path: Path) -> Any:
        """The value to use, or :data:`INVALID` after telling ``reader`` what is wrong."""
        raise NotImplementedError

    def show(self, value: Any) -> str:
        """``value`` as the config file writes it (``15s``, ``8MiB``, ``[hash, blockHash]``)."""
        return str(value)

    def limits(self) -> str:
        """The range the check accepts, as the docs state it (empty: nothing to add)."""
        return ""


#: What :meth:`Check.read` returns for a refused value (the default is used instead).
INVALID: Any = object()


@dataclass(frozen=True)
class Duration(Check):
    """A Go duration (``15s``, ``1m30s``) from ``low`` to ``high`` seconds, read as seconds."""

    low: float
    high: float

    def read(self, reader: Reader, value: Any, path: Path) -> Any:
        try:
            seconds = parse_go_duration(value) if isinstance(value, str) else -1.0
        except ValueError:
            seconds = -1.0
        if self.low <= seconds <= self.high:
            return seconds
        reader.problem(
            path,
            f"must be a duration from {self.show(self.low)} to {self.show(self.high)} such as"
            f" 15s or 1m{reader.instead(path, value)}",
        )
        return INVALID

    def show(self, value: Any) -> str:
        return format_go_duration(float(value))

    def limits(self) -> str:
        return f"from `{self.show(self.low)}` to `{self.show(self.high)}`"


@dataclass(frozen=True)
class Whole(Check):
    """A whole number from ``low`` (to ``high`` when given); ``why`` explains the ceiling."""

    low: int
    high: int | None = None
    why: str = ""

    def read(self, reader: Reader, value: Any, path: Path) -> Any:
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
        if number is not None and self.low <= number and (self.high is None or number <= self.high):
            return number
        if number is not None and self.high is not None and self.why and number > self.high:
            reader.problem(path, f"must be at most {self.high}, not {number}: {self.why}")
        elif self.high is not None and not self.why:
            reader.problem(
                path,
                f"must be a whole number from {self.low} to {self.high}"
                f"{reader.instead(path, value)}",
            )
        else:
            shown = "of at least 1" if self.low == 1 else f">= {self.low}"
            reader.problem(path, f"must be a whole number {shown}{reader.instead(path, value)}")
        return INVALID

    def limits(self) -> str:
        return "" if self.high is None else f"from {self.low} to {self.high}"


@dataclass(frozen=True)
class Size(Check):
    """A positive number of bytes, or one with a unit: ``8MiB``, ``512KiB``, ``1048576``."""

    def read(self, reader: Reader, value: Any, path: Path) -> Any:
        match = _SIZE.fullmatch(value) if isinstance(value, str) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if match and int(match.group(1)) > 0:
            return int(match.group(1)) * _SIZE_UNITS[match.group(2)]
        reader.problem(
            path, "must be a positive size such as 8MiB or 1048576" + reader.instead(path, value)
        )
        return INVALID

    def show(self, value: Any) -> str:
        for unit in ("GiB", "MiB", "KiB"):
            if value % _SIZE_UNITS[unit] == 0:
                return f"{value // _SIZE_UNITS[unit]}{unit}"
        return str(value)


@dataclass(frozen=True)
class Flag(Check):
    """A YAML boolean (``"true"`` quoted, ``1`` or ``enabled`` is a mistake, not a yes)."""

    def read(self, reader: Reader, value: Any, path: Path) -> Any:
        if isinstance(value, bool):
            return value
        reader.problem(path, f"must be true or false{reader.instead(path, value)}")
        return INVALID

    def show(self, value: Any) -> str:
        return "true" if value else "false"


@dataclass(frozen=True)
class Names(Check):
    """A non-empty list of distinct non-empty strings, read as a tuple."""

    def read(self, reader: Reader, value: Any, path: Path) -> Any:
        if not isinstance(value, list) or not value:
            reader.problem(path, "must be a non-empty list of field names")
            return INVALID
        names = [reader.string(item, (*path, i)) for i, item in enumerate(value)]
        if len(set(names)) != len(names):
            reader.problem(path, "lists a field more than once")
        return tuple(dict.fromkeys(name for name in names if name))

    def show(self, value: Any) -> str:
        return "[" + ", ".join(value) + "]"


@dataclass(frozen=True)
class Key:
    """A plain key's check and documentation (its name and default are its field's)."""

    check: Check
    doc: str
    #: The default as the docs say it, when it is more than the value (``10s`` (at most ...)).
    shown: str | None = None


def setting(default: Any, check: Check, doc: str, *, shown: str | None = None) -> Any:
    """Declare a dataclass field as a plain config key: its default, check and doc text."""
    return field(default=default, metadata={KEY: Key(check, doc, shown)})


@dataclass(frozen=True)
class Declared:
    """One plain key as it is read and documented: its name, default, check and text."""

    name: str
    default: Any
    key: Key

    @property
    def shown_default(self) -> str:
        """The default as the docs and the example config write it."""
        return self.key.shown or f"`{self.key.check.show(self.default)}`"


def declared(cls: type[Any]) -> Iterator[Declared]:
    """The plain keys a dataclass declares, in field order."""
    for item in dataclasses.fields(cls):
        key = item.metadata.get(KEY)
        if key is not None:
            yield Declared(item.name, item.default, key)


def bound_keys() -> Iterator[tuple[str, Declared]]:
    """(field of :class:`Bounds`, its config key) for every configurable cardinality bound."""
    for item in dataclasses.fields(Bounds):
        bound: BoundKey = item.metadata[BoundKey.METADATA]
        check = Whole(1, bound.most)
        yield item.name, Declared(bound.key, item.default, Key(check, bound.doc))


def key_names(cls: type[Any]) -> tuple[str, ...]:
    """The names of the plain keys ``cls`` declares."""
    return tuple(item.name for item in declared(cls))


def read_settings(
    reader: Reader,
    data: Mapping[str, Any],
    cls: type[Any],
    path: Path,
    refused: set[str] | None = None,
) -> dict[str, Any]:
    """Every plain key of ``cls`` from the section ``data`` at ``path``, checked: the value
    given, else (and when it is refused, after the problem) the default. The names of the
    keys refused are added to ``refused``, so a check across keys does not judge a default
    that stands in for a refused value."""
    values = {}
    for item in declared(cls):
        value = item.default
        if item.name in data:
            read = item.key.check.read(reader, data[item.name], (*path, item.name))
            if read is INVALID and refused is not None:
                refused.add(item.name)
            value = item.default if read is INVALID else read
        values[item.name] = value
    return values


def read_bounds(reader: Reader, data: Mapping[str, Any], path: Path) -> Bounds:
    """The cardinality bounds a section sets (their keys are top-level keys)."""
    values = {}
    for name, item in bound_keys():
        value = item.default
        if item.name in data:
            read = item.key.check.read(reader, data[item.name], (*path, item.name))
            value = item.default if read is INVALID else read
        values[name] = value
    return Bounds(**values)
