"""Alert rules on a faster clock, for end-to-end tests against a real Prometheus.

:func:`shorten_rules` divides every time in a rule file by ``scale``, so that with
``scale = 60`` a minute becomes a second and the rules keep their proportions: every ``for``
(2m -> 2s), every range window and subquery step (``[5m]`` -> ``[5s]``) and offset, and every
age: ``time() - <timestamp>`` and the ``*_age_seconds`` gauges are multiplied by ``scale``, so
each age threshold is reached ``scale`` times sooner whether it is a number (a fallback of
600 s) or comes from the nodes' own settings (the stall rule's txMaxTimeTrigger +
consensusTimeout + grace, the stuck session's consensus timeouts). The exporter's own ages
(``ledger_exporter_*``: how long since its last cycle) stay as they are: its cycles run at
their real pace whatever the scale, and the bounds they are compared with come from its own
settings, in real seconds too. Counts (blocks, peers, messages, rounds) stay as they are and
nothing else in an expression changes, so a test proves the real expressions and their label
guards.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

#: The exporter's own ages, left unscaled (see the module's docstring).
_OWN_AGE = re.compile(r"(?:time\(\)\s*-\s*)?ledger_exporter_")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_RANGE = re.compile(r"\[(\w+)(:\w*)?\]")
_OFFSET = re.compile(r"\boffset\s+(\w+)")
#: An age: seconds since a timestamp, or a gauge of one (``..._age_seconds{...}``). The
#: timestamp may be read folded over an HA pair's replicas (``max without(r) (ts{...})``).
_AGE = re.compile(
    r"time\(\)\s*-\s*(?P<fold>(?:max|min)\s+without\s*\([^)]*\)\s*\(\s*)?"
    r"[a-zA-Z_:][\w:]*(?:\{[^}]*\})?(?(fold)\s*\))"
    r"|\b[a-zA-Z_:][\w:]*_age_seconds(?:\{[^}]*\})?(?![\w:])"
)


def duration_ms(text: str) -> int:
    """Milliseconds of a Prometheus duration such as ``1m30s`` or ``500ms``."""
    if not re.fullmatch(r"(?:\d+(?:ms|s|m|h|d|w))+", text):
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(count) * _UNIT_MS[unit] for count, unit in _PART.findall(text))


def scaled(text: str, scale: int) -> str:
    """``text`` divided by ``scale``, in whole seconds when possible (``2m`` -> ``2s``)."""
    ms = duration_ms(text) // scale
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def shorten_expr(expr: str, scale: int) -> str:
    """``expr`` with its range windows and offsets divided by ``scale`` and its ages
    multiplied by it."""
    if "@" in expr:
        raise ValueError(f"cannot shorten @ modifiers: {expr!r}")

    def window(match: re.Match[str]) -> str:
        step = match[2] or ""
        inner = f":{scaled(step[1:], scale)}" if step[1:] else step
        return f"[{scaled(match[1], scale)}{inner}]"

    def age(match: re.Match[str]) -> str:
        if _OWN_AGE.match(match[0]):
            return match[0]
        return f"({scale} * ({match[0]}))"

    def offset(match: re.Match[str]) -> str:
        return f"offset {scaled(match[1], scale)}"

    return _AGE.sub(age, _OFFSET.sub(offset, _RANGE.sub(window, expr)))


def shorten_rules(document: dict[str, Any], scale: int) -> dict[str, Any]:
    """A copy of a rule file with every ``for`` and every expression shortened."""
    groups = []
    for group in document["groups"]:
        rules = []
        for rule in group["rules"]:
            short = {**rule, "expr": shorten_expr(rule["expr"], scale)}
            if "for" in rule:
                short["for"] = scaled(rule["for"], scale)
            rules.append(short)
        groups.append({**group, "rules": rules})
    return {**document, "groups": groups}


def write_shortened(source: Path, target: Path, scale: int) -> Path:
    """Write ``source`` (a rule file) shortened by ``scale`` to ``target``; ``target``."""
    document = yaml.safe_load(source.read_text(encoding="utf-8"))
    target.write_text(yaml.safe_dump(shorten_rules(document, scale), sort_keys=False))
    return target


def load_rules(path: Path) -> dict[str, Any]:
    """The rules of a rule file by alert or record name."""
    return {
        rule.get("alert") or rule["record"]: rule
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
        for rule in group["rules"]
    }
