"""Deterministic building blocks: seeded hashing, identifier formats, Go durations, timestamps.

Every simulated value is a pure function of the seed and a few keys, so a network of thousands
of nodes needs no stored state and two runs with the same seed serve the same answers.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from exporter.errors import DurationError
from exporter.values import parse_go_duration as parse_go_duration_signed

__all__ = ["DurationError", "parse_go_duration"]  # DurationError: re-exported for callers

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def digest(*parts: object) -> bytes:
    """32 pseudo-random bytes determined only by ``parts`` (which start with the seed)."""
    text = "\x1f".join(str(p) for p in parts)
    return hashlib.blake2b(text.encode(), digest_size=32).digest()


def unit(*parts: object) -> float:
    """A number in [0, 1) determined by ``parts``."""
    return int.from_bytes(digest(*parts)[:7], "big") / float(1 << 56)


def pick(n: int, *parts: object) -> int:
    """An integer in [0, n) determined by ``parts``."""
    return int.from_bytes(digest(*parts)[:8], "big") % n


def hex_id(chars: int, *parts: object) -> str:
    """A lower-case hex string of ``chars`` characters (at most 128) determined by ``parts``."""
    raw = digest(*parts) + digest("more", *parts)
    return raw.hex()[:chars]


def public_key(*parts: object) -> str:
    """A compressed secp256k1-looking public key: 02/03 followed by 64 hex characters."""
    prefix = "02" if pick(2, "parity", *parts) == 0 else "03"
    return prefix + hex_id(64, "key", *parts)


def peer_id(*parts: object) -> str:
    """A libp2p-style peer identifier (``12D3KooW`` followed by base58 characters)."""
    number = int.from_bytes(digest("peer", *parts), "big")
    chars: list[str] = []
    while number and len(chars) < 44:
        number, rest = divmod(number, 58)
        chars.append(_B58[rest])
    return "12D3KooW" + "".join(chars)[:44]


def go_duration(seconds: float) -> str:
    """Format seconds as Go's ``time.Duration.String`` does (``30s``, ``1m30s``, ``2h0m0s``)."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        for unit_name, scale in (("ms", 1e3), ("µs", 1e6), ("ns", 1e9)):
            if seconds * scale >= 1 or unit_name == "ns":
                return f"{seconds * scale:.6f}".rstrip("0").rstrip(".") + unit_name
    whole = int(seconds)
    fraction = round(seconds - whole, 6)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs + fraction:.6f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{sec_text}s"
    if minutes:
        return f"{minutes}m{sec_text}s"
    return f"{sec_text}s"


def parse_go_duration(text: str) -> float:
    """A Go duration in seconds, by the exporter's one parser, refusing negative ones:
    nothing simulated (a delay, an interval, a timeout) can last less than nothing."""
    seconds = parse_go_duration_signed(text)
    if seconds < 0:
        raise DurationError(f"invalid duration {text!r}: must not be negative; use Go syntax")
    return seconds + 0.0  # "-0s" becomes 0


def iso_utc(timestamp: float) -> str:
    """ISO 8601 UTC with millisecond precision and a ``Z`` suffix."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def triangle(position: float) -> float:
    """0 -> 1 -> 0 as ``position`` goes 0 -> 0.5 -> 1: a queue that rises then drains."""
    return 1.0 - abs(2.0 * position - 1.0)
