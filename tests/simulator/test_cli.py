"""The ``simulate`` command as a real process: prints its URLs, serves them, applies --fault
options and exits cleanly on SIGTERM and SIGINT."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from ledger_simulator import SimulatedNetwork
from ledger_simulator.cli import main, print_summary
from tests.support.http import get_json
from tests.support.simulator import simulate


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """main() configures the ``ledger_exporter`` logger; undo that for the tests that follow."""
    logger = logging.getLogger("ledger_exporter")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.mark.integration
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serves_printed_urls_and_stops_on_signal(signum: signal.Signals) -> None:
    args = ("--nodes", "2", "--chains", "3", "--block-interval", "1s", "--seed", "4")
    with simulate(*args, "--fault", "node-2:syncing") as (process, urls):
        assert set(urls) == {"admin", "node-1", "node-2"}
        health = get_json(urls["node-1"] + "health")
        assert len(health["blockchains"]) == 3
        chain = health["blockchains"][0]
        assert get_json(urls["node-2"] + "blockchains/" + chain)["syncing"] is True
        assert get_json(urls["node-1"] + "blockchains/" + chain)["syncing"] is False
        nodes = get_json(urls["admin"] + "nodes")["nodes"]
        assert {name: n["url"] for name, n in nodes.items()} == {
            "node-1": urls["node-1"],
            "node-2": urls["node-2"],
        }
        process.send_signal(signum)
        assert process.wait(timeout=20) == 0


@pytest.mark.integration
def test_ports_layout_with_slow_fault() -> None:
    args = ("--nodes", "2", "--layout", "ports", "--fault", "node-1:slow=200ms")
    with simulate(*args, "--log.level", "debug") as (process, urls):
        assert urls["node-2"].endswith("/")
        assert "/nodes/" not in urls["node-2"]
        get_json(urls["node-2"] + "health")
        faults = get_json(urls["admin"] + "faults")["faults"]
        assert [(f["node"], f["fault"], f["delay_seconds"]) for f in faults] == [
            ("node-1", "slow", 0.2)
        ]
        process.terminate()
        assert process.wait(timeout=20) == 0
        assert process.stderr is not None
        assert "msg=answered method=GET" in process.stderr.read()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "0"], "whole number"),
        (["--nodes", "\u0663"], "whole number"),
        (["--block-interval", "2"], "Go syntax"),
        (["--listen-address", "localhost"], "host:port"),
        (["--layout", "grid"], "invalid choice"),
        (["--fault", "node-1:melt"], "unknown fault"),
        (["--fault", "node-9:stall"], "unknown node"),
        (["--fault", "stall"], "NODE:FAULT"),
        (["--tls.dir", "/nonexistent"], "add --tls"),  # never silently plain http
        (["--tls.days", "3"], "add --tls"),
        (["--tls.days", "90"], "add --tls"),  # the default's value too: it was given
    ],
)
def test_bad_options_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["--listen-address", "127.0.0.1:0", *args]) == 2
    assert message in capsys.readouterr().err


def test_port_in_use_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with SimulatedNetwork(nodes=1, chains=1) as busy:
        port = busy.admin_url.split(":")[2].split("/")[0]
        assert main(["--listen-address", f"127.0.0.1:{port}"]) == 1
    assert "choose another --listen-address" in capsys.readouterr().err


def test_main_in_a_thread_stops_on_event(capsys: pytest.CaptureFixture[str]) -> None:
    stop = threading.Event()
    codes: list[int] = []
    runner = threading.Thread(
        target=lambda: codes.append(main(["--listen-address", "127.0.0.1:0"], stop))
    )
    runner.start()
    stop.set()
    runner.join(timeout=20)
    assert codes == [0]
    assert "admin: http://127.0.0.1:" in capsys.readouterr().out


def test_summary_for_many_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    net = SimulatedNetwork(nodes=500, chains=2, port=7740)  # not started: URLs are known
    print_summary(net, 2.0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "admin: http://127.0.0.1:7740/-/sim/"
    assert "node-500: http://127.0.0.1:7740/nodes/node-500/" in lines
    assert any("496 more" in line for line in lines)
    assert len(lines) < 15


#: Loads the simulator as each of its two command lines does, then prints which of the
#: exporter's heavy modules came with it.
_LOADED = """
import sys
import ledger_simulator.cli
from exporter.cli import main
from tests.support.http import get_json
try:
    main(["simulate", "--help"])  # as `ledger-exporter simulate`: the exporter's command line
except SystemExit:
    pass
heavy = ("pycurl", "prometheus_client", "exporter.app", "exporter.poll", "exporter.expose")
print(sorted(name for name in heavy if name in sys.modules))
"""


def test_the_simulator_loads_only_the_exporters_light_modules() -> None:
    """`simulate` (python -m ledger_simulator, or ledger-exporter simulate) imports the
    exporter's HTTP server, logs and values, never its polling (pycurl) nor its exposition."""
    loaded = subprocess.run(
        [sys.executable, "-c", _LOADED], capture_output=True, text=True, check=False
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.splitlines()[-1] == "[]", loaded.stdout
