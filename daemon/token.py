"""The API token: created at first start in ``<state-dir>/api-token`` with mode 0600."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TOKEN_FILE_NAME = "api-token"  # noqa: S105 - a file name, not a secret


def ensure_token(state_dir: Path) -> str:
    """Return the token, creating it (0600, atomically, never world-readable) if absent."""
    path = state_dir / TOKEN_FILE_NAME
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{TOKEN_FILE_NAME}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return token
