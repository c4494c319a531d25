"""Why a request to a node failed: the ``reason`` label of ``ledger_node_scrape_errors_total``.

Part of the model, beside the readings: the poll classifies each failure by it
(:class:`exporter.poll.results.FetchError` carries one), and the catalogue
(:mod:`exporter.expose.metrics`) lists its values, without the exposition reaching into the
poll.
"""

from __future__ import annotations

from enum import Enum


class Reason(Enum):
    """Why a request failed: the ``reason`` label of ``ledger_node_scrape_errors_total``."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    HTTP_STATUS = "http_status"
    INVALID_JSON = "invalid_json"
    INVALID_RESPONSE = "invalid_response"
    TOO_LARGE = "too_large"
    TLS = "tls"  # the TLS handshake failed (the detail says why)
    # the node's certificate failed verification (expired, not yet valid, unknown issuer,
    # another host's): never retried without verification
    CERTIFICATE = "certificate"
    #: the node answered as another node than its ``expect`` pins: not trusted, read as down
    IDENTITY_MISMATCH = "identity_mismatch"
