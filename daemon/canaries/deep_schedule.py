"""When the deep round is due: every ``deep_interval_h`` hours since the last one.

The last deep verdict in the store sets the first due time after a fleetd restart (a
restart neither skips a day nor runs two rounds in a row); with none yet, the first round
is due an hour after fleetd starts (``fleetctl canary run --deep`` runs one at once). A
round cut short (a user's request arrived, the engine went away) is tried again after
``DEEP_RETRY_S``. ``deep_interval_h = 0`` schedules none. Monotonic clock throughout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

DEEP_RETRY_S = 900.0
FIRST_DEEP_AFTER_S = 3600.0


class DeepSchedule:
    """The deep round's due time (used by the runner's thread only)."""

    def __init__(
        self,
        interval_h: float,
        clock: Callable[[], float] = time.monotonic,
        retry_s: float = DEEP_RETRY_S,
    ) -> None:
        self._interval_s = interval_h * 3600.0
        self._clock = clock
        self._retry_s = retry_s
        self._due_s = float("inf")

    def load(self, last_ts: datetime | None, now: datetime | None = None) -> None:
        """Set the first due time from the last deep verdict's time (``None``: never ran)."""
        if self._interval_s <= 0:
            self._due_s = float("inf")
            return
        if last_ts is None:
            self._due_s = self._clock() + min(FIRST_DEEP_AFTER_S, self._interval_s)
            return
        age_s = ((now or datetime.now(UTC)) - last_ts).total_seconds()
        self._due_s = self._clock() + max(self._interval_s - max(age_s, 0.0), 0.0)

    def due(self) -> bool:
        """True once the next deep round may run."""
        return self._clock() >= self._due_s

    def ran(self, interrupted: bool) -> None:
        """A deep round ended (``interrupted``: cut short, tried again sooner)."""
        if self._interval_s <= 0:
            self._due_s = float("inf")
            return
        self._due_s = self._clock() + (self._retry_s if interrupted else self._interval_s)
