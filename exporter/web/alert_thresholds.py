"""The shipped alerts' thresholds, severities and runbooks, as the status page applies them.

Read once from the package's ``rules/thresholds.json``, which ``make mixin``
(tools/render_mixin.py) renders from the monitoring mixin: the thresholds from
mixin/status_page.libsonnet (the mixin's ``_config`` and the alerts' fixed windows), each
alert's severity and ``runbook_url`` from the rendered alert rules. So the page and the pages
an operator receives cannot disagree, and no number, severity or link is stated here. Every
threshold is a number; durations are seconds (the file's keys ending in ``Seconds``),
converted once, in the mixin. An alert of severity ``none`` (a dead man's switch) never
describes a problem: the rendering leaves it out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import IntEnum
from importlib import resources
from pathlib import Path
from typing import Any

_FIX = "run `make mixin` (or reinstall the package): it renders this file from mixin/"
_PARTS = ("thresholds", "severities", "runbooks", "for", "byHalt")


class Severity(IntEnum):
    """An alert's ``severity`` label; the page lists the most severe first."""

    CRITICAL = 0
    WARNING = 1
    INFO = 2

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Thresholds:
    """The thresholds the page applies, each named as in the mixin (snake_case here, the
    mixin's camelCase in the file: ``stall_grace_seconds`` is ``stallGraceSeconds``)."""

    stall_grace_seconds: float  # LedgerBlockHeightStalled, after txMaxTimeTrigger + timeout
    height_stalled_seconds: float  # LedgerBlockHeightStalled, where neither is reported
    blocks_behind_threshold: float  # LedgerNodeBehind
    behind_time_seconds: float  # LedgerNodeBehindTime (the mixin's behindTime)
    syncing_too_long_seconds: float  # LedgerBlockchainSyncingTooLong's `for`
    vote_session_stuck_timeouts: float  # LedgerVoteSessionStuck, times consensusTimeout
    vote_session_stuck_seconds: float  # LedgerVoteSessionStuck, where no timeout is reported
    leader_failed_rounds_threshold: float  # LedgerLeaderFailingRounds: this many failures ...
    leader_failed_rounds_window_seconds: float  # ... within this window
    required_votes_window_seconds: float  # LedgerCouncilQuorumThin: consensusRequired's window
    peers_low_threshold: float  # LedgerNodePeersLow: fewer peers than this, but some
    pending_messages_threshold: float  # LedgerPendingMessagesHigh: more queued than this
    delayed_messages_threshold: float  # LedgerDelayedMessagesHigh: more delayed than this
    vote_round_threshold: float  # LedgerVoteRoundsEscalating: a session past this round
    cert_expiry_critical_seconds: float  # LedgerNodeCertificateExpiring, critical under it
    cert_expiry_warning_seconds: float  # ... and warning under this
    #: Not in the file: how many seconds of the rules' time pass in one second of the
    #: monotonic clock. 1 but in a test that runs the rules shortened by the same factor
    #: (tests/support/scaling.py), so the page's ages stay those the rules compute.
    time_scale: float = 1.0

    def held(self, start: float, now: float) -> float:
        """Seconds from ``start`` to ``now`` (monotonic) on the rules' clock."""
        return (now - start) * self.time_scale


@dataclass(frozen=True)
class AlertRules:
    """What the page mirrors of the shipped alerts: its thresholds, each alert's severity,
    runbook URL and `for` (seconds its condition must hold before it fires); for an alert of
    two rules split by its chain's halt, each rule's severity (``by_halt``: while the chain
    advances, once it has halted)."""

    thresholds: Thresholds
    severities: Mapping[str, Severity]
    runbooks: Mapping[str, str]
    fors: Mapping[str, float]
    by_halt: Mapping[str, tuple[Severity, Severity]] = field(default_factory=dict)

    def severity(self, alert: str, halted: bool | None = None) -> Severity:
        """``alert``'s severity: the most severe of its rules, or, given whether its chain
        has ``halted``, the severity of the rule that then holds (an alert whose rules do not
        split by the halt has one). A name the rules lack is a bug of the page, said plainly."""
        try:
            worst = self.severities[alert]
        except KeyError:
            raise KeyError(f"{alert} is not a shipped alert (rules/thresholds.json)") from None
        if halted is None or alert not in self.by_halt:
            return worst
        advancing, stopped = self.by_halt[alert]
        return stopped if halted else advancing

    def runbook(self, alert: str) -> str:
        """``alert``'s runbook URL, as its rule's ``runbook_url`` annotation says."""
        try:
            return self.runbooks[alert]
        except KeyError:
            raise KeyError(f"{alert} is not a shipped alert (rules/thresholds.json)") from None

    def for_seconds(self, alert: str) -> float:
        """``alert``'s `for` in seconds, as its rule says."""
        try:
            return self.fors[alert]
        except KeyError:
            raise KeyError(f"{alert} is not a shipped alert (rules/thresholds.json)") from None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def parse(document: Any, source: str) -> AlertRules:
    """The rules of a thresholds.json ``document`` read from ``source`` (named in errors)."""
    if not isinstance(document, dict):
        raise ValueError(f"{source}: not a JSON object; {_FIX}")
    parts: list[dict[str, Any]] = [
        part for name in _PARTS if isinstance(part := document.get(name), dict)
    ]
    if len(parts) != len(_PARTS):
        raise ValueError(f"{source}: {', '.join(map(repr, _PARTS))} must be objects; {_FIX}")
    given, severities, runbooks, fors, by_halt = parts
    expected = {
        _camel(item.name): item.name for item in fields(Thresholds) if item.name != "time_scale"
    }
    missing, unknown = sorted(expected.keys() - given.keys()), sorted(given.keys() - expected)
    if missing or unknown:
        raise ValueError(f"{source}: thresholds missing {missing}, unknown {unknown}; {_FIX}")
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{source}: threshold {key} is {value!r}, not a number >= 0; {_FIX}")
    labels = {severity.label: severity for severity in Severity}
    for alert, label in severities.items():
        if not re.fullmatch(r"\w+", str(alert)) or label not in labels:
            raise ValueError(f"{source}: alert {alert!r} has severity {label!r}; {_FIX}")
    if runbooks.keys() != severities.keys():
        differ = sorted(runbooks.keys() ^ severities.keys())
        raise ValueError(f"{source}: runbooks and severities name other alerts {differ}; {_FIX}")
    for alert, url in runbooks.items():
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise ValueError(f"{source}: alert {alert!r} has runbook {url!r}, not a URL; {_FIX}")
    thresholds = Thresholds(**{expected[key]: value for key, value in given.items()})
    listed = {alert: labels[label] for alert, label in severities.items()}
    fors_read = _fors(fors, severities.keys(), source)
    split = _by_halt(by_halt, listed, labels, source)
    return AlertRules(thresholds, listed, dict(runbooks), fors_read, split)


def _by_halt(
    by_halt: dict[str, Any],
    listed: Mapping[str, Severity],
    labels: Mapping[str, Severity],
    source: str,
) -> dict[str, tuple[Severity, Severity]]:
    """Each alert split by its chain's halt: (its severity while the chain advances, once
    halted), for alerts the file names."""
    found = {}
    for alert, split in by_halt.items():
        if (
            alert not in listed
            or not isinstance(split, dict)
            or split.keys() != {"advancing", "halted"}
            or not all(label in labels for label in split.values())
        ):
            raise ValueError(f"{source}: alert {alert!r} has byHalt {split!r}; {_FIX}")
        found[alert] = (labels[split["advancing"]], labels[split["halted"]])
    return found


def _fors(fors: dict[str, Any], alerts: Any, source: str) -> dict[str, float]:
    """Each alert's `for` in seconds, for exactly the ``alerts`` the file names."""
    if fors.keys() != alerts:
        differ = sorted(fors.keys() ^ alerts)
        raise ValueError(f"{source}: for and severities name other alerts {differ}; {_FIX}")
    for alert, seconds in fors.items():
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ValueError(f"{source}: alert {alert!r} has for {seconds!r}, not seconds; {_FIX}")
    return {alert: float(seconds) for alert, seconds in fors.items()}


def load(path: Path | None = None) -> AlertRules:
    """The rules in ``path``, by default the package's own thresholds.json."""
    where = resources.files("exporter") / "rules" / "thresholds.json" if path is None else path
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"{where}: cannot be read ({err}); {_FIX}") from err
    try:
        document = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{where}: not JSON ({err}); {_FIX}") from err
    return parse(document, str(where))


#: The package's rules, read once when the page's modules are imported.
SHIPPED = load()
