"""What the supervisor keeps across fleetd restarts: the restart count and a breaker hold.

Kept in ``supervisor.json`` in the state dir, so the count shown in the status survives a
fleetd restart, and so does a hold with its reason and time (else a restarted fleetd
showed "stopped, restarts 2" and the person who must act could not tell why the engine
was down). A missing or unreadable file starts from 0 with no hold (with a warning for
an unreadable one): losing a counter must never stop the supervisor.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from hwcheck.atomic import atomic_write

_LOG = logging.getLogger(__name__)

SUPERVISOR_STATE_NAME = "supervisor.json"


@dataclass(frozen=True)
class SavedHold:
    """A breaker hold: why, and since when (``None``: the time was not readable)."""

    reason: str
    since: datetime | None


@dataclass(frozen=True)
class SavedState:
    """The saved restart count and, while held, the hold."""

    restarts: int = 0
    hold: SavedHold | None = None


class SupervisorStateFile:
    """``supervisor.json`` under one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / SUPERVISOR_STATE_NAME

    def load(self) -> SavedState:
        """What a previous fleetd saved; nothing when there is none or it cannot be read."""
        data = self._read()
        try:
            restarts = max(int(data.get("restarts", 0)), 0)
        except (ValueError, TypeError) as exc:
            _LOG.warning("ignoring %s (%s): restart count starts at 0", self.path, exc)
            restarts = 0
        held = data.get("held")
        if not isinstance(held, dict) or not isinstance(held.get("reason"), str):
            return SavedState(restarts)
        return SavedState(restarts, SavedHold(held["reason"], _parse_time(held.get("since"))))

    def save(self, state: SavedState) -> None:
        """Replace the file atomically; a failure is logged, never raised."""
        data: dict[str, Any] = {"restarts": state.restarts}
        if state.hold is not None:
            since = None if state.hold.since is None else state.hold.since.isoformat()
            data["held"] = {"reason": state.hold.reason, "since": since}
        try:
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(data))
        except OSError:
            _LOG.exception("cannot save the restart count to %s", self.path)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            _LOG.warning("ignoring %s (%s): restart count starts at 0, no hold", self.path, exc)
            return {}
        return data if isinstance(data, dict) else {}


def _parse_time(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None
