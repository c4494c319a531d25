"""What the transport of a node's requests showed: its last TLS handshake (the certificate
chain, version and cipher) and the phases of each kind of request's last answer.

libcurl measures both on every request the exporter already makes; the engine reads them
(:mod:`exporter.poll.engine`), each node's client keeps the last ones
(:mod:`exporter.poll.client`), and the snapshot holds them as a :class:`TransportStatus`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

#: The kinds of request, as the ``endpoint`` label names them (ledger_node_scrape_errors_total
#: names the same ones): /health, a chain's status, its checkpoint block, a watched contract,
#: its state, a watched wallet.
ENDPOINT_KINDS = ("health", "blockchain", "block", "contract", "contract_state", "wallet")
#: The phases of a request, in order, as the ``phase`` label names them: name resolution, the
#: TCP connect, the TLS handshake, the node's processing (request sent to first byte) and the
#: transfer of the rest of the answer.
PHASES = ("resolve", "connect", "tls", "processing", "transfer")
_TLS_PHASE = PHASES.index("tls")
_WIDTH = len(PHASES)
#: Every kind's phases in one packed array of float64 (NaN: no answer of that kind yet).
_PACKED = struct.Struct(f"={len(ENDPOINT_KINDS) * _WIDTH}d")
NO_PHASES = _PACKED.pack(*(math.nan,) * (len(ENDPOINT_KINDS) * _WIDTH))


def endpoint_kind(segments: Sequence[str]) -> int:
    """The position in ENDPOINT_KINDS of the request to the API path ``segments``."""
    first, count = segments[0] if segments else "", len(segments)
    if first == "health":
        return 0
    if first == "wallets":
        return 5
    if count >= 4 and segments[2] == "contracts":
        return 4 if count >= 5 else 3
    return 2 if count >= 3 else 1


class Handshake(NamedTuple):
    """What a new TLS connection to a node showed: the earliest notAfter of the chain it
    presented (Unix seconds; None when no date could be read), the negotiated version and
    cipher (empty when libcurl did not name them), the node certificate's issuer and subject
    common names as OpenSSL prints them (escaped to ASCII; empty without one) and its SHA-256
    fingerprint (hex of the DER; empty without one). libcurl reports the certificates only for
    the request that made the handshake: a kept-alive connection shows the last one's."""

    expiry: float | None
    version: str
    cipher: str
    issuer_cn: str
    subject_cn: str
    fingerprint: str

    def info_labels(self) -> tuple[str, str, str, str, str]:
        """The ``ledger_node_tls_info`` label values, in TLS_INFO_LABELS' order."""
        return self.version, self.cipher, self.issuer_cn, self.subject_cn, self.fingerprint


#: The labels of ``ledger_node_tls_info`` beyond the node's, in order.
TLS_INFO_LABELS = ("version", "cipher", "issuer_cn", "subject_cn", "serial_fingerprint")


@dataclass(frozen=True, slots=True)
class TransportStatus:
    """A node's transport in a snapshot: the last handshake (None over plain http, or before
    the first), whether its info labels fit ``max_label_value_length`` (else no info series),
    and each kind's last phases, packed (:data:`NO_PHASES` where none yet)."""

    handshake: Handshake | None = None
    info_fits: bool = True
    phases: bytes = NO_PHASES
    https: bool = False

    def phase_rows(self) -> Iterator[tuple[str, str, float]]:
        """(endpoint, phase, seconds) of every kind answered at least once; no ``tls`` phase
        over plain http."""
        values = _PACKED.unpack(self.phases)
        for kind, endpoint in enumerate(ENDPOINT_KINDS):
            row = values[kind * _WIDTH : (kind + 1) * _WIDTH]
            if math.isnan(row[0]):
                continue
            for position, (phase, seconds) in enumerate(zip(PHASES, row, strict=True)):
                if position != _TLS_PHASE or self.https:
                    yield endpoint, phase, seconds
