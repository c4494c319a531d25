"""Ports on 127.0.0.1: one that is free, one that refuses connections."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (for a program that must be told its
    port; one that can bind port 0 and report it is better)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port_url() -> str:
    """A URL on a port nothing listens on: connections are refused."""
    return f"http://127.0.0.1:{free_port()}/"


def port_is_closed(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing accepts connections on ``host:port``."""
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) != 0
