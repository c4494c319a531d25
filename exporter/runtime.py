"""The process, platform and GC metrics of /metrics: the only families client_python renders.

Wired into each exposition by the app (:mod:`exporter.app`); nothing else in the package
imports client_python, and no ledger series goes through it (the writer,
:mod:`exporter.expose.render`, writes those itself).
"""

from __future__ import annotations

from prometheus_client import exposition, openmetrics
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import CollectorRegistry

_OPENMETRICS_END = b"# EOF\n"


def runtime_families() -> tuple[bytes, bytes]:
    """The runtime families now, in the text format and in OpenMetrics (without ``# EOF``:
    the exposition ends the document after them)."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    text = exposition.generate_latest(registry)
    om: bytes = openmetrics.exposition.generate_latest(registry)  # type: ignore[no-untyped-call]
    return text, om.removesuffix(_OPENMETRICS_END)
