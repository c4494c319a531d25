"""The watch-list series: one watched object's samples, as the writer writes them.

A pure function (``watch_samples``) of one object as one node answered: its ``_up``, then
what its reading holds, ``_info`` only when the node sent one of its identity fields. Which
attribute of a reading feeds which family and label is read off the rows of
:mod:`exporter.model.fields`, once at import.
"""

from __future__ import annotations

from exporter.expose import metrics as m
from exporter.expose.metrics import MetricSpec
from exporter.model import fields as f
from exporter.model.fields import Field
from exporter.model.watch_readings import (
    ContractReading,
    Reading,
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
#: The label that names the watched object, by kind.
_NAMED_BY = {
    WatchKind.CONTRACT: f.CONTRACT[-1],
    WatchKind.CONTRACT_STATE: f.CONTRACT[-1],
    WatchKind.WALLET: f.WALLET[-1],
}


class _Table:
    """What the writer needs of one answer's rows: its plain gauges as (reading attribute,
    family), and its ``_info`` family with each identity field as (label, attribute)."""

    __slots__ = ("gauges", "identity", "info")

    def __init__(self, table: tuple[Field, ...]) -> None:
        self.gauges = tuple((row.attribute, m.family_of(row)) for row in table if row.is_gauge)
        identity = [row for row in table if row.label and row.family.endswith("_info")]
        self.info = m.family_of(identity[0]) if identity else None
        self.identity = tuple((row.label, row.attribute) for row in identity)

    def samples(self, labels: Labels, reading: Reading) -> list[Sample]:
        """The plain gauges the reading holds, then its ``_info`` when the node sent any of
        the identity fields (a missing one is ``""``)."""
        samples: list[Sample] = []
        for attribute, spec in self.gauges:
            value = getattr(reading, attribute)
            if value is not None:
                samples.append((spec, labels, value))
        if self.info is not None:
            texts = {label: getattr(reading, attribute) for label, attribute in self.identity}
            if any(text is not None for text in texts.values()):
                info = {label: text or "" for label, text in texts.items()}
                samples.append((self.info, {**labels, **info}, 1.0))
        return samples


_CONTRACT = _Table(f.CONTRACT_FIELDS)
_STATE = _Table(f.CONTRACT_STATE_FIELDS)
_WALLET = _Table(f.WALLET_FIELDS)
_STATUS = m.family_of(f.CONTRACT_STATUS)
_STATE_VALUE = m.family_of(f.CONTRACT_STATE)
_PERMISSION = m.family_of(f.AUTH_GROUPS)
#: The labels a state value and a grant add to the object's: its key; its group and flag.
(_KEY,) = f.CONTRACT_STATE.labels[len(f.CONTRACT) :]
_GROUP, _FLAG = f.AUTH_GROUPS.labels[len(f.WALLET) :]


def watch_samples(watched: WatchedObject) -> list[Sample]:
    """Every sample of one watched object: its ``_up``, then what its reading holds."""
    labels: Labels = {
        "node": watched.node,
        **dict(watched.node_labels),
        "blockchain": watched.blockchain,
        _NAMED_BY[watched.kind]: watched.name,
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
        statuses = dict.fromkeys((*f.CONTRACT_STATUSES, reading.status))
        label = f.CONTRACT_STATUS.label
        for status in statuses:
            value = 1.0 if status == reading.status else 0.0
            samples.append((_STATUS, {**labels, label: status}, value))
    return samples + _CONTRACT.samples(labels, reading)


def _state(labels: Labels, reading: StateReading) -> list[Sample]:
    samples = _STATE.samples(labels, reading)
    for key, value in reading.values:
        samples.append((_STATE_VALUE, {**labels, _KEY: key}, value))
    return samples


def _wallet(labels: Labels, reading: WalletReading) -> list[Sample]:
    samples = _WALLET.samples(labels, reading)
    for group, permission, granted in reading.permissions:
        samples.append((_PERMISSION, {**labels, _GROUP: group, _FLAG: permission}, granted))
    return samples
