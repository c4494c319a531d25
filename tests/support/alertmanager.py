"""Alertmanager for tests: a real server, a webhook receiver in the test, and the shipped
config pointed at that receiver on a faster clock.

``AlertmanagerServer`` writes its config into its own directory and starts Debian's
``prometheus-alertmanager`` on 127.0.0.1 and a free port, with its own storage directory and
no cluster gossip (``--cluster.listen-address=``); it stops it on exit. ``cluster(...)`` gives
servers peered with each other by gossip over loopback instead (``Gossip``: an HA pair that
notifies once; ``peers()``, ``position()``). ``WebhookReceiver`` is
a small HTTP server on 127.0.0.1 that keeps every notification Alertmanager posts to it.
``for_tests`` rewrites an Alertmanager config (the shipped ``alertmanager.yml``) so that every
receiver posts to the test's webhook, and divides its ``group_wait``, ``group_interval`` and
``repeat_interval`` by the scale ``tests/support/scaling.py`` divides the rules' times by
(``group_wait`` no lower than a floor the test gives: its Prometheus evaluates every second). A
test takes both from the ``alertmanager`` fixture (``Alertmanagers``), which stops them after
it:

.. code-block:: python

    def test_paged(alertmanager: Alertmanagers) -> None:
        webhook = alertmanager.webhook()
        server = alertmanager.start(for_tests(load_config(SHIPPED), webhook, scale=60))
        prometheus.config["alerting"] = server.alerting()  # before prometheus.start()
        webhook.wait_for(lambda: webhook.firing() == {"LedgerNodeDown": 1})

Prometheus sends a still-firing alert again only every ``--rules.alert.resend-delay`` (1m),
valid for four of those: give it ``RESEND_FLAG`` so that Alertmanager's view follows
Prometheus's within seconds, as it follows within minutes at full scale. Not a second: an
alert sent every second is valid for four, and a Prometheus starved of CPU that long (two
cores shared with every server of the test) would let Alertmanager expire a cause that still
fires, and with it the inhibition of its symptoms.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from tests.support.http import fetch
from tests.support.ports import free_port
from tests.support.processes import ServerProcess
from tests.support.programs import require_program
from tests.support.receiving import PostReceiver
from tests.support.scaling import duration_ms, scaled
from tests.support.waiting import wait_until

START_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.2
#: Prometheus's flag for sending a still-firing alert again every 3 s (default 1m): valid
#: for 12 s in Alertmanager (a state change, resolved included, is sent at once anyway).
RESEND_FLAG = "--rules.alert.resend-delay=3s"
#: Alertmanager's own defaults of a route's timings, for a root route that leaves them out.
ROUTE_DEFAULTS = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}

Notification = dict[str, Any]  # one webhook payload: receiver, status, groupLabels, alerts...
Alert = dict[str, Any]


class AlertmanagerError(AssertionError):
    """Alertmanager did not start, refused a config or answered an error."""


# --- the webhook --------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivered:
    """One alert as a notification carried it: to which receiver, in which state."""

    notification: int  # its notification's place in the order of arrival, from 0
    receiver: str
    alertname: str
    status: str  # firing | resolved
    labels: Mapping[str, str]
    fingerprint: str


class WebhookReceiver(PostReceiver):
    """Alertmanager's webhook target on 127.0.0.1: keeps every notification posted to it
    (``POST`` of the webhook's JSON), in order of arrival."""

    def __init__(self) -> None:
        self.notifications: list[Notification] = []
        super().__init__()

    def accept(self, path: str, body: bytes) -> int:
        try:
            payload = json.loads(body)
        except ValueError:
            return 400
        with self.lock:
            self.notifications.append(payload)
        return 200

    def url_for(self, receiver: str) -> str:
        """The URL a receiver's webhook posts to (the receiver's name in the path, for the
        failure messages; the payload names it too)."""
        return f"{self.url}/{quote(receiver, safe='')}"

    def received(self) -> list[Notification]:
        """Every notification so far, in order of arrival."""
        with self.lock:
            return list(self.notifications)

    def mark(self) -> int:
        """How many notifications arrived so far: a scenario's ``since``."""
        with self.lock:
            return len(self.notifications)

    def delivered(self, since: int = 0) -> list[Delivered]:
        """Every alert of every notification from the ``since``-th on, in order."""
        return [
            Delivered(
                index,
                note["receiver"],
                alert["labels"].get("alertname", ""),
                alert["status"],
                alert["labels"],
                alert["fingerprint"],
            )
            for index, note in enumerate(self.received()[since:], start=since)
            for alert in note["alerts"]
        ]

    def firing(
        self,
        *,
        receivers: Iterable[str] | None = None,
        ignore: Iterable[str] = (),
        where: Mapping[str, str] | None = None,
        since: int = 0,
    ) -> Counter[str]:
        """How many distinct alerts of each name were delivered firing (an alert sent again,
        in a later notification of its group, counts once): to ``receivers`` (every one when
        None), with the labels ``where``, in the notifications from the ``since``-th on,
        names in ``ignore`` aside."""
        wanted = None if receivers is None else set(receivers)
        skipped, labels = set(ignore), dict(where or {})
        seen = {
            (item.alertname, item.fingerprint)
            for item in self.delivered(since)
            if item.status == "firing"
            and (wanted is None or item.receiver in wanted)
            and item.alertname not in skipped
            and labels.items() <= item.labels.items()
        }
        return Counter(name for name, _ in seen)

    def wait_for(
        self,
        predicate: Callable[[], Any],
        *,
        timeout: float = 30.0,
        what: str = "",
        ignore: Iterable[str] = (),
    ) -> Any:
        """Wait until ``predicate()`` is truthy (``wait_until``); fail naming ``what`` and
        every alert delivered (names in ``ignore`` aside)."""
        return wait_until(
            predicate,
            timeout=timeout,
            interval=POLL_SECONDS,
            message=lambda: f"{what or 'notifications'}; {self.summary(ignore=ignore)}",
        )

    def summary(self, since: int = 0, ignore: Iterable[str] = ()) -> str:
        """Each alert delivered from the ``since``-th notification on, one a line (the
        notification's number, receiver, status, name, node, chain), names in ``ignore``
        aside: for failure messages."""
        skipped = set(ignore)
        lines = [
            f"#{item.notification} {item.receiver} {item.status} {item.alertname} "
            f"{item.labels.get('node', '-')} {item.labels.get('blockchain', '-')[:12]}"
            for item in self.delivered(since)
            if item.alertname not in skipped
        ]
        return "\n".join(["delivered:", *lines])


# --- the config ---------------------------------------------------------------------------


def load_config(path: Path) -> dict[str, Any]:
    """An Alertmanager config file as a document; its ``templates`` made absolute (they are
    relative to the file, and the test's copy lives elsewhere)."""
    document: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    if "templates" in document:
        document["templates"] = [str((path.parent / t).resolve()) for t in document["templates"]]
    return document


def sinks(document: Mapping[str, Any]) -> set[str]:
    """The receivers that send nowhere (no integration at all): where alerts that must not
    notify are routed, such as the info alerts' ``null`` receiver."""
    return {
        receiver["name"]
        for receiver in document.get("receivers", [])
        if not any(key.endswith("_configs") for key in receiver)
    }


def for_tests(
    document: Mapping[str, Any],
    webhook: WebhookReceiver,
    scale: int,
    *,
    min_group_wait: str = "0s",
) -> dict[str, Any]:
    """A copy of an Alertmanager config whose every receiver (the sinks too, so that a test
    sees where each alert went) posts to ``webhook`` only, resolved alerts included, and
    whose route timings are divided by ``scale`` (the root's defaults made explicit first).
    ``group_wait`` stays at ``min_group_wait`` or more: the test's Prometheus evaluates every
    second whatever the scale, and a ``group_wait`` shorter than the evaluations it spans at
    full scale would notify apart the alerts of one incident raised an evaluation apart."""
    receivers = [
        {
            "name": receiver["name"],
            "webhook_configs": [{"url": webhook.url_for(receiver["name"]), "send_resolved": True}],
        }
        for receiver in document.get("receivers", [])
    ]
    route = {**ROUTE_DEFAULTS, **document["route"]}
    short = _scaled_route(route, scale, duration_ms(min_group_wait))
    return {**document, "receivers": receivers, "route": short}


def _scaled_route(route: Mapping[str, Any], scale: int, min_wait_ms: int) -> dict[str, Any]:
    short = {key: scaled(route[key], scale) if key in ROUTE_DEFAULTS else route[key]
             for key in route}  # fmt: skip
    if "group_wait" in short and duration_ms(short["group_wait"]) < min_wait_ms:
        short["group_wait"] = f"{min_wait_ms}ms"
    if "routes" in route:
        short["routes"] = [_scaled_route(child, scale, min_wait_ms) for child in route["routes"]]
    return short


# --- the server ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Gossip:
    """A server's place in an Alertmanager cluster on loopback: the port it gossips on, its
    peers' ports, and the cluster's timings.

    The timings, for a test whose rules and routes run ``scale`` times faster
    (:func:`gossip_for`): ``pushpull_interval``, the full state sync (anti-entropy, 1m), is
    scaled, so a peer that missed a broadcast catches up within a minute of the rules' time.
    ``gossip_interval`` (200ms) is how often broadcasts (a notification logged, a silence)
    leave: a property of the network, not of the alerts' clock, and the cluster waits for
    ten of them, four times, to settle at start; it is halved (100ms) to settle sooner.
    ``peer_timeout`` (15s) is how long the second peer waits before it sends a group's
    notification unless the first one's entry of the notification log reached it by gossip:
    scaled it would be a quarter of a second, a gossip interval or two, and on two busy cores
    the second peer would send again what the first had sent. It is kept at many gossip
    intervals instead (2s: twenty), shorter than a group's interval so that the second
    peer's check fits between two flushes. The failure detector's probes (1s, 500ms) keep
    their defaults: faster, a peer busy for a moment would be declared dead, and both
    would send."""

    port: int
    peers: tuple[int, ...]
    pushpull_interval: str = "1m"
    gossip_interval: str = "100ms"
    peer_timeout: str = "2s"

    def flags(self) -> list[str]:
        """The command line's cluster flags."""
        return [
            f"--cluster.listen-address=127.0.0.1:{self.port}",
            f"--cluster.advertise-address=127.0.0.1:{self.port}",
            *(f"--cluster.peer=127.0.0.1:{port}" for port in self.peers),
            f"--cluster.pushpull-interval={self.pushpull_interval}",
            f"--cluster.gossip-interval={self.gossip_interval}",
            f"--cluster.peer-timeout={self.peer_timeout}",
        ]


def gossip_for(port: int, peers: Iterable[int], scale: int) -> Gossip:
    """The cluster place of a server gossiping on ``port`` with ``peers``, on a clock
    ``scale`` times faster (see :class:`Gossip` for what is scaled and why)."""
    return Gossip(port, tuple(peers), pushpull_interval=scaled("1m", scale))


class AlertmanagerServer(ServerProcess):
    """One ``prometheus-alertmanager`` process on 127.0.0.1 with ``config`` (a document),
    its storage in ``workdir``; alone, or a peer of a cluster (``gossip``)."""

    def __init__(
        self, workdir: Path, config: Mapping[str, Any], *, gossip: Gossip | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        self.config: dict[str, Any] = dict(config)
        self.config_file = workdir / "alertmanager.yml"
        self.log_file = workdir / "alertmanager.log"
        self.gossip = gossip

    def start(self) -> AlertmanagerServer:
        """Write the config, start the process and wait until ``/-/ready`` answers 200."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(yaml.safe_dump(self.config, sort_keys=False))
        command = [
            require_program("prometheus-alertmanager", "alertmanager"),
            f"--config.file={self.config_file}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            *(["--cluster.listen-address="] if self.gossip is None else self.gossip.flags()),
            "--log.level=warn",
        ]

        def ready() -> bool:
            try:
                return fetch(self.url + "/-/ready", timeout=2).status == 200
            except OSError:
                return False

        self.launch(command, ready, AlertmanagerError, START_TIMEOUT_SECONDS)
        return self

    def alerting(self) -> dict[str, Any]:
        """A Prometheus config's ``alerting`` section sending its alerts here."""
        return alerting_to([self])

    def status(self) -> dict[str, Any]:
        """``GET /api/v2/status``: its config, version and ``cluster`` (``name``,
        ``status``, ``peers``)."""
        answer = fetch(self.url + "/api/v2/status")
        if answer.status != 200:
            raise AlertmanagerError(f"GET /api/v2/status: {answer.status} {answer.text}")
        found: dict[str, Any] = answer.json()
        return found

    def peers(self) -> list[str]:
        """The names of the cluster's members this server knows of (itself included)."""
        return sorted(peer["name"] for peer in self.status()["cluster"].get("peers") or [])

    def position(self) -> int:
        """Its place in the cluster as it sees it (its name's among the members' names):
        the first (0) sends a group's notifications, the next only when the first has not
        after ``--cluster.peer-timeout``."""
        cluster = self.status()["cluster"]
        return sorted(peer["name"] for peer in cluster["peers"]).index(cluster["name"])

    def post_alerts(self, alerts: Iterable[Alert]) -> None:
        """``POST /api/v2/alerts``: as Prometheus sends them (``labels``, ``annotations``,
        ``startsAt``, ``endsAt``...)."""
        answer = fetch(self.url + "/api/v2/alerts", method="POST", json=list(alerts))
        if answer.status != 200:
            raise AlertmanagerError(f"posting alerts: {answer.status} {answer.text}")

    def alerts(self, **labels: str) -> list[Alert]:
        """The alerts Alertmanager holds with (at least) these labels, whatever their state:
        each with ``labels`` and ``status`` (``state`` active|suppressed|unprocessed,
        ``inhibitedBy``, ``silencedBy``: fingerprints)."""
        query = "&".join(f"filter={quote(f'{key}={json.dumps(value)}')}"
                         for key, value in labels.items())  # fmt: skip
        answer = fetch(self.url + "/api/v2/alerts" + (f"?{query}" if query else ""))
        if answer.status != 200:
            raise AlertmanagerError(f"GET /api/v2/alerts: {answer.status} {answer.text}")
        found: list[Alert] = answer.json()
        return found

    def status_of(self, **labels: str) -> dict[str, Any]:
        """The status (``state``, ``inhibitedBy``, ``silencedBy``) of the one alert with these
        labels."""
        found = self.alerts(**labels)
        if len(found) != 1:
            raise AlertmanagerError(f"{len(found)} alerts match {labels}: {found}")
        status: dict[str, Any] = found[0]["status"]
        return status

    def wait_for_alert(self, state: str = "active", timeout: float = 30.0, **labels: str) -> Alert:
        """Wait until an alert with these labels is held in ``state``; that alert."""

        def held() -> Alert | None:
            return next((a for a in self.alerts(**labels) if a["status"]["state"] == state), None)

        found: Alert = wait_until(
            held, timeout=timeout, interval=POLL_SECONDS,
            message=lambda: f"no {state} alert {labels}: {self.alerts()}",
        )  # fmt: skip
        return found


def alerting_to(servers: Iterable[AlertmanagerServer]) -> dict[str, Any]:
    """A Prometheus config's ``alerting`` section sending its alerts to every one of
    ``servers`` (the peers of a cluster: each Prometheus sends to all of them)."""
    target = {"targets": [f"127.0.0.1:{server.port}" for server in servers]}
    return {"alertmanagers": [{"api_version": "v2", "static_configs": [target]}]}


def cluster(
    workdir: Path, config: Mapping[str, Any], scale: int, size: int = 2
) -> list[AlertmanagerServer]:
    """``size`` servers (not started) with ``config``, each in ``workdir/alertmanager-N``,
    gossiping on loopback, each peered with every other (:func:`gossip_for`)."""
    ports = [free_port() for _ in range(size)]
    return [
        AlertmanagerServer(
            workdir / f"alertmanager-{index}",
            config,
            gossip=gossip_for(port, (p for p in ports if p != port), scale),
        )
        for index, port in enumerate(ports)
    ]


def wait_clustered(servers: Sequence[AlertmanagerServer], timeout: float = 30.0) -> None:
    """Until every running one of ``servers`` counts all the running ones as its peers
    (and no other): the cluster has (re)formed."""
    running = [server for server in servers if server.running]

    def formed() -> bool:
        return all(len(server.peers()) == len(running) for server in running)

    wait_until(
        formed, timeout=timeout, interval=POLL_SECONDS, ignoring=(OSError, AlertmanagerError),
        message=lambda: "cluster not formed: " + "; ".join(
            f"{server.url} {server.status().get('cluster')}" for server in running),
    )  # fmt: skip


class Alertmanagers:
    """The Alertmanager servers and webhook receivers of one test (or module), each server in
    its own directory under ``workdir``; all stopped by ``stop_all`` (what the
    ``alertmanager`` fixture is)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.servers: list[AlertmanagerServer] = []
        self.webhooks: list[WebhookReceiver] = []

    def webhook(self) -> WebhookReceiver:
        """A started webhook receiver."""
        receiver = WebhookReceiver()
        self.webhooks.append(receiver)
        return receiver

    def start(self, config: Mapping[str, Any]) -> AlertmanagerServer:
        """A started Alertmanager with ``config`` (a document)."""
        server = AlertmanagerServer(self.workdir / f"alertmanager-{len(self.servers)}", config)
        self.servers.append(server)
        return server.start()

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()
        for receiver in self.webhooks:
            receiver.stop()
