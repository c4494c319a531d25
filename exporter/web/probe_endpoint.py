"""``GET /probe?target=URL&module=NAME[&node=NAME]``: poll one node now (multi-target pattern).

The parameters are checked before anything is sent: a target is requested only when it
matches one of ``probe.allowed_targets`` whole and carries no user-info, so the exporter
cannot be used to reach arbitrary addresses. The probe's deadline is the scraper's
``X-Prometheus-Scrape-Timeout-Seconds`` less a margin, capped by ``scrape_timeout``. A node
that cannot be read is a 200 with ``ledger_probe_success 0``, as in blackbox_exporter. With
``&debug=true``, as in blackbox_exporter, the answer is plain text: the probe's log (each
request it made, by URL path, with its status or error and its time, then why the probe
failed or that it succeeded), then the series it would have returned. That log tells a
refused connection from a listening port, so it is answered only when the config's
``probe.debug`` is on; otherwise ``debug=true`` is a 403 and nothing is sent.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit, urlunsplit

from exporter.config.nodes import NodeConfig
from exporter.config.probe_modules import DEFAULT_MODULE, ProbeConfig
from exporter.errors import ProbeRefusedError
from exporter.expose import metrics as m
from exporter.expose import render
from exporter.logs import logfmt
from exporter.model.snapshot import ChainStatus, NodeStatus, Snapshot
from exporter.poll.results import NodeResult, RequestTrace, TracedRequest, describe
from exporter.text import visible

log = logging.getLogger("ledger_exporter")

#: Taken off the scraper's timeout so the answer arrives before the scraper gives up
#: (blackbox_exporter's default ``--timeout-offset``); never more than half the timeout.
TIMEOUT_MARGIN_SECONDS = 0.5
TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
_PARAMETERS = ("target", "module", "node", "debug")
_FORBIDDEN_CHARACTERS = frozenset("\\ \t\r\n\0")
DEBUG_CONTENT_TYPE = "text/plain; charset=utf-8"


class ProbeNode(Protocol):
    """``probe_node(node, deadline, trace)``: poll one node now, every request ending by
    ``deadline`` (a ``time.monotonic()`` value) and recorded in ``trace`` when one is given.
    The polling engine provides it."""

    def __call__(
        self, node: NodeConfig, deadline: float, trace: RequestTrace | None = None
    ) -> NodeResult: ...


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


DEBUG_OFF = (
    "debug=true is off in this exporter's config (probe.debug: false, the default): the"
    " probe's log would tell an open port from a closed one to anyone who can reach /probe;"
    " set probe.debug: true where /probe is reachable only by those who may see it, or run"
    " the exporter with --log.level=debug to log why probes fail"
)


def debug_asked(query: str, probe: ProbeConfig) -> bool:
    """Whether ``&debug=true`` asks for the probe's log (``false`` or no parameter: not);
    any other value is a ProbeRefusedError (400), and ``true`` is one (403) unless
    ``probe.debug`` allows it."""
    value = parse_qs(query, keep_blank_values=True).get("debug", ["false"])[0]
    if value not in ("true", "false"):
        raise ProbeRefusedError(HTTPStatus.BAD_REQUEST, "debug must be true or false")
    if value == "true" and not probe.debug:
        raise ProbeRefusedError(HTTPStatus.FORBIDDEN, DEBUG_OFF)
    return value == "true"


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
        timeout = probe_timeout(timeout_header, self._scrape_timeout)
        try:
            node = probe_target(query, self.config)
            debug = debug_asked(query, self.config)
        except ProbeRefusedError as refused:
            log.debug("probe refused", extra={"fields": {"reason": str(refused)}})
            return ProbeAnswer(refused.status, f"{refused}\n".encode())
        if not self._slots.take(self.config.max_in_flight):
            message = f"{self.config.max_in_flight} probes in flight (probe.max_in_flight)\n"
            return ProbeAnswer(HTTPStatus.SERVICE_UNAVAILABLE, message.encode())
        trace = RequestTrace(self._monotonic) if debug else None
        try:
            deadline = started + timeout
            result = (
                self._probe_node(node, deadline, trace)
                if trace
                else self._probe_node(node, deadline)
            )
        finally:
            self._slots.give_back()
        if result.error is not None:  # the exposition never carries it: the log does
            fields = {"node": node.name, "target": node.url, "error": describe(result.error)}
            log.debug("probe failed", extra={"fields": fields})
        duration = self._monotonic() - started
        if trace is not None:
            header = {"target": node.url, "module": _module_name(query), "node": node.name}
            lines = debug_log(header, timeout, trace, result, duration)
            body = render_probe(result, duration, openmetrics=False)
            return ProbeAnswer(HTTPStatus.OK, debug_text(lines, body), DEBUG_CONTENT_TYPE)
        body = render_probe(result, duration, openmetrics_format)
        content_type = (
            render.OPENMETRICS_CONTENT_TYPE if openmetrics_format else render.TEXT_CONTENT_TYPE
        )
        return ProbeAnswer(HTTPStatus.OK, body, content_type)


def _module_name(query: str) -> str:
    return parse_qs(query).get("module", [DEFAULT_MODULE])[0] or DEFAULT_MODULE


def debug_text(lines: list[str], series: bytes) -> bytes:
    """blackbox_exporter's debug answer: the probe's log, then the series. Read on a
    terminal, so no byte a node sent reaches it raw: the log is logfmt (which escapes them)
    and in the series, whose label values the exposition format leaves as sent but for
    backslash, quote and newline, the control and bidirectional characters are shown as
    ``\\uXXXX`` (:func:`exporter.text.visible`)."""
    log_text = "".join(f"{line}\n" for line in lines)
    head = f"Logs for the probe:\n{log_text}\nMetrics that would have been returned:\n"
    shown = "\n".join(visible(line) for line in series.decode(errors="replace").split("\n"))
    return (head + shown).encode()


def debug_log(
    header: dict[str, str],
    timeout: float,
    trace: RequestTrace,
    result: NodeResult,
    duration: float,
) -> list[str]:
    """The probe's log as logfmt lines: its start, each request as it ended (URL path, status
    or error, when and how long), each chain that could not be read, and the outcome."""
    clock = _LogClock(trace)
    start, end = trace.started, trace.started + duration
    lines = [
        clock.line(
            start, "info", "Beginning probe", {**header, "timeout_seconds": round(timeout, 3)}
        )
    ]
    for request in trace.requests():
        lines.append(clock.line(request.ended, *_request_line(request)))
    for chain, reason in _chain_errors(result):
        fields: dict[str, Any] = {"blockchain": chain, "reason": reason}
        lines.append(clock.line(end, "warn", "Blockchain not read", fields))
    took = {"duration_seconds": round(duration, 6)}
    if result.error is not None:
        failed = {"reason": describe(result.error), **took}
        lines.append(clock.line(end, "error", "Probe failed", failed))
    else:
        lines.append(clock.line(end, "info", "Probe succeeded", took))
    return lines


class _LogClock:
    """Log lines stamped with the wall-clock time of a ``time.monotonic()`` moment: a
    timestamp shown, as a log's (the durations in the lines are monotonic differences)."""

    def __init__(self, trace: RequestTrace) -> None:
        self._offset = time.time() - trace.monotonic()

    def line(self, at: float, level: str, msg: str, fields: dict[str, Any]) -> str:
        stamp = datetime.fromtimestamp(self._offset + at, UTC).isoformat(timespec="milliseconds")
        return logfmt({"ts": stamp, "level": level, "msg": msg, **fields})


def _request_line(request: TracedRequest) -> tuple[str, str, dict[str, Any]]:
    """(level, message, fields) of one traced request."""
    fields: dict[str, Any] = {"path": request.path}
    if request.status is not None:
        fields["status"] = request.status
    if request.size is not None:
        fields["bytes"] = request.size
    if request.error is not None:
        fields["error"] = request.error
    fields["duration_seconds"] = round(max(0.0, request.ended - request.started), 6)
    if request.error is None:
        return "info", "Request answered", fields
    return "error", "Request failed", fields


def _chain_errors(result: NodeResult) -> Iterator[tuple[str, str]]:
    for chain in result.chains:
        if chain.reading is None and chain.error is not None and chain.requested:
            yield chain.blockchain, describe(chain.error) or ""
