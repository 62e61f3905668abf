"""The one way cmpfleet writes a file: only a regular file, atomically, where it belongs.

Every file cmpfleet writes (the config ``fleetctl init`` records the baseline in, the
unit and config ``fleetd install`` lays out, and every file fleetd keeps under its state
dir: the API token, the engine record, the latch, ...) goes through ``atomic_write``:

- absent or a regular file: a temporary file in the same directory (so the rename cannot
  cross a filesystem), written, fsynced, renamed over the target, and the directory
  fsynced so the rename itself survives a power cut;
- a symbolic link (config management's usual layout): the file it points at is written
  the same way, so the link stays and the file fleetd reads changes; a loop of links is
  refused;
- anything else (a character or block device, a FIFO, a socket, a directory) is refused
  with one line naming it, and left as it was: ``init --force --output /dev/null`` run as
  root once replaced the host's ``/dev/null`` with a config file. A file with several
  hard links is refused too: a rename would split it from its other names, and the one
  fleetd reads would silently keep the old text.

The mode is set on the descriptor, so the umask cannot widen it (the state dir holds a
secret and users' prompts); ``keep_mode`` keeps an existing file's mode and owner instead
(a person's config). It lives in ``hwcheck``, the lowest package, so every layer above
uses the one routine.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

# ``readlink`` hops before a chain of links counts as a loop (the kernel's own limit).
MAX_LINK_HOPS = 40

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


class NotARegularFile(OSError):
    """A path where cmpfleet reads or writes only a regular file holds something else.

    An ``OSError`` (callers already turn those into one line): ``strerror`` says what the
    path is and that it was left as it was, ``filename`` names it.
    """

    def __init__(self, path: Path | str, what: str, detail: str) -> None:
        super().__init__(errno.EINVAL, f"{what}, {detail}", str(path))
        self.what = what  # ``a character device``, ``a loop of symbolic links``, ...

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def kind_of(mode: int) -> str:
    """``a character device``, ``a FIFO (named pipe)``, ...: what a non-regular file is."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _resolve_link(path: Path) -> Path:
    """Where the chain of symbolic links at ``path`` ends (the end may not exist)."""
    current = path
    for _ in range(MAX_LINK_HOPS):
        try:
            target = os.readlink(current)
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # not a link: the end of the chain
                return current
            if exc.errno == errno.ENOENT:
                return current
            raise
        current = current.parent / target
    raise NotARegularFile(path, "a loop of symbolic links", "nothing was written")


def writable_target(path: Path) -> tuple[Path, os.stat_result | None]:
    """The file a write to ``path`` replaces and its current status (None: absent).

    A symbolic link is followed to its end; a non-regular file or a hard-linked one
    raises ``NotARegularFile`` (see the module); a missing directory is the usual
    ``FileNotFoundError`` when the temporary file is made.
    """
    target = path
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path, None
    if stat.S_ISLNK(info.st_mode):
        target = _resolve_link(path)
        try:
            info = os.lstat(target)
        except FileNotFoundError:
            return target, None  # a dangling link: its target is created
    if not stat.S_ISREG(info.st_mode):
        shown = path if target == path else f"{path} (a link to {target})"
        raise NotARegularFile(
            shown, kind_of(info.st_mode), "not a regular file: left as it was, nothing written"
        )
    if info.st_nlink > 1:
        raise NotARegularFile(
            path,
            f"a file with {info.st_nlink} hard links",
            "which a replacement would split (the other names would keep the old text): "
            "left as it was; make it one file, or a symbolic link",
        )
    return target, info


def atomic_write(
    path: Path, data: str | bytes, mode: int = 0o600, *, keep_mode: bool = False
) -> Path:
    """Replace ``path`` with ``data`` (text is UTF-8) atomically and durably; the file written.

    ``mode`` for a new file (and, unless ``keep_mode``, for a replaced one too). Raises
    ``NotARegularFile`` for what is not to be written over, and OSError (the temporary
    file removed first) when any step fails; the old file, if any, is then untouched.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    target, before = writable_target(path)
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        try:
            if keep_mode and before is not None:
                os.fchmod(fd, stat.S_IMODE(before.st_mode))
                with contextlib.suppress(PermissionError):  # only root may give a file away
                    os.fchown(fd, before.st_uid, before.st_gid)
            else:
                os.fchmod(fd, mode)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        writable_target(path)  # not turned into a device or a FIFO meanwhile
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    fsync_dir(target.parent)
    return target


def fsync_dir(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename or a new file) to disk."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
