"""Files that are not regular files, made in a test's temporary directory (never the host's).

A FIFO, a socket and a directory can be made by anyone; a character device only by root
(``mknod``): made as ``/dev/null``'s device numbers (1, 3), so writing or reading it would
be harmless even if the code under test did. Without root that case is skipped, saying why
(a failure under CI, which runs as root).
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from tests.support.external import require_root

# What each kind is called in cmpfleet's one-line refusals (``hwcheck.atomic.kind_of``).
KINDS = {
    "fifo": "a FIFO (named pipe)",
    "socket": "a socket",
    "directory": "a directory",
    "char-device": "a character device",
}
NULL_DEVICE = (1, 3)


def make_node(kind: str, path: Path) -> Path:
    """Create a ``kind`` (a key of ``KINDS``) at ``path``; skips a device without root."""
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(str(path))  # the socket file stays after the socket closes
    elif kind == "directory":
        path.mkdir()
    elif kind == "char-device":
        require_root("makes a character device node (mknod) in a temporary directory")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(*NULL_DEVICE))
    else:
        raise ValueError(f"unknown node kind {kind!r}")
    return path


def snapshot(path: Path) -> tuple[int, int, int]:
    """``(mode, inode, rdev)`` of the node itself: unchanged means left as it was."""
    info = os.lstat(path)
    return info.st_mode, info.st_ino, info.st_rdev
