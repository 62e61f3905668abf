"""Woken when a file changes: Linux inotify on the file's folder, else nothing to wait on.

``FileSource`` follows a kernel log kept in a file (the simulated rig's, or a real rig's
``kern.log`` under ``kernel_log = "file"``). Polling its size 20 times a second cost an idle
fleetd a quarter of its CPU, and polling less often delays an Xid by as much: the real
``/dev/kmsg`` wakes its reader at once, and the simulation must not be slower than it (the
recovery latency bench reads it). inotify gives both: no wake-up while the file is quiet,
a wake-up within microseconds of a write.

The folder is watched, not the file, so a file that appears, is replaced (logrotate's
rename and create) or is deleted wakes the reader too; only events naming the file count.
Three libc calls through ctypes (``inotify_init1``, ``inotify_add_watch`` and a ``read``
of the descriptor): the whole of what a wrapper library would add. Where inotify is not
there (not Linux, a folder it cannot watch, the watches used up), ``open_watch`` gives
``None`` and the caller polls.
"""

from __future__ import annotations

import ctypes
import functools
import os
import select
import struct
from pathlib import Path

# <sys/inotify.h>
IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
# A change to the folder itself (deleted, moved, its watch dropped): the reader looks again.
_FOLDER_EVENTS = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
_READ_BYTES = 64 * 1024


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library's inotify calls (the process's own symbols: no ``ldconfig`` run)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):  # not Linux, or a C library without inotify
        return None
    return libc


class FileWatch:
    """An inotify descriptor watching one file's folder for events naming that file."""

    def __init__(self, fd: int, name: bytes) -> None:
        self._fd = fd
        self._name = name
        self.alive = True  # False once the folder's watch is gone: the caller polls

    def wait(self, timeout_s: float) -> bool:
        """True when an event named the file (or touched its folder) within ``timeout_s``."""
        if self._fd < 0:
            return False
        readable, _, _ = select.select([self._fd], [], [], max(0.0, timeout_s))
        return bool(readable) and self._drain()

    def _drain(self) -> bool:
        """Read every pending event; True when one is about the file or its folder."""
        named = False
        while True:
            try:
                data = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                return named
            if not data:
                return named
            offset = 0
            while offset + _EVENT.size <= len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & _FOLDER_EVENTS:
                    self.alive = False  # a folder deleted or moved is watched no more
                    named = True
                elif mask & IN_Q_OVERFLOW or name == self._name:
                    named = True  # an overflowed queue may have dropped the file's event

    def close(self) -> None:
        """Close the descriptor; safe to call twice."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def open_watch(path: Path) -> FileWatch | None:
    """A watch of ``path``'s folder for events naming ``path``; None where inotify is not."""
    libc = _libc()
    if libc is None:
        return None
    fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        return None
    folder = os.fsencode(path.parent if str(path.parent) else Path("."))
    if libc.inotify_add_watch(fd, folder, _MASK) < 0:
        os.close(fd)
        return None
    return FileWatch(fd, os.fsencode(path.name))
