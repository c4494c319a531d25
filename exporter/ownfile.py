"""The state file on disk: what the exporter may open, lock, move aside and write there.

The rules that keep ``--state.file`` from destroying what is not its own: the
path's symlinks are resolved once and the target written (a symlinked persistent volume stays
linked); what is not a regular file (a directory, a FIFO, a device such as ``/dev/null``, a
socket) is refused from ``lstat`` alone, never opened (opening a FIFO blocks, opening some
devices has effects); a regular file is opened ``O_NONBLOCK`` and checked again on the
descriptor; a write is a temporary file beside the target renamed over it. An advisory lock
on a sibling file (``.NAME.lock``) keeps a second exporter from writing the same file, and
the holder of the lock removes the temporary files a crash left (``.NAME.XXXXXXXX.tmp``).
What the file holds (whose format, which version) is :mod:`exporter.poll.state`'s to judge.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator
from typing import NamedTuple

from exporter.errors import FileChangedError, NotAFileError

#: What each kind of file that is not a regular one is called in a message.
NOT_A_FILE = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link (put there after the start, or one that does not resolve)",
}
#: The characters of ``tempfile.mkstemp``'s random part, 8 of them: what a stale temporary
#: file of ours is named with, and nothing else is removed.
_TEMPORARY = r"[a-z0-9_]{8}"


class Identity(NamedTuple):
    """Which file is at a path and whether it changed: device, inode, size, change time."""

    device: int
    inode: int
    size: int
    modified_ns: int


def kind_of(mode: int) -> str | None:
    """What a file of ``mode`` is, when it is not a regular file (None when it is)."""
    return None if stat.S_ISREG(mode) else NOT_A_FILE.get(stat.S_IFMT(mode), "not a file")


def refusal(path: str) -> str | None:
    """What ``path`` is when it can never be the state file (a directory, FIFO, device,
    socket, looping symlink), found with ``stat`` alone; None for a regular file or nothing
    yet (and for a path ``stat`` cannot see: found out at start)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return NOT_A_FILE[stat.S_IFLNK] if error.errno == errno.ELOOP else None
    return kind_of(mode)


def resolve(path: str) -> str:
    """The file ``path`` names once its symlinks are followed (a dangling link: its target,
    which a write creates); the directory entry the exporter reads and renames over."""
    return os.path.realpath(path)


def stamp(target: str) -> Identity | None:
    """The identity of whatever is at ``target`` (``lstat``: any type), None when nothing:
    enough to tell whether it changed since it was last judged."""
    try:
        found = os.lstat(target)
    except FileNotFoundError:
        return None
    return Identity(found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)


def identity(target: str) -> Identity | None:
    """The file at ``target`` now, None when there is none; NotAFileError when it is not a
    regular file (``lstat``: a symlink put there since is not followed)."""
    try:
        found = os.lstat(target)
    except FileNotFoundError:
        return None
    kind = kind_of(found.st_mode)
    if kind is not None:
        raise NotAFileError(target, kind)
    return Identity(found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)


@contextlib.contextmanager
def opened(target: str) -> Iterator[tuple[int, Identity]]:
    """A read-only descriptor of the regular file ``target`` and its identity. The type is
    checked before the open (``lstat``: a FIFO or a device is never opened) and again on the
    descriptor, which is opened non-blocking and without following a symlink."""
    identity(target)  # NotAFileError before any open; FileNotFoundError when there is none
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        handle = os.open(target, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:  # a symlink put there since the check
            raise NotAFileError(target, "a symbolic link") from None
        raise
    try:
        found = os.fstat(handle)
        kind = kind_of(found.st_mode)
        if kind is not None:
            raise NotAFileError(target, kind)
        yield handle, Identity(found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
    finally:
        os.close(handle)


#: The most one ``pread`` asks for: Linux returns at most 0x7ffff000 bytes a call.
_CHUNK = 1 << 30


def read_at(handle: int, size: int, offset: int) -> bytes:
    """``size`` bytes of the open file from ``offset``; FileChangedError when it ends before
    (a short read means the file shrank since its size was taken, never that it is corrupt)."""
    data = os.pread(handle, size, offset)
    if len(data) < size:
        raise FileChangedError(f"it ended at byte {offset + len(data)}, not {offset + size}")
    return data


def read_whole(handle: int, found: Identity) -> bytearray:
    """The ``found.size`` bytes of the open file ``found`` describes, read into one buffer
    of exactly that size (a ``pread`` loop: never past it, nor short above 2 GiB). A copy,
    not a mapping: a mapped file truncated by another writer kills the process with SIGBUS.
    FileChangedError when the file ends early, is stale (NFS), or its size or change time moved
    while it was read."""
    buffer = bytearray(found.size)
    done = 0
    try:
        with memoryview(buffer) as view:
            while done < found.size:
                count = os.preadv(handle, [view[done : done + _CHUNK]], done)
                if count == 0:
                    raise FileChangedError(f"it ended at byte {done}, not {found.size}")
                done += count
        after = os.fstat(handle)
    except OSError as error:
        if error.errno == errno.ESTALE:  # replaced on the server (NFS)
            raise FileChangedError("it was replaced (stale file handle)") from None
        raise
    if after.st_size != found.size:
        raise FileChangedError(f"its size went from {found.size} to {after.st_size} bytes")
    if after.st_mtime_ns != found.modified_ns:
        raise FileChangedError("it was written to while it was read")
    return buffer


class Lock:
    """The advisory lock of the state file ``target``: a POSIX record lock (``lockf``) on
    ``.NAME.lock`` beside it, held from the first ``acquire`` that succeeds until the
    process ends. A sibling, because each write renames a new file over the state file (a
    lock on it would go with the old inode); a record lock, which the kernel drops when the
    process dies however it dies, and which works across containers sharing a volume and
    on NFS. The lock file is created empty and never written."""

    def __init__(self, target: str) -> None:
        directory, name = os.path.split(target)
        self.path = os.path.join(directory, f".{name}.lock")
        self._handle: int | None = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def acquire(self) -> bool:
        """Take the lock unless this process holds it; False when another process holds it.
        OSError when the lock file cannot be opened (a read-only directory, say)."""
        if self._handle is not None:
            return True
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        handle = os.open(self.path, flags, 0o600)
        try:
            kind = kind_of(os.fstat(handle).st_mode)
            if kind is not None:
                raise NotAFileError(self.path, kind)
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(handle)
            if error.errno in {errno.EACCES, errno.EAGAIN}:
                return False
            raise
        self._handle = handle
        return True


def stale_temporaries(target: str) -> list[str]:
    """The temporary files a write to ``target`` left behind when the process died between
    creating and renaming one (``.NAME.XXXXXXXX.tmp``, regular files only)."""
    directory, name = os.path.split(target)
    pattern = re.compile(rf"\.{re.escape(name)}\.{_TEMPORARY}\.tmp")
    found = []
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                found.append(entry.path)
    return sorted(found)


def remove_stale_temporaries(target: str) -> list[str]:
    """Remove :func:`stale_temporaries`; those removed (call holding the lock: another
    exporter's write in progress is never one)."""
    removed = []
    for path in stale_temporaries(target):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed.append(path)
    return removed


def move_aside(target: str, label: str) -> str:
    """Rename ``target`` to ``TARGET.LABEL-YYYYmmddTHHMMSSZ`` beside it (``-2``, ``-3``...
    when that name is taken: a file moved aside earlier is never replaced); the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = f"{target}.{label}-{stamp}"
    for attempt in range(1, 100):
        aside = base if attempt == 1 else f"{base}-{attempt}"
        try:
            os.link(target, aside)  # fails when ``aside`` exists: nothing is replaced
        except FileExistsError:
            continue
        except OSError:  # a file system without hard links
            if os.path.lexists(aside):
                continue
            os.rename(target, aside)
            return aside
        os.unlink(target)
        return aside
    raise FileExistsError(errno.EEXIST, f"no free name beside {target} to move it to")


def write_atomically(target: str, data: bytes) -> Identity:
    """``data`` at ``target`` whole or not at all: a temporary file in the same directory
    (mode 0600), flushed to disk, renamed over the old one, and the directory entry flushed
    too; the identity of the file written."""
    directory, name = os.path.split(target)
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
            found = os.fstat(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # some file systems cannot sync a directory
        directory_handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_handle)
        finally:
            os.close(directory_handle)
    return Identity(found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
