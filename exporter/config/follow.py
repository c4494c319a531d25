"""Following the files a running config depends on (``--config.auto-reload-interval``).

Every interval the exporter asks the running configuration which files it depends on (the
config file, the web config file, and every file either names: :meth:`Config.watched_paths`,
:meth:`WebConfig.watched_paths`), reads each one whole and compares a digest of its content
with the one taken before the last reload. A file is compared by what it holds, never by its
inode, size or change time, so every way it can be replaced is seen alike: written in place,
renamed over, or a Kubernetes ConfigMap or Secret volume's ``..data`` symlink swapped to a new
directory by the kubelet (opening the path follows the links to the content of the moment).
A file that cannot be read counts as a content of its own (``missing: <reason>``), so a file
that goes away or comes back is a change too. What to do on a change (validate and apply, or
keep the running config) is the caller's: this module only says that something changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping

#: Read a file in pieces of this size while hashing it: a big node list costs no big buffer.
_CHUNK_BYTES = 1 << 16

#: A digest per watched path, as :func:`fingerprint` takes them.
Fingerprint = Mapping[str, bytes]


def digest(path: str) -> bytes:
    """A digest of what ``path`` holds now (symlinks followed), or of why it cannot be read."""
    hashed = hashlib.blake2b(digest_size=16)
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK_BYTES):
                hashed.update(chunk)
    except OSError as error:
        return f"unreadable: {error.strerror or error}".encode()
    return hashed.digest()


def fingerprint(paths: Iterable[str]) -> dict[str, bytes]:
    """The digest of each of ``paths`` (each read once, however often it is named)."""
    return {path: digest(path) for path in dict.fromkeys(paths)}


class Follower:
    """Says when any file of the running config changed since the last reload.

    ``paths`` lists the files the running config depends on; it is asked again each time,
    so a reload that names other files (or a glob that matches more) is followed from then
    on. A reload (whoever asked for it) calls :meth:`before_reading` before it reads the
    files and :meth:`after_reading` once done, so a change seen then is not reloaded twice,
    and a change made while the files were read is seen at the next :meth:`changed`."""

    def __init__(self, paths: Callable[[], Iterable[str]]) -> None:
        self._paths = paths
        self._known: dict[str, bytes] = fingerprint(paths())

    def changed(self) -> list[str]:
        """The watched files whose content differs from the last reload's (a file newly
        watched, or no longer, counts too), sorted; empty when none did."""
        now = fingerprint(self._paths())
        return sorted(
            path
            for path in now.keys() | self._known.keys()
            if now.get(path) != self._known.get(path)
        )

    def before_reading(self) -> dict[str, bytes]:
        """What the watched files hold now, just before a reload reads them."""
        return fingerprint(self._paths())

    def differs(self, seen: Fingerprint) -> set[str]:
        """The files of ``seen`` (from :meth:`before_reading`) whose content differs from
        the last reload's."""
        return {path for path, value in seen.items() if self._known.get(path) != value}

    def after_reading(self, seen: Fingerprint) -> None:
        """Remember ``seen`` (from :meth:`before_reading`) as the last reload's files; a
        file the reloaded config names for the first time is taken as read now."""
        known = dict(seen)
        paths = dict.fromkeys(self._paths())
        for path in paths:
            if path not in known:
                known[path] = digest(path)
        self._known = {path: known[path] for path in paths}
