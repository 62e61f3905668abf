"""Opening a file a person named (a config, a recipe, a saved kernel log) without hanging.

A FIFO named as ``--config`` blocked fleetd in ``open`` forever, ``/dev/zero`` was read
without end (ignoring Ctrl-C) and ``xid scan FIFO`` never returned. Only a regular file
is read here: the path is ``stat``ed first (which never blocks, and never opens a device:
opening some has effects, a watchdog device arms itself), then opened non-blocking and
checked again on the descriptor (the path may have changed in between). A symbolic link
is followed (a config under config management usually is one); a loop of them is one
line. What is read whole is bounded (``max_bytes``): a config is a few KiB, not GiB.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from hwcheck.atomic import NotARegularFile, kind_of

# A config or recipe is a few KiB; this is far above any real one.
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def _check(path: Path | str, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile(path, kind_of(info.st_mode), "not a regular file: not read")


def open_regular_fd(path: Path | str) -> int:
    """A read-only descriptor of ``path`` when it is a regular file (else ``NotARegularFile``).

    A loop of symbolic links is ``NotARegularFile`` too; a missing file or a permission
    problem is the usual ``OSError``. The caller closes the descriptor.
    """
    try:
        _check(path, os.stat(path))
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotARegularFile(path, "a loop of symbolic links", "not read") from None
        raise
    try:
        _check(path, os.fstat(fd))
        os.set_blocking(fd, True)  # a regular file never blocks; plain reads from here
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: Path | str) -> BinaryIO:
    """``path`` opened for reading when it is a regular file (see ``open_regular_fd``)."""
    return os.fdopen(open_regular_fd(path), "rb")


def read_regular(path: Path | str, max_bytes: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` (else ``FileTooLarge``)."""
    with open_regular(path) as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLarge(path, max_bytes)
    return data


class FileTooLarge(OSError):
    """A file read whole is larger than anything of its kind could be."""

    def __init__(self, path: Path | str, max_bytes: int) -> None:
        super().__init__(
            errno.EFBIG,
            f"larger than {max_bytes // 1024:,} KiB: not read (is it the right file?)",
            str(path),
        )

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"
