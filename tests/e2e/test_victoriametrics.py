"""VictoriaMetrics as the scraper and rule engine (issue 34): Debian's ``victoria-metrics``
scrapes the real exporter polling a simulated network, and ``vmalert`` evaluates the shipped
rules against what it stored.

The network and the exporter's config are those of test_alerts_e2e (7 nodes, 2 chains, seed 5,
a watched contract and wallet), so the shortened alert rules behave as they do there.

- **Both formats.** VictoriaMetrics asks for the text format; a scrape job's ``headers`` make
  it ask for OpenMetrics. Each case gives its job its own User-Agent, and the exporter's
  request log (``--log.level=debug``: user_agent, content_type) shows which format that job
  was served. What VictoriaMetrics stores for the job (``-promscrape.config.strictParse``) is
  what the exporter serves in that format: the same series (name and labels), and the same
  values where they hold still. That exporter polls once (``still``): vote sessions come and
  go every second on the network, so a page that changes could never be compared.
- **The shipped scrape configs** (deploy/prometheus/) pass VictoriaMetrics's strict parsing,
  once Prometheus's own settings (rule files, Alertmanagers: vmalert's flags) are taken out.
- **Every rule.** One vmalert evaluates ``deploy/prometheus/rules.yml`` and ``alerts.yml``
  unchanged: every rule evaluated, none with an error (its API and its error counters), every
  recording rule (but the probe mode's) records something.
- **One alert.** A second vmalert evaluates ``alerts.yml`` shortened by ``SCALE`` (as
  test_alerts_e2e does): node-5 down raises LedgerNodeDown, which fires, reaches the
  receiver, and clears when the node is back.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

from exporter.expose.render import OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE
from ledger_simulator import SimulatedNetwork
from tests.support.http import fetch
from tests.support.monitoring import PROM_DIR
from tests.support.processes import ExporterProcess
from tests.support.scaling import load_rules, write_shortened
from tests.support.simulator import watch_list
from tests.support.victoriametrics import (
    OPENMETRICS_ACCEPT,
    SCRAPE_SERIES,
    VM_ACCEPT,
    AlertReceiver,
    VictoriaMetrics,
    VictoriaMetricsServer,
    VmAlert,
    check_scrape_config,
    scrape_job,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

JOB = "ledger-exporter"  # the job the shipped rules select
SCALE = 60
Series = tuple[str, frozenset[tuple[str, str]]]  # a metric name and its labels


@dataclass(frozen=True)
class Served:
    net: SimulatedNetwork
    exporter: ExporterProcess
    address: str  # host:port, the instance label


@pytest.fixture(scope="module")
def network() -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=7, chains=2, block_interval=0.5, seed=5, port=0) as net:
        yield net


@contextmanager
def exporter_on(net: SimulatedNetwork, workdir: Path, interval: str) -> Iterator[Served]:
    """An exporter (logging each request) polling ``net`` every ``interval``."""
    chains = {name: node["blockchains"] for name, node in net.listing()["nodes"].items()}
    nodes = [{"name": n, "url": u, "blockchains": chains[n]} for n, u in net.node_urls.items()]
    timeout = "1s" if interval == "1s" else "10s"  # the whole interval, as test_alerts_e2e
    settings = {"scrape_interval": interval, "scrape_timeout": timeout, "nodes": nodes}
    config = workdir / "exporter.yml"
    config.write_text(yaml.safe_dump({**settings, "watch": watch_list(net)}))
    exporter = ExporterProcess(config, "--log.level=debug")
    try:
        exporter.wait_ready()
        yield Served(net, exporter, f"127.0.0.1:{exporter.port}")
    finally:
        code, log = exporter.stop()
    assert code == 0, log


@pytest.fixture(scope="module")
def served(network: SimulatedNetwork, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The exporter polling the network every second, as in test_alerts_e2e."""
    with exporter_on(network, tmp_path_factory.mktemp("exporter"), "1s") as exporter:
        yield exporter


@pytest.fixture(scope="module")
def still(network: SimulatedNetwork, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """An exporter that polls the network once (its interval is an hour): its page keeps the
    same series however often it is scraped (vote sessions come and go every second on the
    network), so what a scrape stored can be compared with what a request gets."""
    with exporter_on(network, tmp_path_factory.mktemp("still"), "1h") as exporter:
        yield exporter


# --- both formats --------------------------------------------------------------------------

FORMATS = {  # each case's Accept header (VictoriaMetrics's own for text) and the answer's type
    "text": (VM_ACCEPT, TEXT_CONTENT_TYPE),
    "openmetrics": (OPENMETRICS_ACCEPT, OPENMETRICS_CONTENT_TYPE),
}
_LOGFMT = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')


def served_samples(base: str, accept: str, content_type: str) -> dict[Series, float]:
    """The samples of the exporter's page as a scraper asking with ``accept`` gets it, read
    by client_python's parser of the format."""
    answer = fetch(base + "/metrics", headers={"Accept": accept})
    assert answer.status == 200 and answer.headers["Content-Type"] == content_type
    parse = openmetrics_families if content_type == OPENMETRICS_CONTENT_TYPE else text_families
    return {  # an empty label is no label (build_info's branch=""), there as in Prometheus
        (sample.name, frozenset((k, v) for k, v in sample.labels.items() if v)): sample.value
        for family in parse(answer.text)
        for sample in family.samples
    }


def stored_samples(server: VictoriaMetricsServer, job: str, address: str) -> dict[Series, float]:
    """The samples of ``job``'s latest scrape as VictoriaMetrics answers them, without the
    series it adds itself (``up``, ``scrape_*``) and without ``job`` and ``instance``."""
    found: dict[Series, float] = {}
    for sample in server.query(f'{{job="{job}"}}'):
        labels = dict(sample["metric"])
        name = labels.pop("__name__")
        assert (labels.pop("job"), labels.pop("instance")) == (job, address), sample
        if name not in SCRAPE_SERIES:
            found[name, frozenset(labels.items())] = float(sample["value"][1])
    return found


def steady(series: Series) -> bool:
    """A series whose value an exporter that polled once serves unchanged: its own, not the
    process's (CPU, memory, GC) nor an age (counted up to the moment of the request)."""
    return series[0].startswith("ledger_") and not series[0].endswith("_age_seconds")


def requests_of(exporter: ExporterProcess, user_agent: str) -> list[dict[str, str]]:
    """The fields of the exporter's request log lines for ``user_agent``."""
    lines = []
    for line in exporter.log().splitlines():
        fields = {key: value.strip('"') for key, value in _LOGFMT.findall(line)}
        if fields.get("msg") == "request" and fields.get("user_agent") == user_agent:
            lines.append(fields)
    return lines


@pytest.mark.parametrize("fmt", FORMATS)
def test_victoriametrics_stores_every_series_served(
    still: Served, victoriametrics: VictoriaMetrics, fmt: str
) -> None:
    accept, content_type = FORMATS[fmt]
    job, agent = f"ledger-{fmt}", f"victoriametrics-{fmt}"
    config = scrape_job(job, [still.address], openmetrics=fmt == "openmetrics", user_agent=agent)
    server = victoriametrics.server([config])
    [target] = server.wait_for_targets_up([job], timeout=30)
    assert target["lastError"] == "" and target["scrapeUrl"] == f"{still.exporter.base}/metrics"

    last: dict[str, dict[Series, float]] = {}

    def same() -> bool:  # until the scrape is stored whole
        last["stored"] = stored_samples(server, job, still.address)
        last["served"] = served_samples(still.exporter.base, accept, content_type)
        return last["stored"].keys() == last["served"].keys()

    wait_until(
        same,
        timeout=30,
        interval=0.5,
        message=lambda: (
            f"stored, not served: {sorted(last['stored'].keys() - last['served'])[:20]}; "
            f"served, not stored: {sorted(last['served'].keys() - last['stored'])[:20]}"
        ),
    )
    stored, served = last["stored"], last["served"]
    for series in filter(steady, served):
        assert stored[series] == pytest.approx(served[series], rel=1e-12), series
    nodes_up = {
        dict(labels)["node"]: v for (name, labels), v in stored.items() if name == "ledger_node_up"
    }
    assert nodes_up == dict.fromkeys(still.net.node_names, 1.0)
    assert {name for name, _ in stored} >= {"ledger_contract_info", "ledger_wallet_enabled"}
    assert server.values(f'up{{job="{job}"}}') == {(): 1.0}

    scrapes = requests_of(still.exporter, agent)
    assert scrapes, f"no request of {agent} in the exporter's log"
    assert {(r["path"], r["status"], r["content_type"]) for r in scrapes} == {
        ("/metrics", "200", content_type)
    }
    complaints = [line for line in server.log().splitlines() if "\terror\t" in line]
    assert not complaints and "cannot parse" not in server.log(), server.log()


# Prometheus's own settings, which VictoriaMetrics takes as flags (vmalert's -rule,
# -evaluationInterval, -notifier.url): its strict parsing refuses them in a scrape config.
PROMETHEUS_ONLY = {"rule_files", "alerting"}


SCRAPE_CONFIGS = [  # deploy/prometheus's Prometheus configs, not its rule files
    path
    for path in sorted(PROM_DIR.glob("*.yml"))
    if "scrape_configs" in yaml.safe_load(path.read_text(encoding="utf-8"))
]


@pytest.mark.parametrize("path", SCRAPE_CONFIGS, ids=lambda p: p.name)
def test_shipped_scrape_configs_pass_victoriametrics_strict_parsing(
    path: Path, tmp_path: Path
) -> None:
    """A user can copy the scrape configs of deploy/prometheus/ into vmagent's or
    VictoriaMetrics's ``-promscrape.config`` as they are."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    scraping = {key: value for key, value in document.items() if key not in PROMETHEUS_ONLY}
    scraping["global"] = {
        key: value
        for key, value in document.get("global", {}).items()
        if key != "evaluation_interval"
    }
    config = tmp_path / path.name
    config.write_text(yaml.safe_dump(scraping))
    result = check_scrape_config(config, cwd=PROM_DIR)  # file_sd paths are relative to it
    assert result.returncode == 0, f"{path.name}:\n{result.stdout}{result.stderr}"


# --- the rules -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Engines:
    server: VictoriaMetricsServer
    shipped: VmAlert  # rules.yml and alerts.yml as shipped
    fast: VmAlert  # alerts.yml shortened by SCALE
    receiver: AlertReceiver  # where fast's alerts go


@pytest.fixture(scope="module")
def engines(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engines]:
    workdir = tmp_path_factory.mktemp("vmalert")
    shortened = write_shortened(PROM_DIR / "alerts.yml", workdir / "alerts-shortened.yml", SCALE)
    processes = VictoriaMetrics(workdir)
    try:
        server = processes.server([scrape_job(JOB, [served.address])])
        server.wait_for_targets_up([JOB], timeout=30)
        server.wait_for("count_over_time(ledger_node_up[1m]) >= 3", timeout=20)
        shipped, _ = processes.vmalert(server, [PROM_DIR / "rules.yml", PROM_DIR / "alerts.yml"])
        # A minute a second: the lookback of a selector without a range (5m) shortens too.
        fast, receiver = processes.vmalert(server, [shortened], query_step="5s", write_back=False)
        yield Engines(server, shipped, fast, receiver)
    finally:
        processes.stop_all()


def wait_for_evaluations(vmalert: VmAlert, evaluations: int) -> None:
    """Until every rule group of ``vmalert`` has been evaluated ``evaluations`` more times."""
    seen: dict[str, set[str]] = {}

    def evaluated() -> bool:
        for group in vmalert.rules():
            seen.setdefault(group["name"], set()).add(group["lastEvaluation"])
        return min(len(times) for times in seen.values()) > evaluations

    wait_until(evaluated, timeout=60, interval=0.2, message=lambda: f"evaluations: {seen}")


#: vmalert's error metric per rule: whether its last evaluation failed (1.79, Debian's), or
#: the count of failed evaluations (later versions).
RULE_ERRORS = re.compile(r"vmalert_(alerting|recording)_rules_(error|errors_total)")


def error_metrics(vmalert: VmAlert) -> tuple[dict[str, float], float]:
    """vmalert's error metric by rule (summed over its samples), and the count of the error
    lines it logged."""
    by_rule: dict[str, float] = {}
    logged = 0.0
    for family in text_families(vmalert.metrics()):
        for sample in family.samples:
            if RULE_ERRORS.fullmatch(sample.name):
                rule = sample.labels.get("alertname") or sample.labels["recording"]
                by_rule[rule] = by_rule.get(rule, 0.0) + sample.value
            elif sample.name == "vm_log_messages_total" and sample.labels["level"] == "error":
                logged += sample.value
    return by_rule, logged


def test_vmalert_evaluates_every_shipped_rule_without_error(engines: Engines) -> None:
    wait_for_evaluations(engines.shipped, 3)
    alerts, records = load_rules(PROM_DIR / "alerts.yml"), load_rules(PROM_DIR / "rules.yml")
    states = engines.shipped.rule_states()
    assert states.keys() == alerts.keys() | records.keys()
    for name, rule in states.items():
        assert rule["lastError"] == "" and rule["health"] == "ok", f"{name}: {rule}"
        assert rule["type"] == ("alerting" if name in alerts else "recording"), name
    assert error_metrics(engines.shipped) == (dict.fromkeys(states, 0.0), 0.0)
    for name, rule in records.items():
        if "ledger_probe_" not in rule["expr"]:  # probe mode: nothing to record here
            engines.server.wait_for(name, timeout=20)
    firing = [a["labels"] for a in engines.shipped.alerts() if a["state"] == "firing"]
    watchdog = [labels for labels in firing if labels["alertname"] == "LedgerWatchdog"]
    assert len(watchdog) == 1, f"the dead man's switch must always fire: {firing}"
    firing = [labels for labels in firing if labels["alertname"] != "LedgerWatchdog"]
    assert not firing, f"alerts firing on a healthy network: {firing}"


# --- one alert, fired and cleared ----------------------------------------------------------

NODE, FAULT, ALERT = "node-5", "down", "LedgerNodeDown"


def node_down(vmalert: VmAlert, state: str) -> list[dict[str, Any]]:
    return [
        alert
        for alert in vmalert.alerts()
        if alert["labels"].get("alertname") == ALERT
        and alert["labels"].get("node") == NODE
        and alert["state"] == state
    ]


def test_alert_fires_in_vmalert_and_clears(engines: Engines, served: Served) -> None:
    fast, receiver = engines.fast, engines.receiver
    wait_for_evaluations(fast, 2)
    assert not node_down(fast, "firing") + node_down(fast, "pending")
    served.net.set_fault(NODE, FAULT)
    try:
        [alert] = wait_until(lambda: node_down(fast, "firing"), timeout=60, interval=0.2,
                             message=f"{ALERT} on {NODE} not firing")  # fmt: skip
        expected = {"alertname": ALERT, "severity": "critical", "node": NODE, "job": JOB}
        assert expected.items() <= alert["labels"].items()
        assert alert["labels"]["instance"] == served.address
        assert NODE in alert["annotations"]["description"]
        sent = wait_until(lambda: receiver.alerts(ALERT), timeout=30, message="not sent")
        assert sent[0]["labels"]["node"] == NODE
    finally:
        served.net.set_fault(NODE, FAULT, enabled=False)
    wait_until(
        lambda: not node_down(fast, "firing") and not node_down(fast, "pending"),
        timeout=60,
        interval=0.2,
        message=f"{ALERT} on {NODE} not cleared",
    )
    resolved = wait_until(  # vmalert sends a resolved alert: its endsAt is not in the future
        lambda: [a for a in receiver.alerts(ALERT) if _ended(a["endsAt"])],
        timeout=30,
        message=lambda: f"no resolved {ALERT} sent: {receiver.alerts(ALERT)}",
    )
    assert resolved[-1]["labels"]["node"] == NODE


def _ended(ends_at: str) -> bool:
    """An RFC 3339 time (vmalert's nanoseconds and zone) is now or past."""
    stamp = re.sub(r"(\.\d{6})\d*", r"\1", ends_at).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp() <= time.time() + 1
