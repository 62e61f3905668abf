"""Neutral domain errors: what went wrong, in words, with no transport attached.

Domain code (the engine service, the store-backed services, simulation control) raises
these; only ``web`` turns them into HTTP status codes, in one exception handler. They
live this low (``serving`` sits above only ``hwcheck``) so every layer that refuses
something can raise them without importing the web layer.

``code`` is a stable machine word for callers (``reboot_latch``, ``not_found``, ...);
``message`` is the one line a person reads. A refusal with several reasons (a start the
gate refuses for the latch and a lint error) also keeps each one, with its own code, in
``reasons``: ``message`` and ``code`` stay the one line and the first code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class CodedReason(Protocol):
    """One reason with its stable code (``recovery.decisions.Reason`` is one)."""

    @property
    def code(self) -> str:
        """The stable machine word."""
        ...

    @property
    def line(self) -> str:
        """The reason in one line, with what to do when known."""
        ...


class DomainError(Exception):
    """Base class: an operation that did not happen, with the reason and a stable code."""

    default_code = "error"

    def __init__(
        self, message: str, code: str | None = None, reasons: Sequence[CodedReason] = ()
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.reasons = tuple(reasons)


class Refused(DomainError):
    """Refused by policy (reboot latch, critical check, lint error): the caller may not."""

    default_code = "refused"


class Conflict(DomainError):
    """Not possible in the current state (no engine configured, already stopping)."""

    default_code = "conflict"


class NotFound(DomainError):
    """The named thing (event, card, action) does not exist."""

    default_code = "not_found"


class Unavailable(DomainError):
    """A needed part is down or closing (cards unreadable, daemon shutting down)."""

    default_code = "unavailable"


class Busy(DomainError):
    """A bounded resource is used up (log followers); try again later."""

    default_code = "busy"


class InvalidInput(DomainError):
    """The request names something invalid (unknown event kind, bad card field)."""

    default_code = "invalid"
