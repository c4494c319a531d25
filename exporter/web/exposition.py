"""What the server answers for one snapshot, rendered once per cycle, not once per scrape.

The exporter's own families are written directly by :mod:`exporter.expose.render` (their sample
lines once for both formats); the runtime families (process, platform, GC) come from
``runtime`` (client_python's, wired by the app: :mod:`exporter.runtime`). Each format and its
gzip form is built on first request, or ahead of the swap for the variants scrapers asked
before, and then served from memory. The status page (``/``) is kept the same way.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable

from exporter.expose import render
from exporter.expose.metrics import MetricSpec
from exporter.expose.render import Renderer
from exporter.model.snapshot import Snapshot
from exporter.web.landing import StatusPage


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


#: The runtime families at this moment, in the text format and in OpenMetrics (without its
#: ``# EOF``): called once per exposition, at its first render.
RuntimeFamilies = Callable[[], tuple[bytes, bytes]]
Variant = tuple[bool, bool]  # (OpenMetrics, gzip)


def no_runtime_families() -> tuple[bytes, bytes]:
    """No runtime families (an exposition made for a test or a tool)."""
    return b"", b""


class _Writer:
    """One variant being written: the parts of its body, or a gzip stream of them."""

    def __init__(self, variant: Variant) -> None:
        self.openmetrics, gzipped = variant
        self.headers = render.openmetrics_headers if self.openmetrics else render.text_headers
        self.parts: list[bytes] = []
        # level 1: a third of level 6's CPU for ~15 % more bytes; 31: the gzip container
        self.packer = zlib.compressobj(1, zlib.DEFLATED, 31) if gzipped else None

    def add(self, part: bytes) -> None:
        self.parts.append(self.packer.compress(part) if self.packer else part)

    def finish(self, runtime: bytes) -> bytes:
        self.add(runtime)
        if self.openmetrics:
            self.add(render.OPENMETRICS_END)
        if self.packer:
            self.parts.append(self.packer.flush())
        return b"".join(self.parts)


class _Writers:
    """The render's sink: every family's header and lines to each variant being written."""

    def __init__(self, writers: list[_Writer]) -> None:
        self._writers = writers

    def family(self, spec: MetricSpec) -> None:
        for writer in self._writers:
            writer.add(writer.headers(spec).encode())

    def lines(self, chunk: bytes) -> None:
        for writer in self._writers:
            writer.add(chunk)


class Exposition:
    """The bytes served for one snapshot, per format and encoding, each built at most once."""

    def __init__(
        self,
        snapshot: Snapshot,
        asked: tuple[Variant, ...] = (),
        renderer: Renderer | None = None,
        runtime: RuntimeFamilies = no_runtime_families,
        telemetry_path: str = "/metrics",
    ) -> None:
        self.snapshot = snapshot
        self._telemetry_path = telemetry_path  # the status page links to it
        self._asked = asked  # variants asked of an earlier exposition, to render next time
        self._renderer = renderer or Renderer()  # shared across cycles: it caches label strings
        self._runtime_families = runtime
        self._lock = threading.Lock()
        self._cache: dict[Variant, bytes] = {}
        self._runtime: dict[bool, bytes] = {}  # per format, so gzip and plain hold the same
        self._page_lock = threading.Lock()  # not _lock: /metrics never waits for the page
        self._page: StatusPage | None = None

    def asked_for(self) -> tuple[Variant, ...]:
        """The (OpenMetrics, gzip) variants scrapers have asked for so far."""
        with self._lock:
            return tuple(dict.fromkeys((*self._asked, *self._cache)))

    def prepare(self, variants: tuple[Variant, ...], page: bool = False) -> Exposition:
        """Render ``variants`` (and the status page if ``page``) now, so the first request
        for this snapshot waits for nothing."""
        with self._lock:
            missing = [variant for variant in dict.fromkeys(variants) if variant not in self._cache]
            self._cache.update(self._render(missing))
        if page:
            self._status_page()
        return self

    def page_asked(self) -> bool:
        """Whether the status page of this snapshot has been asked for (or prepared)."""
        return self._page is not None

    def landing(self, now: float) -> bytes:
        """The status page (``/``) at ``now``: rendered once for the snapshot, then copied."""
        return self._status_page().at(now)

    def _status_page(self) -> StatusPage:
        with self._page_lock:
            if self._page is None:
                self._page = StatusPage(self.snapshot, self._telemetry_path)
            return self._page

    def body(self, openmetrics_format: bool, gzipped: bool) -> bytes:
        """The exposition in the asked format; safe to call from many server threads."""
        key = (openmetrics_format, gzipped)
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                cached = self._cache[key] = self._render([key])[key]
            return cached

    def _render(self, variants: list[Variant]) -> dict[Variant, bytes]:
        """Write ``variants`` in one pass: each family's lines are formatted once, a chunk at
        a time, handed to every variant (compressed at once for gzip) and dropped, so a
        render never holds the whole text of a family."""
        if not variants:
            return {}
        writers = [_Writer(variant) for variant in variants]
        self._renderer.write(self.snapshot, _Writers(writers))
        if not self._runtime:
            self._runtime[False], self._runtime[True] = self._runtime_families()
        runtime = self._runtime
        return {v: w.finish(runtime[w.openmetrics]) for v, w in zip(variants, writers, strict=True)}
