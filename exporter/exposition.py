"""A snapshot rendered to bytes once per cycle, not once per scrape.

The exporter's own families are written directly by :mod:`exporter.render` (their sample
lines once for both formats); client_python renders only the runtime families (process,
platform, GC). Each format and its gzip form is built on first request, or ahead of the
swap for the variants scrapers asked before, and then served from memory.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterable

from prometheus_client import exposition, openmetrics
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from exporter import render
from exporter.metrics import MetricSpec
from exporter.render import Renderer
from exporter.snapshot import Snapshot

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def wants_openmetrics(accept: str | None) -> bool:
    """True when the Accept header lists OpenMetrics (Prometheus asks for it first)."""
    return any(
        part.split(";")[0].strip() == "application/openmetrics-text"
        for part in (accept or "").split(",")
    )


def accepts_gzip(accept_encoding: str | None) -> bool:
    """True when the client accepts gzip (and did not refuse it with q=0)."""
    for part in (accept_encoding or "").split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() in ("gzip", "*"):
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


class _RuntimeRegistry(CollectorRegistry):
    """The process, platform and GC runtime metrics, rendered by client_python."""

    def __init__(self) -> None:
        super().__init__(auto_describe=False)
        ProcessCollector(registry=self)
        PlatformCollector(registry=self)
        GCCollector(registry=self)


class Exposition:
    """The bytes served for one snapshot, per format and encoding, each built at most once."""

    def __init__(
        self,
        snapshot: Snapshot,
        asked: tuple[tuple[bool, bool], ...] = (),
        renderer: Renderer | None = None,
    ) -> None:
        self.snapshot = snapshot
        self._asked = asked  # variants asked of an earlier exposition, to render next time
        self._renderer = renderer or Renderer()  # shared across cycles: it caches label strings
        self._lock = threading.RLock()  # the gzip form renders the plain one under the lock
        self._cache: dict[tuple[bool, bool], bytes] = {}
        self._families: dict[MetricSpec, bytearray] | None = None

    def asked_for(self) -> tuple[tuple[bool, bool], ...]:
        """The (OpenMetrics, gzip) variants scrapers have asked for so far."""
        with self._lock:
            return tuple(dict.fromkeys((*self._asked, *self._cache)))

    def prepare(self, variants: tuple[tuple[bool, bool], ...]) -> Exposition:
        """Render ``variants`` now, so the first scrape of this snapshot waits for nothing."""
        for openmetrics_format, gzipped in variants:
            self.body(openmetrics_format, gzipped)
        with self._lock:
            self._families = None  # rendered: the sample lines need not stay in memory
        return self

    def body(self, openmetrics_format: bool, gzipped: bool) -> bytes:
        """The exposition in the asked format; safe to call from many server threads."""
        key = (openmetrics_format, gzipped)
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                cached = self._render(openmetrics_format, gzipped)
                self._cache[key] = cached
            return cached

    def _render(self, openmetrics_format: bool, gzipped: bool) -> bytes:
        """One variant; a gzip one is compressed family by family, never whole in memory."""
        if self._families is None:
            self._families = self._renderer.samples(self.snapshot)
        registry = _RuntimeRegistry()
        if openmetrics_format:
            headers = render.openmetrics_headers
            runtime: bytes = openmetrics.exposition.generate_latest(registry)  # type: ignore[no-untyped-call]
        else:
            headers = render.text_headers
            runtime = exposition.generate_latest(registry)
        pieces = [(headers(spec).encode(), lines) for spec, lines in self._families.items()]
        if not gzipped:
            return b"".join([*(part for piece in pieces for part in piece), runtime])
        # level 1: a third of level 6's CPU for ~15 % more bytes; 31: the gzip container
        packer = zlib.compressobj(1, zlib.DEFLATED, 31)
        packed = [packer.compress(part) for piece in pieces for part in piece]
        return b"".join([*packed, packer.compress(runtime), packer.flush()])


def render_collectors(collectors: Iterable[Collector]) -> bytes:
    """Text exposition of the given collectors (for tests and tools)."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return exposition.generate_latest(registry)
