"""The running exporter: wires config -> poller -> snapshot -> exposition -> HTTP server.

``serve`` runs it as the ``ledger-exporter`` process until SIGTERM (SIGHUP reloads).

It owns the current Exposition (swapped whole at the end of each cycle), readiness, and
config reloads (``POST /-/reload`` or SIGHUP): a bad config keeps the old one running and sets
``ledger_exporter_config_last_reload_successful`` to 0 at once; a good one sets it to 1 and
``ledger_exporter_config_last_reload_success_timestamp_seconds`` to now (both first set at
start). Reloads are coalesced: one runs at a time, at most one waits, at most one starts a
second. The same handlers serve on every ``--web.listen-address``, one server each.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from http import HTTPStatus
from types import FrameType

from exporter.build import BuildInfo, this_build
from exporter.config.exporter import Config, load_config
from exporter.config.web import WebConfig, load_web_config, reload_warnings
from exporter.errors import BindError, ConfigError, ReloadPendingError
from exporter.expose.render import Renderer
from exporter.memory import Allocator, tune_collector
from exporter.model.network import NetworkView
from exporter.model.snapshot import Snapshot
from exporter.model.watch_readings import WatchStatus
from exporter.poll.cycle import Poller
from exporter.poll.probe_node import EngineProber
from exporter.poll.state import StateFile
from exporter.runtime import runtime_families
from exporter.web.exposition import Exposition, Variant
from exporter.web.probe_endpoint import ProbeAnswer, Prober, ProbeSlots
from exporter.web.server import DEFAULT_TELEMETRY_PATH, ExporterServer, ServerLimits, bind_servers

log = logging.getLogger("ledger_exporter")
RELOAD_SPACING_SECONDS = 1.0  # at most one reload (re-reading and checking the files) a second


class ReloadQueue:
    """Reloads one at a time, at most one more waiting, at most one started per ``spacing``.

    A reload asked for while another waits is already covered by it (the waiting one reads
    the files after that request came), so it raises ReloadPendingError at once rather than
    hold a request thread: a flood of reloads costs one config read a second and two
    threads, never the server's pool."""

    def __init__(self, spacing: float = RELOAD_SPACING_SECONDS) -> None:
        self._spacing = spacing
        self._cond = threading.Condition()
        self._running = self._waiting = False
        self._last_start = float("-inf")

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Wait for this reload's turn (or raise ReloadPendingError); run it in the block."""
        with self._cond:
            if self._waiting:
                raise ReloadPendingError("a reload is already pending")
            self._waiting = True
            try:
                while self._running or time.monotonic() < self._last_start + self._spacing:
                    wait = self._last_start + self._spacing - time.monotonic()
                    self._cond.wait(None if self._running else max(wait, 0.0))
            finally:
                self._waiting = False
            self._running = True
            self._last_start = time.monotonic()
        try:
            yield
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()


class Exporter:
    """One exporter process: a poll loop thread and an HTTP server thread."""

    def __init__(
        self,
        config: Config,
        config_path: str | None = None,
        clock: Callable[[], float] = time.time,
        allocator: Allocator | None = None,
        *,
        telemetry_path: str = DEFAULT_TELEMETRY_PATH,
        build: BuildInfo | None = None,
        state_file: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock`` is the wall clock, for the timestamps exported (the last good reload's,
        and the poller's); every age is measured on ``monotonic``."""
        self._config_path = config_path
        self._monotonic = monotonic
        self._allocator = allocator or Allocator(None)
        self._lock = threading.Lock()
        self._clock = clock
        self._reload_ok = True
        self._reload_success_at = clock()  # the config was loaded just before: at start
        self._reload_problems: tuple[str, ...] = ()  # of the last failed reload, for the page
        self._reloads = ReloadQueue()
        self.telemetry_path = telemetry_path
        # one for the process: it keeps label strings across cycles
        self._renderer = Renderer(build or this_build())
        self._exposition = self._exposed(self._reload_state(Snapshot()))
        self._stale: tuple[Exposition, Exposition] | None = None  # an exposition, its stale form
        self._ready = threading.Event()
        state = StateFile(state_file) if state_file else None  # --state.file: kept across restarts
        self._poller = Poller(config, self._publish, monotonic, state=state, wall=clock)
        self._probe_engine: EngineProber | None = None  # made once probe mode is configured
        self._probe_slots = ProbeSlots()  # probes running, whichever config they started on
        self._prober: Prober | None = self._probing(config)
        self._threads: list[threading.Thread] = []
        self.servers: list[ExporterServer] = []  # one per listen address, once started
        self._web_config_path: str | None = None

    def exposition(self) -> Exposition:
        """What /metrics serves now: the last cycle's snapshot, or once it is older than its
        ``stale_after`` (no cycle ended since: they fail or hang), its stale form."""
        exposition = self._exposition
        if not exposition.snapshot.is_stale_at(self._monotonic()):
            return exposition
        return self._stale_form(exposition)

    def _stale_form(self, exposition: Exposition) -> Exposition:
        """``exposition`` with every node, chain, network and watch series dropped (the
        exporter's own stay, saying how old it is), made and logged once per snapshot."""
        with self._lock:
            kept = self._stale
            if kept is not None and kept[0] is exposition:
                return kept[1]
            snapshot = exposition.snapshot
            stale = replace(
                snapshot, nodes=(), network=NetworkView(), watch=WatchStatus(), stale=True
            )
            form = self._exposed(stale)
            self._stale = (exposition, form)
        age = self._monotonic() - (snapshot.completed_at or 0.0)
        fields = {"age_seconds": round(age, 1), "stale_after_seconds": snapshot.stale_after}
        log.error(
            "no polling cycle has ended within the bound: /metrics drops the node series and"
            " /-/ready fails until one does",
            extra={"fields": fields},
        )
        return form

    def _exposed(self, snapshot: Snapshot, asked: tuple[Variant, ...] = ()) -> Exposition:
        """``snapshot`` as served, with the process's runtime families, rendered on demand
        (or ahead for the ``asked`` variants)."""
        return Exposition(snapshot, asked, self._renderer, runtime_families, self.telemetry_path)

    def _reload_state(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with the reload state as it is now (call holding the lock)."""
        return replace(
            snapshot,
            config_reload_ok=self._reload_ok,
            config_reload_success_at=self._reload_success_at,
            config_reload_problems=self._reload_problems,
        )

    def ready(self) -> bool:
        """True once the first polling cycle has finished, while the last one that did is
        not older than its ``stale_after`` (a bound of a few scrape intervals)."""
        stale = self._exposition.snapshot.is_stale_at(self._monotonic())
        return self._ready.is_set() and not stale

    def _publish(self, snapshot: Snapshot) -> None:
        """Swap in the new snapshot, rendered first in the formats scrapers used last time."""
        self._allocator.trim()  # the cycle's bodies and documents are free: before rendering
        with self._lock:
            fresh = self._reload_state(snapshot)
            asked = self._exposition.asked_for()
            page = self._exposition.page_asked()
        # Rendering takes a while on big fleets: scrapes meanwhile get the previous snapshot.
        exposition = self._exposed(fresh).prepare(asked, page)
        with self._lock:
            now = self._reload_state(snapshot)
            if now != fresh:  # a reload finished while this one rendered
                exposition = self._exposed(now, asked)
            self._exposition = exposition
        self._allocator.trim()  # the cycle's bodies and the previous snapshot are free now
        self._ready.set()

    def _set_reload_ok(self, ok: bool, problems: tuple[str, ...] = ()) -> None:
        """Record a reload's outcome, shown at once: a failure sets the flag to 0 and keeps
        ``problems`` (secret-free) for the status page, a success sets the flag to 1 and the
        success time to now."""
        with self._lock:
            if not ok and (ok, problems) == (self._reload_ok, self._reload_problems):
                return  # unchanged: keep what was rendered
            self._reload_ok, self._reload_problems = ok, problems
            if ok:
                self._reload_success_at = self._clock()
            snapshot = self._reload_state(self._exposition.snapshot)
            self._exposition = self._exposed(snapshot, self._exposition.asked_for())

    def reload(self) -> None:
        """Re-read the config file; on error keep the running config and raise ConfigError.
        Raises ReloadPendingError when another reload already waits to run."""
        with self._reloads.turn():
            self._reload()

    def _reload(self) -> None:
        if self._config_path is None:
            raise ConfigError("<none>", ["the exporter was started without --config.file"])
        try:
            config = load_config(self._config_path)
            web = load_web_config(self._web_config_path) if self._web_config_path else None
        except ConfigError as error:
            self._set_reload_ok(False, tuple(f"{error.source}: {p}" for p in error.problems))
            log.error(
                "config reload failed, keeping the running config",
                extra={"fields": {"file": error.source, "problems": "; ".join(error.problems)}},
            )
            raise
        self._poller.apply(config)
        if web is not None:
            self._warn_of(web)
            for server in self.servers:
                server.use_web_config(web)
        self._prober = self._probing(config)
        self._set_reload_ok(True)
        log.info("config reloaded", extra={"fields": {"nodes": len(config.nodes)}})

    def _warn_of(self, web: WebConfig) -> None:
        """Log what a reload to ``web`` changes for the worse: TLS off, a certificate that
        has expired or soon will (:func:`reload_warnings`)."""
        before = self.servers[0].web if self.servers else None
        now = datetime.datetime.fromtimestamp(self._clock(), datetime.UTC)
        for message, fields in reload_warnings(before, web, self._web_config_path or "", now):
            log.warning(message, extra={"fields": fields})

    def probe(self, query: str, timeout_header: str | None, openmetrics: bool) -> ProbeAnswer:
        """Answer ``GET /probe?query`` (404 when the config has no ``probe`` section)."""
        prober = self._prober
        if prober is None:
            body = b"Not found: probe mode is off (the config has no probe section).\n"
            return ProbeAnswer(HTTPStatus.NOT_FOUND, body)
        return prober.handle(query, timeout_header, openmetrics)

    def _probing(self, config: Config) -> Prober | None:
        """The /probe handler for ``config``. Its engine and slots are made once and kept across
        reloads: a reload never fails the probes running meanwhile, and they stay counted."""
        if config.probe is None:
            return None
        limits = (config.probe.max_in_flight, config.max_response_bytes)
        chains, bounds = config.max_blockchains_per_node, config.bounds
        if self._probe_engine is None:
            self._probe_engine = EngineProber(*limits, chains, bounds=bounds)
        else:
            self._probe_engine.configure(*limits, chains, bounds)
        probe_node = self._probe_engine.probe_node
        return Prober(config.probe, config.scrape_timeout, probe_node, slots=self._probe_slots)

    def start(
        self,
        listen_address: str | Sequence[str],
        web: WebConfig | None = None,
        web_config_path: str | None = None,
        limits: ServerLimits | None = None,
    ) -> ExporterServer:
        """Bind a server on each address (all or none: BindError, an OSError, names the one
        that failed), then start their threads and the poll thread; returns the first server
        (``servers`` has them all). A reload re-reads ``web_config_path`` too; a bad one keeps
        the running web config."""
        addresses = [listen_address] if isinstance(listen_address, str) else list(listen_address)
        self._web_config_path = web_config_path
        self.servers = bind_servers(addresses, self, web, limits, self.telemetry_path)
        targets = [(server.serve_forever, "http") for server in self.servers]
        for target, name in (*targets, (self._poller.run, "poll")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self.servers[0]

    def stop(self) -> None:
        """Stop serving and polling; returns once the server socket is closed."""
        self._poller.stop()
        self._prober = None
        if self._probe_engine is not None:
            self._probe_engine.close()
        for server in self.servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)


def serve(  # noqa: PLR0917 (the last two added for the HTTP server)
    config: Config,
    config_path: str | None,
    listen_addresses: str | Sequence[str],
    web: WebConfig | None,
    web_config_path: str | None = None,
    limits: ServerLimits | None = None,
    *,
    telemetry_path: str = DEFAULT_TELEMETRY_PATH,
    state_file: str | None = None,
) -> int:
    """Run until SIGTERM or SIGINT; SIGHUP reloads the config (and the web config). Returns
    1 at once when an address cannot be bound. With ``state_file``, the memory between
    cycles is read at start and kept there."""
    allocator = Allocator.of_this_process()
    allocator.tune()  # before the exporter's threads start: each may get an arena
    tune_collector()
    exporter = Exporter(
        config,
        config_path,
        allocator=allocator,
        telemetry_path=telemetry_path,
        state_file=state_file,
    )
    try:
        exporter.start(listen_addresses, web, web_config_path, limits)
    except BindError as error:
        fields = {"address": error.address, "error": error.strerror}
        log.error("cannot listen: --web.listen-address %s", error, extra={"fields": fields})
        return 1
    except (OSError, ValueError) as error:  # the TLS context of a web config changed since
        log.error("cannot listen", extra={"fields": {"error": str(error)}})
        return 1
    _log_started(exporter, config, web)
    stop = threading.Event()

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def on_reload(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=_reload_quietly, args=(exporter,), daemon=True).start()

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_reload)
    while not stop.wait(1.0):
        pass
    log.info("shutting down")
    exporter.stop()  # the engine ends every request still out: nothing is left to wait for
    return 0


def _log_started(exporter: Exporter, config: Config, web: WebConfig | None) -> None:
    """One line per listener (as exporter-toolkit logs them), then the start itself."""
    tls = web is not None and web.tls is not None
    for server in exporter.servers:
        fields = {"address": server.listen_address, "port": server.port, "tls": str(tls).lower()}
        log.info("listening", extra={"fields": fields})
    if tls and web is not None and web.http2:
        log.info(
            "http_server_config.http2 is true, but HTTP/2 is not served: HTTP/1.1 only",
            extra={"fields": {}},
        )
    build, first = this_build(), exporter.servers[0]
    fields = {
        "version": build.version,
        "revision": build.revision or "unknown",
        "branch": build.branch or "unknown",
        "address": first.listen_address,
        "port": first.port,
        "telemetry_path": exporter.telemetry_path,
        "nodes": len(config.nodes),
    }
    log.info("ledger-exporter started", extra={"fields": fields})


def _reload_quietly(exporter: Exporter) -> None:
    # ConfigError: already logged, the running config stays; ReloadPendingError: the reload
    # already waiting reads the files after this signal.
    with contextlib.suppress(ConfigError, ReloadPendingError):
        exporter.reload()
