"""The supervisor's one persisted fact: how many automatic restarts it has made.

Kept in ``supervisor.json`` in the state dir, so the count shown in the status survives a
fleetd restart. A missing or unreadable file starts the count at 0 (with a warning for an
unreadable one): losing a counter must never stop the supervisor.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hwcheck.atomic import atomic_write

_LOG = logging.getLogger(__name__)

SUPERVISOR_STATE_NAME = "supervisor.json"


class SupervisorStateFile:
    """``supervisor.json`` under one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / SUPERVISOR_STATE_NAME

    def load_restarts(self) -> int:
        """The saved restart count; 0 when there is none or it cannot be read."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return max(int(data.get("restarts", 0)), 0)
        except FileNotFoundError:
            return 0
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            _LOG.warning("ignoring %s (%s): restart count starts at 0", self.path, exc)
            return 0

    def save_restarts(self, restarts: int) -> None:
        """Replace the file atomically; a failure is logged, never raised."""
        try:
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps({"restarts": restarts}))
        except OSError:
            _LOG.exception("cannot save the restart count to %s", self.path)
