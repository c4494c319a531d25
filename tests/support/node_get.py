"""One node document read through the exporter's own client, waited for: what a test of the
client or of a node's answers needs (the exporter never waits; it passes ``NodeClient.get`` a
callback)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from exporter.poll.client import NodeClient, Query
from exporter.poll.results import FetchError


def get_document(
    client: NodeClient, segments: Sequence[str], deadline: float, query: Query = ()
) -> Any:
    """GET the document at ``segments`` with ``client`` and decode it, waiting for the
    answer; raises the FetchError the callback was given on any failure."""
    result: Future[Any] = Future()

    def done(document: Any, error: FetchError | None) -> None:
        if error is None:
            result.set_result(document)
        else:
            result.set_exception(error)

    client.get(segments, deadline, done, query)
    return result.result()
