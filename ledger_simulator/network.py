"""SimulatedNetwork: binds the sockets of a layout and serves the simulated nodes.

``paths``: one port serves the admin endpoint and every node under ``/nodes/node-<i>/`` (cheap
enough for thousands of nodes). ``ports``: the admin endpoint on PORT and node i on PORT+i,
each with its own listening socket and serving thread (meant for tens of nodes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ledger_simulator.admin import AdminApi
from ledger_simulator.api import NodeApi
from ledger_simulator.certs import SimCertificates, parse_days
from ledger_simulator.errors import SimulatorError
from ledger_simulator.faults import ALL_NODES, FaultError, FaultRegistry
from ledger_simulator.http import Router
from ledger_simulator.ledger import Ledger
from ledger_simulator.ports import Listener, bind_layout
from ledger_simulator.state import SimState
from ledger_simulator.topology import Topology

LAYOUTS = ("paths", "ports")


class SimulatedNetwork:
    """A network of simulated ledger nodes; deterministic under ``seed`` and ``clock``."""

    def __init__(  # noqa: PLR0917 (the positional signature is the project's fixed API)
        self,
        nodes: int = 3,
        chains: int = 2,
        block_interval: float = 2.0,
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        layout: str = "paths",
        clock: Callable[[], float] = time.time,
        *,
        certificates: SimCertificates | None = None,
    ) -> None:
        """``certificates``: serve https with theirs (the admin endpoint too), else http."""
        if layout not in LAYOUTS:
            raise SimulatorError(f"unknown layout {layout!r}; choose paths or ports")
        if not block_interval > 0:
            raise SimulatorError(f"block interval must be positive, got {block_interval}")
        if not 0 <= port <= 65535:
            raise SimulatorError(f"port {port} out of range 0..65535")
        self.layout = layout
        self.host = host
        self._requested_port = port
        self._clock = clock
        self.topology = Topology.build(seed, nodes, chains)
        self.faults = FaultRegistry(self.topology, targets=self._fault_targets)
        self.state = SimState(self.topology, self.faults, block_interval, genesis=clock())
        self.ledger = Ledger(self.state)
        self.api = NodeApi(self.state, self.ledger)
        self.admin = AdminApi(self.faults, self.ledger, self.set_fault, self.listing)
        self.stopping = threading.Event()
        self._listeners: dict[int | None, Listener] = {}
        self._lock = threading.Lock()
        self._bound_port = 0  # kept after stop() so URLs still name what was served
        self.certificates = certificates
        self.scheme = "http" if certificates is None else "https"

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Bind the layout's sockets and serve them from background threads."""
        with self._lock:
            if self._listeners:
                raise SimulatorError("the simulated network is already started")
            self.stopping.clear()
            node_count = self.topology.node_count if self.layout == "ports" else 0
            router = Router(self)
            tls = None if self.certificates is None else self.certificates.context()
            self._listeners = bind_layout(self.host, self._requested_port, node_count, router, tls)
            self._bound_port = self._listeners[None].port
            for node, listener in self._listeners.items():
                down = node is not None and self.faults.node_wide(self.node_name(node), "down")
                if not down:
                    listener.up()

    def stop(self) -> None:
        """Wake slow answers, stop serving, cut open connections and close every socket."""
        with self._lock:
            self.stopping.set()
            listeners, self._listeners = list(self._listeners.values()), {}
        threads = [threading.Thread(target=listener.close) for listener in listeners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def __enter__(self) -> SimulatedNetwork:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # addresses ------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The admin port (and the nodes' port in the paths layout); with port 0, the port
        chosen by the last start()."""
        if self._bound_port:
            return self._bound_port
        if self._requested_port == 0:
            raise SimulatorError("port 0 is chosen when binding: start() the network first")
        return self._requested_port

    @property
    def node_urls(self) -> dict[str, str]:
        """Node name -> base URL ending in ``/``."""
        return {self.node_name(i): self.node_url(i) for i in range(self.topology.node_count)}

    @property
    def admin_url(self) -> str:
        """Base URL of the admin endpoint, e.g. ``http://127.0.0.1:7740/-/sim/``."""
        return f"{self.scheme}://{self._url_host()}:{self.port}/-/sim/"

    @property
    def node_names(self) -> list[str]:
        """``node-1`` .. ``node-N`` (known before start, unlike the URLs with port 0)."""
        return [self.node_name(i) for i in range(self.topology.node_count)]

    @property
    def chain_ids(self) -> list[str]:
        """Every chain id of the network."""
        return list(self.topology.chain_ids)

    def node_name(self, node: int) -> str:
        """``node-<i>`` for 0-based index ``node``."""
        return self.topology.node_name(node)

    def node_url(self, node: int) -> str:
        """Base URL of 0-based node ``node`` in this layout."""
        if self.layout == "ports":
            return f"{self.scheme}://{self._url_host()}:{self.port + node + 1}/"
        return f"{self.scheme}://{self._url_host()}:{self.port}/nodes/{self.node_name(node)}/"

    def _url_host(self) -> str:
        if ":" in self.host:
            return f"[{self.host}]"
        return "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host

    def listing(self) -> dict[str, Any]:
        """What ``GET /-/sim/nodes`` serves."""
        top = self.topology
        return {
            "layout": self.layout,
            "blockchains": list(top.chain_ids),
            "nodes": {
                top.node_name(i): {
                    "url": self.node_url(i),
                    "blockchains": [top.chain_ids[c] for c in top.chains_of(i)],
                }
                for i in range(top.node_count)
            },
        }

    # state ----------------------------------------------------------------------------------
    def now(self) -> float:
        """The injected clock's current time."""
        return self._clock()

    def set_fault(  # noqa: PLR0917 (admin and CLI pass the fault request positionally)
        self,
        node: str,
        fault: str,
        enabled: bool = True,
        chain: str | None = None,
        delay_seconds: float = 0.0,
        height: int | None = None,
        target: str | None = None,
        value: object = None,
    ) -> None:
        """Switch a fault on or off; a node-wide ``down`` in the ports layout closes (or
        reopens) the node's listening socket; ``cert_expiry`` reissues the certificate.
        ``delay_seconds``: the ``slow`` delay, or the round timeout of ``session_stuck`` and
        ``leader_failing`` (0: the chain's own); ``height``: where a ``fork`` starts;
        ``target``: the address an object fault applies to (None: all of the chain's), the
        council member of ``leader_failing`` (required) or ``council_change``, the setting of
        ``consensus_drift``; ``value``: the value that setting takes (None: its default
        change), or cert_expiry's days."""
        if fault == "cert_expiry":  # refused before it is recorded
            if self.certificates is None:
                raise FaultError(
                    "cert_expiry needs a simulator serving https (start it with --tls)"
                )
            parse_days(value)
        self.faults.set(
            node,
            fault,
            enabled,
            chain=chain,
            delay_seconds=delay_seconds,
            now=self.now(),
            height=height,
            target=target,
            value=value,
        )
        if fault == "cert_expiry":
            self._reissue(node, None if enabled else self._configured_days(), value)
        if fault == "down" and chain is None and self.layout == "ports":
            with self._lock:
                listener = self._listeners.get(self.topology.node_index(node))
                if listener is None:
                    return
                if self.faults.node_wide(node, "down"):
                    listener.down()
                else:
                    listener.up()

    def _configured_days(self) -> float:
        return self.certificates.days if self.certificates is not None else 0.0

    def _reissue(self, node: str, days: float | None, value: object) -> None:
        """``cert_expiry``: the port serving ``node`` (every port for ``*``; the one shared
        port in the paths layout) presents a new certificate expiring in ``days`` (None:
        the fault's ``value``, expired by default) to connections made from now on."""
        assert self.certificates is not None  # set_fault checked
        context = self.certificates.context(parse_days(value) if days is None else days)
        with self._lock:
            if self.layout == "paths" or node == ALL_NODES:
                chosen = list(self._listeners.values())
            else:
                chosen = [self._listeners[self.topology.node_index(node)]]
            for listener in chosen:
                listener.serve_certificate(context)

    def _fault_targets(self, fault: str, chain: int | None) -> set[str]:
        """The addresses an object fault may name (the ledger exists once faults are set)."""
        return self.ledger.fault_targets(fault, chain)

    def health(self, node: str) -> dict[str, Any]:
        """Exactly what ``GET /health`` of ``node`` serves now (faults that change data, like
        stall, peers_lost or identity_swap, included; transport faults like http_500 are
        not)."""
        index = self.state.answering(self.topology.node_index(node))
        return self.state.health(index, self.now())

    def blockchain(self, node: str, chain: str) -> dict[str, Any]:
        """Exactly what ``GET /blockchains/{chain}`` of ``node`` serves now; NotFoundError
        when ``node`` does not track ``chain``."""
        index = self.state.answering(self.topology.node_index(node))
        self.topology.chain_index(chain)  # UnknownChainError for a chain of no node
        return self.api.chain_document(index, self.api.tracked(index, chain), [], "", self.now())
