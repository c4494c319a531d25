"""A chain's consensus settings and feature flags as its deployment configured them, and the
``consensus_drift`` fault's changes to them on one node.

The settings are derived from the seed. The simulator mints a block every block interval,
which stands for the chain's ``txMaxTimeTrigger`` (the longest a block waits), so a
consensus round, ``consensusTimeout`` long on the chain, lasts
``consensusTimeout / txMaxTimeTrigger`` block intervals in the simulation.
"""

from __future__ import annotations

from typing import Any

from ledger_simulator.errors import SimulatorError
from ledger_simulator.ids import DurationError, go_duration, parse_go_duration, pick

EXTRA_FEATURE = "enableCouncilRotation"  # the deployment-specific flag of this network
KEY_TYPE = "secp256k1"
#: Every setting ``consensus_drift`` can change, and its kind: where it is served
#: (``consensus``, ``features`` or the status document itself) and how a value is written.
SETTINGS = {
    "consensusType": "text",
    "txKarmaThreshold": "count",
    "txMintThreshold": "count",
    "txMaxTimeTrigger": "duration",
    "minMembers": "count",
    "consensusTimeout": "duration",
    "keyType": "text",
    "enableJoinCouncilOnStartup": "flag",
    "enableXMOnBlockMint": "flag",
    "enableTxProof": "flag",
    EXTRA_FEATURE: "flag",
}
#: What ``consensus_drift`` changes when no setting is named: a node restarted with another
#: round timeout in its configuration, the usual drift.
DEFAULT_DRIFT = "consensusTimeout"
#: A text setting's drifted value when none is given.
TEXT_DRIFT = {"consensusType": "council_leader_proposal_v2", "keyType": "ed25519"}
Value = str | int | bool


class SettingError(SimulatorError, ValueError):
    """A ``consensus_drift`` names an unknown setting or a value of the wrong kind."""


def timeout_seconds(seed: int, chain: int) -> int:
    """The chain's ``consensusTimeout`` in seconds: 30 s to 1m45s."""
    return (2 + pick(6, seed, "timeout", chain)) * 15


def trigger_seconds(seed: int, chain: int) -> int:
    """The chain's ``txMaxTimeTrigger`` in seconds: 15 s to 1 m."""
    return (1 + pick(4, seed, "trigger", chain)) * 15


def round_timeout(seed: int, chain: int, interval: float) -> float:
    """How long a consensus round lasts in the simulation: ``consensusTimeout`` scaled as a
    block interval scales ``txMaxTimeTrigger``."""
    return timeout_seconds(seed, chain) * interval / trigger_seconds(seed, chain)


def consensus(seed: int, chain: int, council_size: int) -> dict[str, Any]:
    """The ``consensus`` object of the chain's deployment."""
    return {
        "consensusType": "council_leader_proposal",
        "txKarmaThreshold": (1 + pick(10, seed, "karma", chain)) * 100,
        "txMintThreshold": (1 + pick(20, seed, "mint", chain)) * 50,
        "txMaxTimeTrigger": go_duration(trigger_seconds(seed, chain)),
        "minMembers": min(council_size, 3),
        "consensusTimeout": go_duration(timeout_seconds(seed, chain)),
    }


def features(seed: int, chain: int) -> dict[str, bool]:
    """The three documented flags plus this deployment's extra one."""
    return {
        "enableJoinCouncilOnStartup": pick(4, seed, "join", chain) != 0,
        "enableXMOnBlockMint": pick(2, seed, "xm", chain) == 0,
        "enableTxProof": True,
        EXTRA_FEATURE: pick(3, seed, "rotation", chain) == 0,
    }


def parse_drift(setting: str | None, raw: object) -> tuple[str, Value | None]:
    """The setting a ``consensus_drift`` changes (default ``consensusTimeout``) and the value it
    reports, as served (a duration as Go writes it); None: the default change (a duration
    doubled, a count one higher, a flag flipped, another text)."""
    name = DEFAULT_DRIFT if setting is None else setting
    kind = SETTINGS.get(name)
    if kind is None:
        raise SettingError(
            f"consensus_drift: unknown setting {name!r}; choose one of: {', '.join(SETTINGS)}"
        )
    if raw is None:
        return name, None
    return name, _value(name, kind, raw)


def _value(name: str, kind: str, raw: object) -> Value:
    """``raw`` (JSON, or the text of ``--fault``) as a value of ``kind``."""
    text = raw.lower() if isinstance(raw, str) else None
    if kind == "flag" and (isinstance(raw, bool) or text in ("true", "false")):
        return raw if isinstance(raw, bool) else text == "true"
    if kind == "count" and not isinstance(raw, bool):
        if isinstance(raw, int) and raw >= 0:
            return raw
        if isinstance(raw, str) and raw.isascii() and raw.isdigit():
            return int(raw)
    if kind == "duration" and isinstance(raw, str):
        try:
            return go_duration(parse_go_duration(raw))
        except DurationError as error:
            raise SettingError(f"consensus_drift: {name}: {error}") from None
    if kind == "text" and isinstance(raw, str) and raw:
        return raw
    wanted = {
        "flag": "true or false",
        "count": "a whole number >= 0",
        "duration": 'a Go duration such as "45s"',
        "text": "a non-empty string",
    }[kind]
    raise SettingError(f"consensus_drift: {name} takes {wanted}, got {raw!r}")


def drifted(setting: str, current: Value, value: Value | None) -> Value:
    """What a node under ``consensus_drift`` reports for ``setting`` instead of ``current``."""
    if value is not None:
        return value
    kind = SETTINGS[setting]
    if kind == "flag":
        return not current
    if kind == "count":
        return int(current) + 1
    if kind == "duration":
        return go_duration(2 * parse_go_duration(str(current)))
    return TEXT_DRIFT[setting]
