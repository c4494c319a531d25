"""The watch-list series: one watched object's samples, as the writer writes them.

A pure function (``watch_samples``) of one object as one node answered: its ``_up``, then
what its reading holds, ``_info`` only when the node sent one of its identity fields.
"""

from __future__ import annotations

from exporter.expose import metrics as m
from exporter.expose.metrics import MetricSpec
from exporter.model.watch_readings import (
    CONTRACT_STATUSES,
    ContractReading,
    StateReading,
    WalletReading,
    WatchedObject,
    WatchKind,
)

Labels = dict[str, str]
Sample = tuple[MetricSpec, Labels, float]
_UP = {
    WatchKind.CONTRACT: m.CONTRACT_UP,
    WatchKind.CONTRACT_STATE: m.CONTRACT_STATE_UP,
    WatchKind.WALLET: m.WALLET_UP,
}


def watch_samples(watched: WatchedObject) -> list[Sample]:
    """Every sample of one watched object: its ``_up``, then what its reading holds."""
    label = "wallet" if watched.kind is WatchKind.WALLET else "contract"
    labels: Labels = {
        "node": watched.node,
        **dict(watched.node_labels),
        "blockchain": watched.blockchain,
        label: watched.name,
    }
    reading = watched.reading
    samples: list[Sample] = [(_UP[watched.kind], labels, 0.0 if reading is None else 1.0)]
    if isinstance(reading, ContractReading):
        samples += _contract(labels, reading)
    elif isinstance(reading, StateReading):
        samples += _state(labels, reading)
    elif isinstance(reading, WalletReading):
        samples += _wallet(labels, reading)
    return samples


def _contract(labels: Labels, reading: ContractReading) -> list[Sample]:
    samples: list[Sample] = []
    if reading.status is not None:
        statuses = dict.fromkeys((*CONTRACT_STATUSES, reading.status))
        for status in statuses:
            value = 1.0 if status == reading.status else 0.0
            samples.append((m.CONTRACT_STATUS, {**labels, "status": status}, value))
    if reading.version is not None:
        samples.append((m.CONTRACT_VERSION, labels, reading.version))
    identity = {"vm_type": reading.vm_type, "code_hash": reading.code_hash}
    return samples + _info(m.CONTRACT_INFO, labels, reading.address, identity)


def _state(labels: Labels, reading: StateReading) -> list[Sample]:
    samples: list[Sample] = []
    if reading.version is not None:
        samples.append((m.CONTRACT_STATE_VERSION, labels, reading.version))
    for key, value in reading.values:
        samples.append((m.CONTRACT_STATE_VALUE, {**labels, "key": key}, value))
    return samples


def _wallet(labels: Labels, reading: WalletReading) -> list[Sample]:
    samples: list[Sample] = []
    if reading.enabled is not None:
        samples.append((m.WALLET_ENABLED, labels, reading.enabled))
    if reading.satellites is not None:
        samples.append((m.WALLET_SATELLITES, labels, reading.satellites))
    for group, permission, granted in reading.permissions:
        extra = {"group": group, "permission": permission}
        samples.append((m.WALLET_PERMISSION, {**labels, **extra}, granted))
    identity = {"key_type": reading.key_type, "public_key": reading.public_key}
    return samples + _info(m.WALLET_INFO, labels, reading.address, identity)


def _info(
    spec: MetricSpec, labels: Labels, address: str | None, identity: dict[str, str | None]
) -> list[Sample]:
    """An ``_info`` sample when the node sent any of its fields; a missing one is ``""``."""
    fields = {"address": address, **identity}
    if all(value is None for value in fields.values()):
        return []
    return [(spec, {**labels, **{key: value or "" for key, value in fields.items()}}, 1.0)]
