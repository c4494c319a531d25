"""VictoriaMetrics for tests: the single-node server (storage, scraper and query API) and
``vmalert``, Debian's ``victoria-metrics`` package, with an Alertmanager stand-in for vmalert.

``VictoriaMetricsServer`` writes a scrape config into its own directory and starts
``victoria-metrics`` on 127.0.0.1 and a free port with ``-promscrape.config.strictParse`` (an
option it does not know is an error, not silently dropped) and ``-search.latencyOffset=0s``
(a sample is queryable as soon as it is stored, not 30 s later); a test's queries flush
first, so they see every sample ingested. ``VmAlert`` runs ``vmalert`` on rule files against
a server, writing what its recording rules record (and its alerts' state) back to it, and
sending alerts to an ``AlertReceiver``. Both answer the Prometheus HTTP API they implement
through ``PrometheusApi`` (queries and targets; rules and alerts). A test takes them from the
``victoriametrics`` fixture (``VictoriaMetrics``), which stops them after it:

.. code-block:: python

    def test_scraped(victoriametrics: VictoriaMetrics) -> None:
        server = victoriametrics.server([scrape_job("ledger-exporter", [address])])
        server.wait_for_targets_up(["ledger-exporter"])
        vmalert, receiver = victoriametrics.vmalert(server, [RULES], evaluation_interval="1s")
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.support.http import fetch
from tests.support.ports import free_port
from tests.support.processes import stop_process
from tests.support.programs import require_program
from tests.support.prometheus import PrometheusApi, Sample
from tests.support.receiving import PostReceiver
from tests.support.waiting import wait_until

START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.2

#: What VictoriaMetrics asks for unless told otherwise: the text format.
VM_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
#: An Accept header preferring OpenMetrics, for a scrape job's ``headers``.
OPENMETRICS_ACCEPT = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
#: The series VictoriaMetrics adds to every target's own, as Prometheus does.
SCRAPE_SERIES = frozenset(
    {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
        "scrape_timeout_seconds",
    }
)


def scrape_job(
    job: str,
    targets: Sequence[str],
    *,
    openmetrics: bool = False,
    user_agent: str | None = None,
    interval: str = "1s",
) -> dict[str, Any]:
    """A ``scrape_configs`` entry: ``targets`` (``host:port``) scraped every ``interval``, in
    OpenMetrics when ``openmetrics`` (VictoriaMetrics's own Accept header asks for text),
    with ``user_agent`` instead of VictoriaMetrics's ``vm_promscrape`` if given (to tell the
    job's requests apart in the exporter's log)."""
    config: dict[str, Any] = {
        "job_name": job,
        "scrape_interval": interval,
        "scrape_timeout": interval,
        "static_configs": [{"targets": list(targets)}],
    }
    headers = [f"Accept: {OPENMETRICS_ACCEPT}"] if openmetrics else []
    headers += [f"User-Agent: {user_agent}"] if user_agent else []
    if headers:
        config["headers"] = headers
    return config


def check_scrape_config(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``victoria-metrics -promscrape.config.dryRun`` with strict parsing, in ``cwd``: exit
    status 0 when VictoriaMetrics accepts every field of ``path``."""
    command = [
        require_program("victoria-metrics"),
        f"-promscrape.config={path}",
        "-promscrape.config.strictParse",
        "-promscrape.config.dryRun",
        "-loggerLevel=ERROR",
    ]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False, timeout=60)


class VictoriaMetricsError(AssertionError):
    """A VictoriaMetrics process did not start or stopped on its own."""


class _Service:
    """One child process listening on 127.0.0.1 at ``port``, its output in ``log_file``."""

    name = "victoria-metrics"
    health_path = "/health"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_file = workdir / f"{self.name}.log"
        self._process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def healthy(self) -> bool:
        try:
            return fetch(self.url + self.health_path, timeout=2).status == 200
        except OSError:
            return False

    def start(self) -> None:
        """Start the process and wait until its health endpoint answers 200."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = self.command()
        with self.log_file.open("wb") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        process = self._process

        def up() -> bool:
            if process.poll() is not None:
                raise VictoriaMetricsError(
                    f"{self.name} exited with {process.returncode}: {self.log()}"
                )
            return self.healthy()

        try:
            wait_until(up, timeout=START_TIMEOUT_SECONDS, interval=POLL_SECONDS,
                       message=lambda: f"{self.name} not healthy: {self.log()}")  # fmt: skip
        except AssertionError:
            self.stop()
            raise

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """Terminate, wait, kill when it does not end in time."""
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, STOP_TIMEOUT_SECONDS)

    def log(self) -> str:
        """What the process wrote, for failure messages."""
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return "<no log>"

    def metrics(self) -> str:
        """The process's own ``/metrics`` page."""
        answer = fetch(self.url + "/metrics")
        assert answer.status == 200, f"{self.name} /metrics: {answer.status}"
        return answer.text


class VictoriaMetricsServer(_Service, PrometheusApi):
    """Single-node VictoriaMetrics scraping ``scrape_configs`` and storing in ``workdir``."""

    def __init__(self, workdir: Path, scrape_configs: Sequence[Mapping[str, Any]]) -> None:
        _Service.__init__(self, workdir)
        PrometheusApi.__init__(self, self.url)
        self.config_file = workdir / "scrape.yml"
        self.config: dict[str, Any] = {"scrape_configs": [dict(job) for job in scrape_configs]}

    def command(self) -> list[str]:
        self.config_file.write_text(yaml.safe_dump(self.config, sort_keys=False))
        return [
            require_program("victoria-metrics"),
            f"-promscrape.config={self.config_file}",
            "-promscrape.config.strictParse",
            f"-storageDataPath={self.workdir / 'data'}",
            f"-httpListenAddr=127.0.0.1:{self.port}",
            "-retentionPeriod=1d",
            "-search.latencyOffset=0s",
            "-search.disableCache",
            "-loggerLevel=WARN",
        ]

    def ready(self) -> bool:
        return self.healthy()

    def flush(self) -> None:
        """Make what was ingested searchable now (VictoriaMetrics does within seconds)."""
        answer = fetch(self.url + "/internal/force_flush")
        assert answer.status == 200, f"force_flush: {answer.status} {answer.text}"

    def query(self, expr: str) -> list[Sample]:
        """``PrometheusApi.query`` over every sample ingested so far (flushed first)."""
        self.flush()
        return super().query(expr)


class AlertReceiver(PostReceiver):
    """Alertmanager's ``POST /api/v2/alerts`` on 127.0.0.1, keeping every alert posted (vmalert
    sends firing alerts with a future ``endsAt``, resolved ones with a past one)."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        super().__init__()

    def accept(self, path: str, body: bytes) -> int:
        if path != "/api/v2/alerts":
            return 404
        with self.lock:
            self.received.extend(json.loads(body))
        return 200

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """The alerts named ``name`` received so far, in order."""
        with self.lock:
            return [a for a in self.received if a["labels"].get("alertname") == name]


class VmAlert(_Service, PrometheusApi):
    """``vmalert`` evaluating ``rule_files`` every ``evaluation_interval`` against
    ``datasource``, alerting ``notifier``; with ``write_back`` (needed by recording rules)
    it writes what its rules record and its alerts' state to ``datasource``. ``query_step``
    is how far back a selector without a range looks (vmalert's default: 5m, as
    Prometheus's lookback)."""

    name = "vmalert"

    def __init__(
        self,
        workdir: Path,
        datasource: VictoriaMetricsServer,
        rule_files: Sequence[Path],
        notifier: AlertReceiver,
        *,
        evaluation_interval: str = "1s",
        query_step: str = "5m",
        write_back: bool = True,
    ) -> None:
        _Service.__init__(self, workdir)
        PrometheusApi.__init__(self, self.url)
        self.rule_files = [Path(path).resolve() for path in rule_files]
        self._flags = [
            f"-datasource.url={datasource.url}",
            f"-notifier.url={notifier.url}",
            f"-evaluationInterval={evaluation_interval}",
            f"-datasource.queryStep={query_step}",
        ]
        if write_back:
            self._flags += [f"-remoteWrite.url={datasource.url}", "-remoteWrite.flushInterval=1s"]

    def command(self) -> list[str]:
        return [
            require_program("vmalert"),
            *(f"-rule={path}" for path in self.rule_files),
            *self._flags,
            f"-httpListenAddr=127.0.0.1:{self.port}",
            "-loggerLevel=WARN",
        ]

    def ready(self) -> bool:
        return self.healthy()

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts, as ``PrometheusApi.alerts`` (vmalert answers ``null`` for none)."""
        found: list[dict[str, Any]] = self.api("alerts")["alerts"] or []
        return found

    def rule_states(self) -> dict[str, dict[str, Any]]:
        """Every rule by name (alert or record), as ``/api/v1/rules`` tells it: ``health``,
        ``lastError``, ``lastEvaluation``, ``type``..."""
        return {rule["name"]: rule for group in self.rules() for rule in group["rules"]}


class VictoriaMetrics:
    """The VictoriaMetrics processes of one test, each in its own directory under
    ``workdir``; all stopped by ``stop_all`` (what the ``victoriametrics`` fixture is)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._services: list[_Service] = []
        self._receivers: list[AlertReceiver] = []

    def server(self, scrape_configs: Sequence[Mapping[str, Any]]) -> VictoriaMetricsServer:
        """A started VictoriaMetrics scraping ``scrape_configs`` (see ``scrape_job``)."""
        server = VictoriaMetricsServer(self._dir("victoria-metrics"), scrape_configs)
        self._services.append(server)
        server.start()
        return server

    def vmalert(
        self,
        datasource: VictoriaMetricsServer,
        rule_files: Sequence[Path],
        *,
        evaluation_interval: str = "1s",
        query_step: str = "5m",
        write_back: bool = True,
    ) -> tuple[VmAlert, AlertReceiver]:
        """A started vmalert on ``rule_files`` against ``datasource`` (see ``VmAlert``), and
        the receiver its alerts go to."""
        receiver = AlertReceiver()
        self._receivers.append(receiver)
        vmalert = VmAlert(
            self._dir("vmalert"),
            datasource,
            rule_files,
            receiver,
            evaluation_interval=evaluation_interval,
            query_step=query_step,
            write_back=write_back,
        )
        self._services.append(vmalert)
        vmalert.start()
        return vmalert, receiver

    def _dir(self, name: str) -> Path:
        return self.workdir / f"{name}-{len(self._services)}"

    def stop_all(self) -> None:
        """vmalert first (it writes to the servers), then the servers and receivers."""
        for service in reversed(self._services):
            service.stop()
        for receiver in self._receivers:
            receiver.stop()
