"""The API token: created at first start in ``<state-dir>/api-token`` with mode 0600."""

from __future__ import annotations

import secrets
from pathlib import Path

from daemon.statedir import StateDir
from hwcheck.atomic import atomic_write


def ensure_token(state_dir: Path) -> str:
    """Return the token, creating it (0600, atomically, never world-readable) if absent."""
    path = StateDir(state_dir).token
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    atomic_write(path, token + "\n")
    return token
