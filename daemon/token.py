"""The API token: created at first start in ``<state-dir>/api-token`` with mode 0600.

Whoever reads the token can stop the engine or reboot the rig, so a token file that
others can read (copied in from a backup, or unpacked with a loose umask) is narrowed
back to 0600 at start, with a warning: the token may already have been read.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

from daemon.statedir import FILE_MODE, StateDir
from hwcheck.atomic import atomic_write

log = logging.getLogger("fleetd")


def ensure_token(state_dir: Path) -> str:
    """Return the token, creating it (0600, atomically, never world-readable) if absent."""
    path = StateDir(state_dir).token
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = secrets.token_urlsafe(32)
        atomic_write(path, token + "\n")
        return token
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        os.chmod(path, FILE_MODE)
        log.warning(
            "%s was mode %04o (others could read the API token): now %04o; "
            "replace the token if others may have read it (delete the file and restart)",
            path,
            mode,
            FILE_MODE,
        )
    return token
