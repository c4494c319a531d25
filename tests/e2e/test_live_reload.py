"""``--config.auto-reload-interval`` in the real process: every change of the config file (written
in place, renamed over, a kubelet-style ``..data`` symlink swap), of a credential file it
names, and of the web config's certificate and key is applied with no signal and no
``/-/reload``; a bad file keeps the running config and sets
``ledger_exporter_config_last_reload_successful`` to 0; a stalled chain's clock is the same
across all of them, and a node taken out and put back is remembered.

A simulated network (in this process) with stalled nodes, polled every second, the files
compared every half second. Each step waits for the state it must lead to (no wall time)."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ledger_simulator import SimulatedNetwork
from tests.support.certs import FOR_LOOPBACK, KeyPair, Pki
from tests.support.documents import health_doc
from tests.support.fakenode import FakeNode
from tests.support.http import fetch
from tests.support.processes import ExporterProcess
from tests.support.simulator import simulate
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

FOLLOW = "--config.auto-reload-interval=0.5s"
CHANGED = "ledger_blockchain_height_last_change_timestamp_seconds"
SESSION_AGE = "ledger_blockchain_vote_session_age_seconds"
RELOAD_OK = "ledger_exporter_config_last_reload_successful"
EXPIRY = "ledger_exporter_tls_cert_expiry_timestamp_seconds"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(base: str, context: ssl.SSLContext | None = None) -> Samples:
    """Every sample ``base``/metrics serves, by name and labels."""
    text = fetch(f"{base}/metrics", context=context).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def clocks(found: Samples) -> dict[str, float]:
    """Each node's height-change time of its (one) chain."""
    return {dict(labels)["node"]: v for (name, labels), v in found.items() if name == CHANGED}


def ages(found: Samples) -> dict[str, float]:
    """Each node's oldest open vote session's age."""
    return {dict(labels)["node"]: v for (name, labels), v in found.items() if name == SESSION_AGE}


def served(exporter: ExporterProcess, what: str, check: Callable[[Samples], Any]) -> Samples:
    """The samples once ``check`` holds for them (no signal, no /-/reload sent meanwhile)."""
    seen: dict[str, Samples] = {}

    def holds() -> Samples | None:
        seen["last"] = samples(exporter.base)
        return seen["last"] if check(seen["last"]) else None

    found: Samples = wait_until(
        holds, timeout=30, message=lambda: f"{what}: {seen.get('last')}\n{exporter.log()}"
    )
    return found


def node_entries(net: SimulatedNetwork, names: list[str], rev: str) -> list[dict[str, Any]]:
    return [
        {"name": name, "url": url, "labels": {"rev": rev}}
        for name, url in net.node_urls.items()
        if name in names
    ]


def replace(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path`` by a rename, so no read sees the file half written."""
    staged = path.with_name(path.name + ".staged")
    staged.write_bytes(data)
    os.replace(staged, path)


def failures_since(exporter: ExporterProcess, start: int) -> list[str]:
    """The log's lines of failed reloads after its first ``start`` characters, once there is
    one (the gauge is set just before the line is written)."""

    def lines() -> list[str]:
        text = exporter.log()[start:]
        return [line for line in text.splitlines() if "config reload failed" in line]

    found: list[str] = wait_until(lines, timeout=30, message=exporter.log)
    return found


def config_text(nodes: list[dict[str, Any]]) -> str:
    return yaml.safe_dump({"scrape_interval": "1s", "scrape_timeout": "1s", "nodes": nodes})


def test_config_and_credential_files_followed_without_a_signal(
    tmp_path: Path, fake_node: FakeNode
) -> None:
    fake_node.set("/health", health_doc([]))
    token = tmp_path / "token"
    token.write_text("first\n")
    guarded = {
        "name": "guarded",
        "url": fake_node.url,
        "authorization": {"credentials_file": str(token)},
    }
    config = tmp_path / "exporter.yml"
    with SimulatedNetwork(nodes=3, chains=1, block_interval=0.5, seed=13, port=0) as net:
        net.set_fault("node-2", "stall")
        names = ["node-1", "node-2", "node-3"]

        def write(rev: str) -> str:
            return config_text([*node_entries(net, names, rev), guarded])

        config.write_text(write("0"))
        exporter = ExporterProcess(config, FOLLOW)
        try:
            first = served(exporter, "node-2's clock", lambda s: "node-2" in clocks(s))
            stalled = clocks(first)["node-2"]

            config.write_text(write("1"))  # in place: same inode, truncated and written
            found = served(
                exporter,
                "in place",
                lambda s: value(s, "ledger_node_up", node="node-1", rev="1") is not None,
            )
            assert clocks(found)["node-2"] == stalled

            renamed = tmp_path / "exporter.yml.new"
            renamed.write_text(write("2"))
            os.replace(renamed, config)  # renamed over: a new inode at the path
            found = served(
                exporter,
                "renamed over",
                lambda s: value(s, "ledger_node_up", node="node-1", rev="2") is not None,
            )
            assert clocks(found)["node-2"] == stalled

            token.write_text("second\n")  # a credential file the config names
            wait_until(
                lambda: any(
                    r.headers.get("Authorization") == "Bearer second" for r in fake_node.requests
                ),
                timeout=30,
                message=exporter.log,
            )

            start = len(exporter.log())
            bad = write("3").replace("scrape_interval: 1s", "scrape_interval: fast")
            replace(config, bad.encode())  # whole: an in-place write may be read half done
            found = served(exporter, "a bad file refused", lambda s: value(s, RELOAD_OK) == 0)
            assert value(found, "ledger_node_up", node="node-1", rev="2") is not None  # kept
            assert clocks(found)["node-2"] == stalled
            failed = failures_since(exporter, start)
            assert len(failed) == 1, exporter.log()  # and not tried again while unchanged
            # the file and the line (logfmt may shorten a long path in the middle)
            assert "exporter.yml" in failed[0]
            assert re.search(r"line \d+: scrape_interval: must be a duration", failed[0])

            config.write_text(write("4"))
            found = served(
                exporter,
                "fixed",
                lambda s: (
                    value(s, RELOAD_OK) == 1
                    and value(s, "ledger_node_up", node="node-1", rev="4") is not None
                ),
            )
            assert clocks(found)["node-2"] == stalled
            assert "config files changed on disk" in exporter.log()
        finally:
            code, log = exporter.stop()
        assert code == 0, log


def kubelet_write(directory: Path, text: str, generation: int) -> None:
    """Publish ``text`` as config.yml the way the kubelet updates a ConfigMap volume: a new
    timestamped directory, ``..data`` swapped to it by a rename, the old one removed."""
    fresh = directory / f"..2026_12_07_{generation:02d}"
    fresh.mkdir()
    (fresh / "config.yml").write_text(text)
    old = os.readlink(directory / "..data") if (directory / "..data").is_symlink() else None
    (directory / "..data_tmp").symlink_to(fresh.name)
    os.replace(directory / "..data_tmp", directory / "..data")
    if not (directory / "config.yml").is_symlink():
        (directory / "config.yml").symlink_to("..data/config.yml")
    if old is not None:
        (directory / old / "config.yml").unlink()
        (directory / old).rmdir()


def test_a_configmap_swap_is_followed_and_a_node_put_back_is_remembered(tmp_path: Path) -> None:
    mounted = tmp_path / "config"
    mounted.mkdir()
    with SimulatedNetwork(nodes=3, chains=1, block_interval=0.5, seed=17, port=0) as net:
        net.set_fault("node-2", "stall")
        net.set_fault("node-3", "stall")
        net.set_fault("*", "session_stuck", True, net.chain_ids[0])  # one session stays open
        every = ["node-1", "node-2", "node-3"]
        kubelet_write(mounted, config_text(node_entries(net, every, "0")), 1)
        exporter = ExporterProcess(mounted / "config.yml", FOLLOW)
        try:
            # a session open long enough that an age counted afresh would be seen as younger
            first = served(
                exporter,
                "stalled clocks, a session 5s old",
                lambda s: (
                    {"node-2", "node-3"} <= set(clocks(s)) and min(ages(s).values(), default=0) >= 5
                ),
            )
            before, aged = clocks(first), ages(first)

            kubelet_write(mounted, config_text(node_entries(net, ["node-1", "node-3"], "0")), 2)
            found = served(exporter, "node-2 taken out", lambda s: "node-2" not in clocks(s))
            assert clocks(found)["node-3"] == before["node-3"]  # stayed configured
            assert ages(found)["node-3"] >= aged["node-3"]

            kubelet_write(mounted, config_text(node_entries(net, every, "0")), 3)
            found = served(exporter, "node-2 put back", lambda s: "node-2" in clocks(s))
            assert clocks(found)["node-2"] == before["node-2"]  # remembered
            assert clocks(found)["node-3"] == before["node-3"]
            assert ages(found)["node-2"] >= aged["node-2"]  # its session's first sighting too
            assert ages(found)["node-3"] >= aged["node-3"]
            assert value(found, RELOAD_OK) == 1
        finally:
            code, log = exporter.stop()
        assert code == 0, log


def served_certificate(port: int, ca: str) -> bytes:
    """The certificate a new TLS handshake with the exporter gets (DER)."""
    context = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def fingerprint_of(pair: KeyPair) -> bytes:
    return ssl.PEM_cert_to_DER_cert(Path(pair.cert).read_text())


def not_after(pair: KeyPair) -> float:
    decoded = ssl._ssl._test_decode_cert(pair.cert)  # type: ignore[attr-defined]
    return float(ssl.cert_time_to_seconds(decoded["notAfter"]))


def test_a_rotated_certificate_is_served_and_a_bad_pair_keeps_the_old(
    tmp_path: Path, pki: Pki
) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    renewed = pki.issue("renewed", FOR_LOOPBACK)
    other = pki.issue("other", FOR_LOOPBACK)
    cert.write_bytes(Path(pki.server.cert).read_bytes())
    key.write_bytes(Path(pki.server.key).read_bytes())
    web = tmp_path / "web.yml"
    web.write_text(
        yaml.safe_dump({"tls_server_config": {"cert_file": str(cert), "key_file": str(key)}})
    )
    config = tmp_path / "exporter.yml"
    config.write_text(yaml.safe_dump({"probe": {"allowed_targets": [r"http://127\.0\.0\.1:1/"]}}))
    context = ssl.create_default_context(cafile=pki.ca)
    exporter = ExporterProcess(config, FOLLOW, f"--web.config.file={web}", start_timeout=30)
    base = f"https://127.0.0.1:{exporter.port}"

    def state(found_cert: KeyPair, ok: float) -> Callable[[], bool]:
        def holds() -> bool:
            found = samples(base, context)
            served_now = served_certificate(exporter.port, pki.ca)
            return (
                hashlib.sha256(served_now).digest()
                == hashlib.sha256(fingerprint_of(found_cert)).digest()
                and value(found, RELOAD_OK) == ok
                and value(found, EXPIRY) == not_after(found_cert)
            )

        return holds

    try:
        wait_until(state(pki.server, 1), timeout=30, ignoring=(OSError,), message=exporter.log)

        # renewed as cert-manager's Secret volume does it: both files replaced at once
        staged_cert, staged_key = tmp_path / "tls.crt.new", tmp_path / "tls.key.new"
        staged_cert.write_bytes(Path(renewed.cert).read_bytes())
        staged_key.write_bytes(Path(renewed.key).read_bytes())
        os.replace(staged_key, key)
        os.replace(staged_cert, cert)
        wait_until(state(renewed, 1), timeout=30, ignoring=(OSError,), message=exporter.log)

        start = len(exporter.log())
        replace(cert, Path(other.cert).read_bytes())  # the key is still the renewed one's
        wait_until(state(renewed, 0), timeout=30, ignoring=(OSError,), message=exporter.log)
        failed = failures_since(exporter, start)
        assert len(failed) == 1, exporter.log()
        assert "web.yml" in failed[0] and "line 2: tls_server_config" in failed[0]

        key.write_bytes(Path(other.key).read_bytes())  # the pair matches again
        wait_until(state(other, 1), timeout=30, ignoring=(OSError,), message=exporter.log)
    finally:
        code, log = exporter.stop()
    assert code == 0, log


def test_a_nodes_ca_file_rewritten_in_place_is_used(tmp_path: Path, pki: Pki) -> None:
    """A node's ``tls_config.ca_file`` first holds a CA that did not sign the node's
    certificate (the node reads as down), then the right one, written in place under the same
    name: the node is up again with no signal (the connections and libcurl's cached CA store
    made with the old file are dropped)."""
    flags = ("--tls", "--tls.dir", str(tmp_path / "sim-tls"), "--tls.days", "30", "--nodes", "1")
    with simulate(*flags) as (_, secure):
        ca_file = tmp_path / "node-ca.pem"
        ca_file.write_bytes(Path(pki.ca).read_bytes())  # not the simulator's CA
        node = {"name": "secure", "url": secure["node-1"], "tls_config": {"ca_file": str(ca_file)}}
        config = tmp_path / "config.yml"
        config.write_text(config_text([node]))
        exporter = ExporterProcess(config, FOLLOW)
        try:
            served(exporter, "refused", lambda s: value(s, "ledger_node_up", node="secure") == 0)
            ca_file.write_bytes(Path(secure["ca"]).read_bytes())
            served(exporter, "trusted", lambda s: value(s, "ledger_node_up", node="secure") == 1)
        finally:
            code, log = exporter.stop()
        assert code == 0, log
