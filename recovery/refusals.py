"""The last start refused, kept until the next start: what the engine line says meanwhile.

A refused autostart (the latch, a critical check on the recipe's cards) used to leave the
status at "engine: stopped" with no word why; the refusal was in the audit trail only.
Every start goes through ``RecoveryController.request_start``, so the answer of each is
noted here: a refusal is kept with its codes and one-line reason, a start clears it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime

from recovery.decisions import Reason


@dataclass(frozen=True, slots=True)
class LastRefusal:
    """A start that was refused: when, by what trigger, the reasons' codes, one line."""

    at: datetime
    trigger: str
    reasons: tuple[Reason, ...]
    message: str
    actor: str = "recovery"

    def as_dict(self) -> dict[str, object]:
        """The status's ``serving.refusal``."""
        return {
            "ts": self.at.isoformat(),
            "trigger": self.trigger,
            "codes": list(dict.fromkeys(reason.code for reason in self.reasons)),
            "message": self.message,
            # The reasons without their fixes: the causes above them say what to do once.
            "headline": "; ".join(dict.fromkeys(reason.message for reason in self.reasons)),
        }


class RefusalMemory:
    """The last refusal, set and cleared by each start's answer (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: LastRefusal | None = None

    def note(
        self,
        trigger: str,
        started: bool,
        reasons: tuple[Reason, ...],
        message: str,
        actor: str = "recovery",
    ) -> None:
        """One start's answer: a start clears the refusal, a refusal replaces it."""
        with self._lock:
            if started:
                self._last = None
            elif reasons:
                self._last = LastRefusal(datetime.now(UTC), trigger, reasons, message, actor)

    @property
    def last(self) -> LastRefusal | None:
        """The last refusal since the last start (None: none, or it started since)."""
        with self._lock:
            return self._last
