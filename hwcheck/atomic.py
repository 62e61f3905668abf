"""One way to replace a file so that a crash leaves the old or the new one, whole.

Every file fleetd keeps under its state dir (the API token, the engine record, the
supervisor's restart count, the simulated host's boot id and state, ...) is replaced with
``atomic_write``: a temporary file in the same directory (so the rename cannot cross a
filesystem), written, fsynced, renamed over the target, and the directory fsynced so the
rename itself survives a power cut. The mode is set on the descriptor, so the umask
cannot widen it: the state dir holds a secret and users' prompts. It lives in ``hwcheck``,
the lowest package, so every layer above can use the one routine.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: str | bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8) atomically and durably, with ``mode``.

    Raises OSError (the temporary file is removed first) when any step fails; the old
    file, if any, is then untouched.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename or a new file) to disk."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
