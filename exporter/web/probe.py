"""``GET /probe?target=URL&module=NAME[&node=NAME]``: poll one node now (multi-target pattern).

The parameters are checked before anything is sent: a target is requested only when it
matches one of ``probe.allowed_targets`` whole and carries no user-info, so the exporter
cannot be used to reach arbitrary addresses. The probe's deadline is the scraper's
``X-Prometheus-Scrape-Timeout-Seconds`` less a margin, capped by ``scrape_timeout``. A node
that cannot be read is a 200 with ``ledger_probe_success 0``, as in blackbox_exporter.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit, urlunsplit

from exporter.config.nodes import NodeConfig
from exporter.config.probe import DEFAULT_MODULE, ProbeConfig
from exporter.expose import metrics as m
from exporter.expose import render
from exporter.model.snapshot import ChainStatus, NodeStatus, Snapshot
from exporter.poll.results import NodeResult, describe

log = logging.getLogger("ledger_exporter")

#: Taken off the scraper's timeout so the answer arrives before the scraper gives up
#: (blackbox_exporter's default ``--timeout-offset``); never more than half the timeout.
TIMEOUT_MARGIN_SECONDS = 0.5
TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
_PARAMETERS = ("target", "module", "node")
_FORBIDDEN_CHARACTERS = frozenset("\\ \t\r\n\0")

#: ``probe_node(node, deadline)``: poll one node now, every request ending by ``deadline``
#: (a ``time.monotonic()`` value). The polling engine provides it.
ProbeNode = Callable[[NodeConfig, float], NodeResult]


class ProbeRefusedError(Exception):
    """The probe request cannot be served; ``status`` is the HTTP answer, the message why."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ProbeAnswer:
    """What the server sends back for one /probe request."""

    status: HTTPStatus
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


def probe_timeout(header: str | None, scrape_timeout: float) -> float:
    """Seconds the probe may take: the scraper's timeout less the margin, capped by ours."""
    try:
        asked = float(header) if header is not None else math.inf
    except ValueError:
        asked = math.inf
    if not asked > 0:  # zero, negative or NaN: not a usable timeout
        asked = math.inf
    return min(scrape_timeout, max(asked - TIMEOUT_MARGIN_SECONDS, asked / 2))


def probe_target(query: str, probe: ProbeConfig) -> NodeConfig:
    """The node that ``query`` asks to probe; raises ProbeRefusedError (400, 403) otherwise."""
    params = parse_qs(query, keep_blank_values=True)
    for name in _PARAMETERS:
        if len(params.get(name, [])) > 1:
            raise ProbeRefusedError(HTTPStatus.BAD_REQUEST, f"parameter {name} is given twice")
    target = params.get("target", [""])[0]
    if not target:
        raise ProbeRefusedError(HTTPStatus.BAD_REQUEST, "the target parameter is missing")
    module_name = params.get("module", [DEFAULT_MODULE])[0] or DEFAULT_MODULE
    module = probe.module(module_name)
    if module is None:
        known = ", ".join(name for name, _ in probe.modules)
        raise ProbeRefusedError(
            HTTPStatus.BAD_REQUEST, f"unknown module {module_name!r}; configured: {known}"
        )
    host = _checked_host(target)
    if not probe.allows(target):
        raise ProbeRefusedError(
            HTTPStatus.FORBIDDEN, f"target {target!r} matches none of probe.allowed_targets"
        )
    parts = urlsplit(target)
    url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return module.node(params.get("node", [""])[0] or host, url)


def _checked_host(target: str) -> str:
    """The target's ``host:port`` once it is a plain http(s) URL; else ProbeRefusedError."""
    if any(char in _FORBIDDEN_CHARACTERS or ord(char) < 32 for char in target):
        raise ProbeRefusedError(
            HTTPStatus.BAD_REQUEST, "the target must not contain spaces, backslashes or controls"
        )
    if not target.isascii():  # libcurl takes ASCII URLs only
        raise ProbeRefusedError(
            HTTPStatus.BAD_REQUEST,
            "the target must be ASCII: percent-encode other characters, and write an"
            " internationalised host name in its xn-- form",
        )
    if "@" in target:  # after the host too: in "http://u:1/pw@host/" urlsplit misreads it
        raise ProbeRefusedError(
            HTTPStatus.BAD_REQUEST,
            "the target must not carry user-info (or any '@': write %40); "
            "put credentials in the module",
        )
    try:
        parts = urlsplit(target)
        port = parts.port
    except ValueError:
        raise ProbeRefusedError(HTTPStatus.BAD_REQUEST, "the target is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProbeRefusedError(
            HTTPStatus.BAD_REQUEST, "the target must be an http:// or https:// URL with a host"
        )
    if parts.query or parts.fragment:
        raise ProbeRefusedError(
            HTTPStatus.BAD_REQUEST, "the target must not have a query or fragment"
        )
    default_port = 443 if parts.scheme == "https" else 80
    return parts.netloc if port is not None else f"{parts.netloc}:{default_port}"


def probe_status(result: NodeResult) -> NodeStatus:
    """One probe's node as the writer reads it: no history, so no counters, no last
    success, no height-change time, and no blocks behind (that needs other nodes)."""
    chains = tuple(
        ChainStatus(chain.blockchain, chain.reading, describe(chain.error))
        for chain in result.chains
    )
    return NodeStatus(
        name=result.node.name,
        labels=result.node.labels,
        health=result.health,
        error=describe(result.error),
        chains=chains,
        duration=result.duration,
        last_success=None,
    )


def render_probe(result: NodeResult, duration: float, openmetrics: bool) -> bytes:
    """The probe's exposition, by the writer of /metrics: its node's and chains' families when
    /health was read, and always its own success and duration (never an error text)."""
    success = result.health is not None
    snapshot = Snapshot(nodes=(probe_status(result),) if success else ())
    values = {m.PROBE_SUCCESS: 1.0 if success else 0.0, m.PROBE_DURATION: duration}
    if openmetrics:
        body = render.openmetrics_format(render.Renderer(), snapshot, m.PROBE_FAMILIES, values)
        return body + render.OPENMETRICS_END
    return render.text_format(render.Renderer(), snapshot, m.PROBE_FAMILIES, values)


class ProbeSlots:
    """Probes running now, counted across reloads: a reload's new Prober shares them, so the
    probes still running on the old one count against the new bound too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = 0

    def take(self, bound: int) -> bool:
        """Count one more probe, unless ``bound`` are running already."""
        with self._lock:
            if self._taken >= bound:
                return False
            self._taken += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._taken -= 1


class Prober:
    """Serves /probe requests: checks them, bounds probes in flight, polls, renders.

    Over ``max_in_flight`` probes, a request gets a 503 at once: the scraper records that
    scrape as failed and the exporter's load stays bounded. Waiting for a slot would hold a
    server thread meanwhile, the very thing /metrics and the health checks need.
    """

    def __init__(
        self,
        config: ProbeConfig,
        scrape_timeout: float,
        probe_node: ProbeNode,
        monotonic: Callable[[], float] = time.monotonic,
        slots: ProbeSlots | None = None,
    ) -> None:
        self.config = config
        self._scrape_timeout = scrape_timeout
        self._probe_node = probe_node
        self._monotonic = monotonic
        self._slots = slots or ProbeSlots()

    def handle(
        self, query: str, timeout_header: str | None, openmetrics_format: bool
    ) -> ProbeAnswer:
        """Answer one /probe request (never raises for a bad request or an unreadable node)."""
        started = self._monotonic()
        deadline = started + probe_timeout(timeout_header, self._scrape_timeout)
        try:
            node = probe_target(query, self.config)
        except ProbeRefusedError as refused:
            log.debug("probe refused", extra={"fields": {"reason": str(refused)}})
            return ProbeAnswer(refused.status, f"{refused}\n".encode())
        if not self._slots.take(self.config.max_in_flight):
            message = f"{self.config.max_in_flight} probes in flight (probe.max_in_flight)\n"
            return ProbeAnswer(HTTPStatus.SERVICE_UNAVAILABLE, message.encode())
        try:
            result = self._probe_node(node, deadline)
        finally:
            self._slots.give_back()
        if result.error is not None:  # the exposition never carries it: the log does
            fields = {"node": node.name, "target": node.url, "error": describe(result.error)}
            log.debug("probe failed", extra={"fields": fields})
        body = render_probe(result, self._monotonic() - started, openmetrics_format)
        content_type = (
            render.OPENMETRICS_CONTENT_TYPE if openmetrics_format else render.TEXT_CONTENT_TYPE
        )
        return ProbeAnswer(HTTPStatus.OK, body, content_type)
