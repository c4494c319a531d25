"""exporter.config.follow: a change of content is seen however the file is replaced (in place,
renamed over, a ``..data`` symlink swap as the kubelet does), a file gone or back is a change,
the same content is not, and what a reload read is not reloaded again. Also what
``Config.watched_paths`` and ``WebConfig.watched_paths`` list, and the interval flag."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from exporter.config.exporter import parse_config
from exporter.config.follow import Follower, digest
from exporter.config.web import load_web_config
from exporter.flags import duration_or_off
from tests.support.certs import Pki


def test_a_change_is_seen_however_the_file_is_replaced(tmp_path: Path) -> None:
    watched = tmp_path / "config.yml"
    watched.write_text("a")
    follower = Follower(lambda: [str(watched)])
    assert follower.changed() == []

    watched.write_text("b")  # in place
    assert follower.changed() == [str(watched)]
    follower.after_reading(follower.before_reading())
    assert follower.changed() == []

    staged = tmp_path / "staged"
    staged.write_text("c")
    os.replace(staged, watched)  # renamed over
    assert follower.changed() == [str(watched)]
    follower.after_reading(follower.before_reading())

    watched.unlink()  # gone
    assert follower.changed() == [str(watched)]
    follower.after_reading(follower.before_reading())
    watched.write_text("c")  # back, even with the content it had
    assert follower.changed() == [str(watched)]


def test_the_same_content_written_again_is_no_change(tmp_path: Path) -> None:
    watched = tmp_path / "config.yml"
    watched.write_text("same")
    follower = Follower(lambda: [str(watched)])
    watched.write_text("same")
    staged = tmp_path / "staged"
    staged.write_text("same")
    os.replace(staged, watched)
    assert follower.changed() == []


def test_a_kubelet_symlink_swap_is_seen(tmp_path: Path) -> None:
    for generation, text in (("..2026_01", "first"), ("..2026_02", "second")):
        (tmp_path / generation).mkdir()
        (tmp_path / generation / "config.yml").write_text(text)
    (tmp_path / "..data").symlink_to("..2026_01")
    (tmp_path / "config.yml").symlink_to("..data/config.yml")
    path = str(tmp_path / "config.yml")
    follower = Follower(lambda: [path])
    (tmp_path / "..data_tmp").symlink_to("..2026_02")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")  # what the kubelet does
    assert follower.changed() == [path]


def test_a_change_while_a_reload_reads_is_seen_next_time(tmp_path: Path) -> None:
    watched = tmp_path / "config.yml"
    watched.write_text("a")
    follower = Follower(lambda: [str(watched)])
    watched.write_text("b")
    seen = follower.before_reading()
    watched.write_text("c")  # after the digest, while the reload reads the files
    follower.after_reading(seen)
    assert follower.changed() == [str(watched)]


def test_files_newly_named_are_followed_from_the_reload_on(tmp_path: Path) -> None:
    config, secret = tmp_path / "config.yml", tmp_path / "token"
    config.write_text("a")
    secret.write_text("s1")
    named = [str(config)]
    follower = Follower(lambda: list(named))
    config.write_text("b")
    seen = follower.before_reading()
    named.append(str(secret))  # the reloaded config names a credential file
    follower.after_reading(seen)
    assert follower.changed() == []
    secret.write_text("s2")
    assert follower.changed() == [str(secret)]


def test_an_unreadable_file_has_a_digest_of_its_own(tmp_path: Path) -> None:
    assert digest(str(tmp_path / "missing")) != digest(str(tmp_path))
    (tmp_path / "empty").write_text("")
    assert digest(str(tmp_path / "missing")) != digest(str(tmp_path / "empty"))


def test_the_config_lists_every_file_it_read(tmp_path: Path) -> None:
    for name in ("pw", "token", "ca.pem", "c.pem", "k.pem", "mod-pw"):
        (tmp_path / name).write_text("x")
    text = f"""
nodes:
  - name: a
    url: https://a.example:8443
    basic_auth: {{username: u, password_file: pw}}
    tls_config: {{ca_file: ca.pem, cert_file: c.pem, key_file: k.pem}}
  - name: b
    url: http://b.example
    authorization: {{credentials_file: {tmp_path / "token"}}}
probe:
  allowed_targets: ['http://.*']
  modules:
    guarded: {{basic_auth: {{username: u, password_file: mod-pw}}}}
"""
    config = parse_config(text, str(tmp_path / "config.yml"))
    assert config.watched_paths() == tuple(
        str(tmp_path / name) for name in ("pw", "ca.pem", "c.pem", "k.pem", "token", "mod-pw")
    )


def test_the_web_config_lists_its_certificate_key_and_client_ca(tmp_path: Path, pki: Pki) -> None:
    web = tmp_path / "web.yml"
    web.write_text(
        "tls_server_config:\n"
        f"  cert_file: {pki.server.cert}\n"
        f"  key_file: {pki.server.key}\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
        f"  client_ca_file: {pki.ca}\n"
    )
    loaded = load_web_config(str(web))
    assert loaded.watched_paths() == (pki.server.cert, pki.server.key, pki.ca)
    web.write_text("basic_auth_users: {}\n")
    assert load_web_config(str(web)).watched_paths() == ()


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0.0), ("0s", 0.0), ("30s", 30.0), ("500ms", 0.5)]
)
def test_the_interval_flag_takes_a_duration_or_zero(text: str, seconds: float) -> None:
    assert duration_or_off(text) == seconds


@pytest.mark.parametrize("text", ["30", "-1s", "25h", "soon"])
def test_the_interval_flag_refuses_others(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration_or_off(text)
