"""What the server answers for one snapshot, rendered once per cycle, not once per scrape.

The exporter's own families are written directly by :mod:`exporter.expose.render` (their sample
lines once for both formats); the runtime families (process, platform, GC) come from
``runtime`` (client_python's, wired by the app: :mod:`exporter.runtime`). Each format and its
gzip form is built on first request, or ahead of the swap for the variants scrapers asked
before, and then served from memory; when both gzip forms are built together, their long
chunks of sample lines are deflated once for both. The status page (``/``) is kept the same
way.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable

from exporter.expose import render
from exporter.expose.metrics import MetricSpec
from exporter.expose.render import Renderer
from exporter.model.snapshot import Snapshot
from exporter.web.landing import StatusPage
from exporter.web.problems import Attention, Held


def wants_openmetrics(accept: str | None) -> bool:
    """True when the Accept header prefers OpenMetrics (Prometheus lists it first, at the
    highest weight) to the text format: listed with a weight above 0 and not below
    ``text/plain``'s (``text/*``'s or ``*/*``'s when it is not listed, RFC 9110 12.5.1)."""
    weights = accepted_weights(accept)
    openmetrics = weights.get("application/openmetrics-text", 0.0)
    text = weights.get("text/plain", weights.get("text/*", weights.get("*/*", 0.0)))
    return openmetrics > 0 and openmetrics >= text


def accepts_gzip(accept_encoding: str | None) -> bool:
    """True when the client accepts gzip: listed (or ``*``, when gzip is not) with a weight
    above 0 (RFC 9110, 12.5.3)."""
    weights = accepted_weights(accept_encoding)
    for coding in ("gzip", "x-gzip", "*"):
        if coding in weights:
            return weights[coding] > 0
    return False


def accepted_weights(header: str | None) -> dict[str, float]:
    """Each value an Accept or Accept-Encoding header lists (lower case, parameters off) and
    its weight: ``q`` (any case), 1 when absent. A value listed twice keeps its highest
    weight; one whose weight is not a number from 0 to 1 is left out."""
    weights: dict[str, float] = {}
    for element in (header or "").split(","):
        value, *params = element.split(";")
        value = value.strip().lower()
        weight: float | None = 1.0
        for param in params:
            name, _, text = param.partition("=")
            if name.strip().lower() == "q":
                weight = _weight(text)
        if value and weight is not None:
            weights[value] = max(weight, weights.get(value, 0.0))
    return weights


def _weight(text: str) -> float | None:
    """A qvalue ("0", "0.5", "1.000"): None when it is not one."""
    text = text.strip()
    head, _, digits = text.partition(".")
    plain_digits = digits.isascii() and (digits.isdigit() or not digits)
    if head not in ("0", "1") or len(digits) > 3 or not plain_digits:
        return None
    weight = float(text)
    return weight if weight <= 1 else None


#: The runtime families at this moment, in the text format and in OpenMetrics (without its
#: ``# EOF``): called once per exposition, at its first render.
RuntimeFamilies = Callable[[], tuple[bytes, bytes]]
Variant = tuple[bool, bool]  # (OpenMetrics, gzip)


def no_runtime_families() -> tuple[bytes, bytes]:
    """No runtime families (an exposition made for a test or a tool)."""
    return b"", b""


#: The gzip member header zlib writes at level 1 (RFC 1952): deflate, no file name, no
#: time, the "fastest" flag, Unix.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\x03"
#: A chunk of sample lines at least this long is deflated once for every gzip variant;
#: shorter ones (small fleets, small families) are deflated in each variant's own stream,
#: where they compress against what came before (sharing every chunk made the bodies of 10
#: nodes 40 % larger; 4 and 16 KiB measured alike).
SHARED_CHUNK_MIN = 16384


class _Writer:
    """One plain variant being written: the parts of its body."""

    def __init__(self, openmetrics: bool) -> None:
        self.openmetrics = openmetrics
        self.headers = render.openmetrics_headers if openmetrics else render.text_headers
        self.parts: list[bytes] = []

    def add(self, text: bytes) -> None:
        """Append ``text`` (a family's header, sample lines, the runtime families)."""
        self.parts.append(text)

    def add_shared(self, chunk: bytes, segment: bytes) -> None:
        """Append sample lines written in every variant (``segment``: deflated, for gzip)."""
        self.parts.append(chunk)

    def finish(self, runtime: bytes) -> bytes:
        """The whole body, ending with ``runtime`` (and ``# EOF``); the parts are dropped."""
        self.add(runtime + render.OPENMETRICS_END if self.openmetrics else runtime)
        self.close()
        body = b"".join(self.parts)
        self.parts.clear()
        return body

    def close(self) -> None:
        """Append what ends the body after its text: nothing in plain."""


class _GzipWriter(_Writer):
    """One gzip variant being written: a gzip member whose raw deflate stream is its own
    compressed text, cut where a shared segment of sample lines is spliced in.

    A full flush ends the output byte-aligned and drops the history, so what follows it
    refers to nothing before: a chunk deflated between two full flushes is a self-contained
    segment, valid in any deflate stream at such a cut (pigz's technique). One chunk of lines,
    the same in both formats, is thus deflated once for every gzip variant. A segment per
    chunk, not per family: measured at 1000 nodes, no more bytes than one stream and a third
    less deflate CPU than a segment per family (7 % smaller): a chunk fits in deflate's
    window buffer, a family's lines make it slide.
    """

    def __init__(self, openmetrics: bool) -> None:
        super().__init__(openmetrics)
        self.parts.append(GZIP_HEADER)
        # level 1: a third of level 6's CPU for ~15 % more bytes; -15: raw, no container
        self._packer = zlib.compressobj(1, zlib.DEFLATED, -15)
        self._uncut = False  # text was compressed since the last cut
        self._crc = 0  # of the text so far, for the trailer
        self._size = 0

    def add(self, text: bytes) -> None:
        self._count(text)
        self.parts.append(self._packer.compress(text))
        self._uncut = True

    def segment(self, chunk: bytes) -> bytes:
        """``chunk`` deflated as a self-contained segment (this stream is cut before it)."""
        self.cut()
        return self._packer.compress(chunk) + self._packer.flush(zlib.Z_FULL_FLUSH)

    def cut(self) -> None:
        """Flush the text compressed so far and drop its history, ready for a segment."""
        if self._uncut:
            self.parts.append(self._packer.flush(zlib.Z_FULL_FLUSH))
            self._uncut = False

    def add_shared(self, chunk: bytes, segment: bytes) -> None:
        """Append ``segment``, ``chunk`` deflated (here or by another variant)."""
        self.cut()
        self._count(chunk)
        self.parts.append(segment)

    def close(self) -> None:
        """The final block, then the text's CRC-32 and size mod 2**32 (RFC 1952)."""
        self.parts.append(self._packer.flush())
        self.parts.append(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))

    def _count(self, text: bytes) -> None:
        self._crc = zlib.crc32(text, self._crc)
        self._size += len(text)


class _Writers:
    """The render's sink: each family's header to each variant, and its sample lines to
    every variant, a long chunk deflated once for all the gzip ones."""

    def __init__(self, variants: list[Variant]) -> None:
        self.writers = [_GzipWriter(om) if gzipped else _Writer(om) for om, gzipped in variants]
        gzip_writers = [writer for writer in self.writers if isinstance(writer, _GzipWriter)]
        # the variant whose compressor deflates the shared chunks, when there is more than one
        self._deflater = gzip_writers[0] if len(gzip_writers) > 1 else None

    def family(self, spec: MetricSpec) -> None:
        for writer in self.writers:
            writer.add(writer.headers(spec).encode())

    def lines(self, chunk: bytes) -> None:
        if self._deflater is None or len(chunk) < SHARED_CHUNK_MIN:
            for writer in self.writers:
                writer.add(chunk)
            return
        segment = self._deflater.segment(chunk)
        for writer in self.writers:
            writer.add_shared(chunk, segment)

    def finish(self, runtime: dict[bool, bytes]) -> list[bytes]:
        """Every variant's body, in order, ending with the runtime families of its format."""
        return [writer.finish(runtime[writer.openmetrics]) for writer in self.writers]


class Exposition:
    """The bytes served for one snapshot, per format and encoding, each built at most once."""

    def __init__(
        self,
        snapshot: Snapshot,
        asked: tuple[Variant, ...] = (),
        renderer: Renderer | None = None,
        runtime: RuntimeFamilies = no_runtime_families,
        telemetry_path: str = "/metrics",
        *,
        held: Held | None = None,
        page_of: Exposition | None = None,
    ) -> None:
        """``held``: the status page's memory across cycles (one for the process), so a
        problem is pending or firing on the page as its alert is in Prometheus. ``page_of``:
        the exposition whose status page this one serves (a stale form serves its fresh
        snapshot's page, which then says how stale it is, and never shows ``held`` a
        snapshot emptied of its nodes)."""
        self.snapshot = snapshot
        self._held = held
        self._page_of = page_of
        self._found: Attention | None = None  # the page's lines, once ``held`` has seen them
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
        self._observed()  # every cycle, asked or not: pending lines count from their first
        if page:
            self._status_page()
        return self

    def _observed(self) -> Attention | None:
        """The page's lines of this snapshot as ``held`` sees them (once per snapshot)."""
        with self._page_lock:
            if self._found is None and self._held is not None:
                self._found = self._held.observe(self.snapshot)
            return self._found

    def page_asked(self) -> bool:
        """Whether the status page of this snapshot has been asked for (or prepared)."""
        return self._page is not None

    def landing(self, now: float) -> bytes:
        """The status page (``/``) at ``now`` (``time.monotonic()``, the snapshot's clock):
        rendered once for the snapshot, then copied."""
        if self._page_of is not None:
            return self._page_of.landing(now)
        return self._status_page().at(now)

    def _status_page(self) -> StatusPage:
        found = self._observed()
        with self._page_lock:
            if self._page is None:
                self._page = StatusPage(self.snapshot, self._telemetry_path, found)
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
        a time, handed to every variant (deflated once for all gzip ones) and dropped, so a
        render never holds the whole text of a family."""
        if not variants:
            return {}
        sink = _Writers(variants)
        self._renderer.write(self.snapshot, sink)
        if not self._runtime:
            self._runtime[False], self._runtime[True] = self._runtime_families()
        return dict(zip(variants, sink.finish(self._runtime), strict=True))
