"""A real DNS server on loopback for the ``dns_sd_configs`` tests: Debian's dnsmasq.

``DnsServer(tmp_path)`` serves, on 127.0.0.1 and a port of its own, the A records of a hosts
file (``hosts({"name": ["127.0.0.1"]})``, re-read on SIGHUP as dnsmasq does) and the SRV
records given with ``start(srv=...)`` (dnsmasq reads ``--srv-host`` only at start, so a new
set restarts it). Every name under ``DOMAIN`` that it does not know gets NXDOMAIN; it asks no
other server. ``stop()`` leaves the port closed, so lookups fail.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from tests.support.ports import free_port
from tests.support.programs import require_program
from tests.support.waiting import wait_until

DOMAIN = "ledger.test"


class DnsServer:
    """dnsmasq on 127.0.0.1:``port``, with no upstream and no system files."""

    def __init__(self, directory: Path) -> None:
        self.binary = require_program("dnsmasq")
        self.directory = directory
        self.hosts_file = directory / "dns-hosts"
        self.hosts_file.write_text("", encoding="utf-8")
        self.log_file = directory / "dnsmasq.log"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as ``nameservers`` takes it."""
        return f"127.0.0.1:{self.port}"

    def hosts(self, records: dict[str, list[str]]) -> None:
        """Write the A records (name -> addresses) and have a running server re-read them."""
        lines = [
            f"{address} {name}" for name, addresses in records.items() for address in addresses
        ]
        self.hosts_file.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        if self.process is not None:
            self.process.send_signal(signal.SIGHUP)

    def start(self, srv: dict[str, list[tuple[str, int]]] | None = None) -> None:
        """(Re)start with these SRV records: name -> (target host, port) each."""
        self.stop()
        command = [
            self.binary,
            "--keep-in-foreground",
            "--conf-file=/dev/null",
            "--no-resolv",
            "--no-hosts",
            "--no-poll",
            "--user=root",  # the files are in the test's own folder, private to this user
            "--pid-file=",
            f"--local=/{DOMAIN}/",  # names it does not know: NXDOMAIN, asked nowhere else
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
            f"--port={self.port}",
            f"--addn-hosts={self.hosts_file}",
            f"--log-facility={self.log_file}",
            "--log-queries",
        ]
        for name, targets in (srv or {}).items():
            command += [f"--srv-host={name},{host},{port}" for host, port in targets]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(
            lambda: self.log_file.exists() and "started" in self.log_file.read_text(),
            timeout=30,
            message=lambda: f"dnsmasq did not start: {self.log()}",
        )

    def log(self) -> str:
        """What dnsmasq logged (its queries too), for failure messages."""
        text = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        if self.process is not None and self.process.poll() is not None and self.process.stderr:
            text += self.process.stderr.read().decode(errors="replace")
        return text

    def stop(self) -> None:
        """Stop the server: its port is closed, lookups fail until ``start()``."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()
        self.process = None
