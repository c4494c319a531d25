"""One incident, as an on-call engineer receives it: the exporter polling a simulated network,
a real Prometheus evaluating the shipped rules, a real Alertmanager routing with the shipped
config, and a webhook in the test where every receiver posts.

Time runs ``SCALE`` times faster for all of them together (``tests/support/scaling.py``): the
rules' ``for``, windows and ages, Alertmanager's waits (``for_tests``; ``group_wait`` no
shorter than the two evaluations it spans at full scale), and the simulated chains' pace
(a block interval of a chain's ``txMaxTimeTrigger`` divided by the scale: ``block_interval``).

Prometheus can start with a healthy past (``history``: ``HISTORY_MINUTES`` of the rules'
time, three days): the error ratios the budget-burn alerts read are averages over windows of
up to three days, and a Prometheus started seconds ago would let a short outage fill its
long windows, an artefact of the test that a long-running Prometheus never shows. ``promtool tsdb
create-blocks-from openmetrics`` writes that past (each node up, each chain advancing, one
sample a second as the test's evaluations) before Prometheus starts.

With ``pair=True`` the stack is the high-availability topology, two of everything: two
exporter replicas polling the same nodes (each its own state file), scraped as one logical
exporter (one ``instance``, ``PAIR``, and ``exporter_replica`` ``a``/``b``); two Prometheus,
each with its ``prometheus_replica`` external label dropped from the alerts it sends
(``PROMETHEUS_PAIR``), each sending to both Alertmanagers; two Alertmanagers clustered by
gossip over loopback (``tests/support/alertmanager.py``'s ``cluster``). A test loses one
part of each (``lose_*``: SIGKILL, a crash) and brings them back (``restore``).
"""

from __future__ import annotations

import contextlib
import math
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ledger_simulator.settings import trigger_seconds
from tests.support.alertmanager import (
    RESEND_FLAG,
    ROUTE_DEFAULTS,
    AlertmanagerServer,
    WebhookReceiver,
    alerting_to,
    cluster,
    for_tests,
    load_config,
    sinks,
    wait_clustered,
)
from tests.support.monitoring import PROM_DIR, REPLICA_LABEL
from tests.support.processes import ExporterProcess
from tests.support.programs import require_program
from tests.support.prometheus import PrometheusServer, pair_member, shipped_pair_targets
from tests.support.scaling import duration_ms, write_shortened
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

SCALE = 60
JOB = "ledger-exporter"
EVALUATION_MS = 1000  # the test's Prometheus evaluates the rules every second
SHIPPED_ALERTMANAGER = REPO / "deploy" / "alertmanager" / "alertmanager.yml"
WATCHDOG = "LedgerWatchdog"
#: The receiver the watchdog goes to (a dead man's switch, not a page nor a ticket).
DEADMANSSWITCH = "ledger-deadmansswitch"
#: The severities the shipped route sends to the sink (``ledger-null``): alerts that stand
#: as they are (a council with no margin) and notify nobody, left out of "quiet".
SILENT_SEVERITIES = frozenset({"info", "none"})
#: The longest window a budget-burn alert reads (3 days: the slowest warning's), in minutes
#: of the rules' time: the healthy past a stack starts with by default.
HISTORY_MINUTES = 3 * 24 * 60
#: How long the stack's Prometheus keeps samples: that past (72 minutes of wall time) and
#: the module's own.
HISTORY_RETENTION = "3h"
#: The pair's ``instance`` (both replicas' targets carry it) and its replicas' names (their
#: ``exporter_replica``), as the shipped ``deploy/prometheus/ha.yml`` labels its targets;
#: the names of the pair's Prometheus (their ``prometheus_replica``).
_PAIR_TARGETS = shipped_pair_targets(JOB)
(PAIR,) = {labels["instance"] for labels in _PAIR_TARGETS}
REPLICAS = tuple(labels[REPLICA_LABEL] for labels in _PAIR_TARGETS)
PROMETHEUS_PAIR = ("one", "two")
_WINDOW = re.compile(r"\[(\w+)(?::\w*)?\]")
Alert = dict[str, Any]


def block_interval(seed: int, chain: int) -> float:
    """The simulated network's block interval putting ``chain`` at the rules' pace."""
    return trigger_seconds(seed, chain) / SCALE


def shipped_rule_files() -> list[Path]:
    """The rule files the shipped Prometheus config loads (relative to it)."""
    config = yaml.safe_load((PROM_DIR / "prometheus.yml").read_text(encoding="utf-8"))
    return [PROM_DIR / name for name in config["rule_files"]]


def rule_span_seconds(alertname: str) -> float:
    """How long, in the test's seconds, a condition must hold before the shipped alert
    ``alertname`` fires at the latest: its ``for`` plus its longest range window (every
    rule of that name), scaled."""
    spans = [
        duration_ms(rule.get("for", "0s"))
        + max((duration_ms(w) for w in _WINDOW.findall(rule["expr"])), default=0)
        for path in shipped_rule_files()
        for rule in _rules_named(path, alertname)
    ]
    if not spans:
        raise AssertionError(f"no shipped rule {alertname}")
    return max(spans) / 1000 / SCALE


def _rules_named(path: Path, alertname: str) -> list[dict[str, Any]]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"]
            if rule.get("alert") == alertname]  # fmt: skip


def group_wait_floor(shipped: Mapping[str, Any]) -> str:
    """The shipped route's ``group_wait`` counted in the shipped Prometheus's evaluations
    (30 s of 15 s: two), as many of the test's (one a second, whatever the scale)."""
    prometheus = yaml.safe_load((PROM_DIR / "prometheus.yml").read_text(encoding="utf-8"))
    evaluation = duration_ms(prometheus["global"]["evaluation_interval"])
    wait = duration_ms({**ROUTE_DEFAULTS, **shipped["route"]}["group_wait"])
    return f"{wait * EVALUATION_MS // evaluation}ms"


def longest_seconds(config: Mapping[str, Any], *keys: str) -> float:
    """The longest of ``keys`` (``group_wait``, ``group_interval``) over a (test)
    Alertmanager config's routes, in seconds."""

    def times(route: Mapping[str, Any]) -> Iterator[int]:
        yield from (duration_ms(route[key]) for key in keys if key in route)
        for child in route.get("routes", []):
            yield from times(child)

    return max(times(config["route"])) / 1000


def backfill_healthy(
    data: Path,
    instance: str,
    *,
    nodes: Iterable[str],
    chains: Iterable[str],
    minutes: int,
    replicas: Iterable[str] = (),
) -> None:
    """Write into Prometheus's ``data`` directory ``minutes`` of the rules' time, ending now,
    in which every node was up and every chain advancing (what the budget-burn alerts'
    error ratios are computed from), one sample a second. The exporter's series once per
    replica (``replicas``: a pair's, each its ``exporter_replica``; the series the scrapes go
    on with, not others that Prometheus would still read for its five-minute lookback); the
    recorded ones once, as the rules fold the replicas."""
    seconds = minutes * 60 // SCALE
    end = int(time.time()) - 1
    labels = f'job="{JOB}",instance="{instance}"'
    scraped = [f'{labels},{REPLICA_LABEL}="{r}"' for r in replicas] or [labels]
    series = {
        "ledger_node_up": ([f'{each},node="{node}"' for each in scraped for node in nodes], 1),
        "blockchain:ledger_blockchain_height:not_advancing": (
            [f'{labels},blockchain="{chain}"' for chain in chains], 0),
    }  # fmt: skip
    lines = []
    for family, (sets, value) in series.items():
        lines.append(f"# TYPE {family} gauge")
        lines.extend(f"{family}{{{label_set}}} {value} {t}"
                     for label_set in sets for t in range(end - seconds, end + 1))  # fmt: skip
    lines.append("# EOF")
    source = data.parent / "history.om"
    data.mkdir(parents=True, exist_ok=True)  # its parent too: Prometheus's workdir
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    subprocess.run(
        [require_program("promtool"), "tsdb", "create-blocks-from", "openmetrics",
         str(source), str(data)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


class ExporterReplica:
    """An exporter process polling every second with ``settings`` (its config written to
    ``config``), started with ``flags``; a test may crash it (``kill``) and start it again
    (``restart``) on the same address, config and flags (its state file)."""

    def __init__(self, config: Path, settings: Mapping[str, Any], *flags: str) -> None:
        # The whole interval as the deadline, as test_alerts.py: one late answer on two busy
        # cores is otherwise a pending LedgerNodeDown.
        config.write_text(yaml.safe_dump({"scrape_interval": "1s", "scrape_timeout": "1s",
                                          **settings}))  # fmt: skip
        self.config, self.flags = config, flags
        self.process = self._started()
        self.address = f"127.0.0.1:{self.process.port}"

    def _started(self, *more: str) -> ExporterProcess:
        process = ExporterProcess(self.config, *self.flags, *more)
        try:
            process.wait_ready()
        except AssertionError:
            process.stop(check_log=False)
            raise
        return process

    @property
    def running(self) -> bool:
        return self.process.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the replica is lost."""
        self.process.kill()

    def restart(self) -> None:
        """Start it again where it was (its address, config, state file), once lost."""
        self.process.stop()
        self.process = self._started(f"--web.listen-address={self.address}")

    def stop(self) -> None:
        self.process.stop()


@contextlib.contextmanager
def exporter_on(config: Path, settings: Mapping[str, Any]) -> Iterator[str]:
    """An exporter polling every second with ``settings``; its ``host:port``."""
    exporter = ExporterReplica(config, settings)
    try:
        yield exporter.address
    finally:
        exporter.stop()


@dataclass
class AlertingStack:
    """The running stack: the Prometheus servers (one, or a pair), the Alertmanagers (one,
    or a cluster), the exporters (by replica name; ``""`` alone), the webhook, the
    exporter's ``instance``, the receivers that send somewhere (``paging``: pages and
    tickets), the sink, and Alertmanager's longest ``group_wait`` and longest wait
    (``group_wait`` or ``group_interval``, and a cluster's ``peer_timeout``: when a group's
    last notification, resolved or not, is sent at the latest), in seconds."""

    proms: list[PrometheusServer]
    ams: list[AlertmanagerServer]
    exporters: dict[str, ExporterReplica]
    webhook: WebhookReceiver
    instance: str
    paging: frozenset[str]
    sink: str
    group_wait: float
    longest_wait: float

    @property
    def prom(self) -> PrometheusServer:
        """The first Prometheus still running: the one to ask."""
        return next(server for server in self.proms if server.running)

    @property
    def am(self) -> AlertmanagerServer:
        """The first Alertmanager still running: the one to ask."""
        return next(server for server in self.ams if server.running)

    # --- losing parts of a pair, and bringing them back ---

    def lose_exporter(self, replica: str) -> None:
        self.exporters[replica].kill()

    def lose_prometheus(self, index: int) -> None:
        self.proms[index].kill()

    def lose_alertmanager(self, index: int) -> None:
        self.ams[index].kill()

    def now(self) -> float:
        """The time of a running Prometheus's clock (its evaluations' timestamps)."""
        return float(self.prom.query("vector(time())")[0]["value"][1])

    def restore(self) -> None:
        """Start again every part lost, each where it was; until the Alertmanagers form
        their cluster again and every Prometheus scrapes every exporter."""
        for exporter in self.exporters.values():
            if not exporter.running:
                exporter.restart()
        for server in [*self.ams, *self.proms]:
            if not server.running:
                server.start()
        if len(self.ams) > 1:
            wait_clustered(self.ams)
        for prom in self.proms:
            prom.wait_for_scrapes(timeout=30)

    # --- what was delivered ---

    def notified(self, since: int, ignore: Iterable[str] = ()) -> list[dict[str, Any]]:
        """This exporter's notifications from the ``since``-th on, to a receiver that sends
        somewhere, the watchdog's aside; each with only its alerts of this exporter whose
        names are not in ``ignore``, and none left without alerts."""
        skipped = {WATCHDOG, *ignore}
        kept = []
        for note in self.webhook.received()[since:]:
            if note["receiver"] not in self.paging or note["receiver"] == DEADMANSSWITCH:
                continue
            alerts = [a for a in note["alerts"]
                      if a["labels"].get("instance") == self.instance
                      and a["labels"].get("alertname") not in skipped]  # fmt: skip
            if alerts:
                kept.append({**note, "alerts": alerts})
        return kept

    def groups(self, since: int, ignore: Iterable[str] = ()) -> dict[str, set[str]]:
        """Each notification group (``groupKey``) notified from the ``since``-th on, with
        the names of the alerts it carried firing."""
        found: dict[str, set[str]] = {}
        for note in self.notified(since, ignore):
            names = found.setdefault(note["groupKey"], set())
            names |= {a["labels"]["alertname"] for a in note["alerts"] if a["status"] == "firing"}
        return found

    def pages(self, since: int, ignore: Iterable[str] = ()) -> Counter[str]:
        """This exporter's alerts delivered firing to the page receiver (critical), by name."""
        return self.webhook.firing(
            receivers=["ledger-page"], ignore={WATCHDOG, *ignore},
            where={"instance": self.instance}, since=since,
        )  # fmt: skip

    def summary(self, since: int = 0) -> str:
        return self.webhook.summary(since, ignore=[WATCHDOG])

    # --- what Prometheus and Alertmanager hold ---

    def alerts_here(self, states: Iterable[str] = ("pending", "firing"),
                    ignore: Iterable[str] = ()) -> list[Alert]:  # fmt: skip
        """This exporter's alerts in Prometheus in one of ``states``, names in ``ignore``,
        the watchdog and the silent severities aside."""
        wanted, skipped = set(states), {WATCHDOG, *ignore}
        return [a for a in self.prom.alerts()
                if a["state"] in wanted and a["labels"].get("instance") == self.instance
                and a["labels"]["alertname"] not in skipped
                and a["labels"].get("severity") not in SILENT_SEVERITIES]  # fmt: skip

    def held_here(self, ignore: Iterable[str] = ()) -> list[Alert]:
        """This exporter's alerts Alertmanager still holds for a receiver that sends
        somewhere (names in ``ignore`` aside)."""
        skipped = set(ignore)
        return [a for a in self.am.alerts(instance=self.instance)
                if a["labels"]["alertname"] not in skipped
                and {r["name"] for r in a["receivers"]} != {self.sink}]  # fmt: skip

    def wait_quiet(
        self, what: str, ignore: Iterable[str] = (), *, settle: bool = True, timeout: float = 90
    ) -> None:
        """Until nothing of this exporter is pending or firing in Prometheus nor held in
        Alertmanager (names in ``ignore`` aside); with ``settle``, then Alertmanager's
        longest wait more (``group_wait`` or ``group_interval``), after which no
        notification of what came before, resolved ones included, can still arrive."""
        skipped = list(ignore)
        wait_until(
            lambda: not self.alerts_here(ignore=skipped) and not self.held_here(skipped),
            timeout=timeout, interval=0.25,
            message=lambda: (f"{what}: in Prometheus {self.alerts_here(ignore=skipped)}, "
                             f"held {self.held_here(skipped)}"),
        )  # fmt: skip
        if settle:
            time.sleep(self.longest_wait)

    def inhibitors(self, **labels: str) -> dict[str, list[str]]:
        """For each alert Alertmanager holds with these labels (by its ``node`` or
        fingerprint): the names of the alerts holding it back (empty: not held back)."""
        everything = self.am.alerts()
        names = {a["fingerprint"]: a["labels"]["alertname"] for a in everything}
        return {
            alert["labels"].get("node", alert["fingerprint"]): sorted(
                names.get(print_, print_) for print_ in alert["status"]["inhibitedBy"]
            )
            for alert in self.am.alerts(instance=self.instance, **labels)
        }

    def held_for(self, seconds: float, expr: str) -> Callable[[], bool]:
        """A predicate: ``expr`` (a vector expression) has had a sample at (all but one of)
        the evaluations of the last ``seconds``: a state that held that long."""
        count = max(2, math.ceil(seconds))

        def held() -> bool:
            return bool(self.prom.query(
                f"count_over_time(count({expr})[{count}s:1s]) >= {count - 1}"))  # fmt: skip

        return held


@contextlib.contextmanager
def alerting_stack(
    workdir: Path,
    settings: Mapping[str, Any],
    *,
    history: tuple[list[str], list[str], int] | None = None,
    pair: bool = False,
) -> Iterator[AlertingStack]:
    """The exporter with ``settings`` (its ``nodes``, ``watch``...), Prometheus on the shipped
    rules shortened by ``SCALE``, Alertmanager on the shipped config pointed at the webhook.
    ``history``: (nodes, chains, minutes of the rules' time) of healthy past to backfill.
    ``pair``: two of each (the module's docstring)."""
    rules = [write_shortened(path, workdir / f"short-{path.name}", SCALE)
             for path in shipped_rule_files()]  # fmt: skip
    shipped = load_config(SHIPPED_ALERTMANAGER)
    sink_names = sinks(shipped)
    assert len(sink_names) == 1, f"one receiver that sends nowhere expected: {sink_names}"
    with contextlib.ExitStack() as stop:
        webhook = WebhookReceiver()
        stop.callback(webhook.stop)
        am_config = for_tests(shipped, webhook, SCALE, min_group_wait=group_wait_floor(shipped))
        ams = (cluster(workdir, am_config, SCALE) if pair
               else [AlertmanagerServer(workdir / "alertmanager", am_config)])  # fmt: skip
        for am in ams:
            stop.enter_context(am)
        if pair:
            wait_clustered(ams)
        names = REPLICAS if pair else ("",)
        exporters = {}
        for name in names:
            flags = [f"--state.file={workdir / f'state-{name}.json'}"] if pair else []
            config = workdir / (f"exporter-{name}.yml" if pair else "exporter.yml")
            replica = ExporterReplica(config, settings, *flags)
            stop.callback(replica.stop)
            exporters[name] = replica
        instance = PAIR if pair else exporters[""].address
        proms = []
        for name in PROMETHEUS_PAIR if pair else ("",):
            server = PrometheusServer(
                workdir / ("prometheus-" + name if pair else "prometheus"),
                {JOB: [replica.address for replica in exporters.values()]},
                rule_files=rules,
                extra_flags=[RESEND_FLAG],
                retention=HISTORY_RETENTION,
            )
            server.config["alerting"] = alerting_to(ams)
            if pair:
                replicas = zip(exporters.values(), _PAIR_TARGETS, strict=True)
                pair_member(server, name, {r.address: labels for r, labels in replicas})
            if history is not None:
                nodes, chains, minutes = history
                backfill_healthy(server.workdir / "data", instance, nodes=nodes,
                                 chains=chains, minutes=minutes,
                                 replicas=REPLICAS if pair else ())  # fmt: skip
            proms.append(stop.enter_context(server))
        for prom in proms:
            prom.wait_for_scrapes(timeout=30)
        receivers = {receiver["name"] for receiver in shipped["receivers"]}
        peer_wait = max((duration_ms(am.gossip.peer_timeout) / 1000 for am in ams
                         if am.gossip is not None), default=0.0)  # fmt: skip
        yield AlertingStack(
            proms=proms, ams=ams, exporters=exporters, webhook=webhook, instance=instance,
            paging=frozenset(receivers - sink_names), sink=next(iter(sink_names)),
            group_wait=longest_seconds(am_config, "group_wait"),
            longest_wait=longest_seconds(am_config, "group_wait", "group_interval") + peer_wait,
        )  # fmt: skip
