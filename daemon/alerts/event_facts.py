"""What the alert rules read of a stored event: its details, typed once, at this one door.

A stored event keeps its facts in a JSON ``details`` object (the Xid's class and action,
the serving change and state, the check, the recovery action), which comes back as plain
strings. The rules read them here as the enums of the models that wrote them, so no rule
matches a word or parses a message: an Xid's latch is ``XidInfo.latches`` (the one rule),
a serving event's change a ``ServingChange`` (a new boot is told from the latch clearing
beside it by a field too: ``EventRow.is_new_boot``). A value an older fleetd wrote, or
none, reads as the cautious default (an Xid to inspect, no change).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, TypeVar

from daemon.store.events import EventRow
from hwcheck.model import XidAction, XidClass, XidInfo
from serving.runtime.states import ServingChange, ServingState

E = TypeVar("E", bound=enum.StrEnum)


def _enum(kind: type[E], value: Any) -> E | None:
    """``value`` as a member of ``kind``, or None when it is none of them."""
    return kind(value) if isinstance(value, str) and value in set(kind) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class XidFacts:
    """An Xid event's verdict, as the catalogue gave it when it was stored."""

    info: XidInfo
    title: str | None

    @classmethod
    def of(cls, event: EventRow) -> XidFacts:
        """The stored class and action (unknown: an Xid to inspect)."""
        details = event.details or {}
        xid_class = _enum(XidClass, details.get("class")) or XidClass.UNKNOWN
        action = _enum(XidAction, details.get("action")) or XidAction.INSPECT
        info = XidInfo(event.xid or 0, xid_class, action, "")
        return cls(info, _text(details.get("title")))


@dataclass(frozen=True, slots=True)
class ServingFacts:
    """A serving event's change and the engine's state with it."""

    change: ServingChange | None
    state: ServingState | None
    advice: str | None

    @classmethod
    def of(cls, event: EventRow) -> ServingFacts:
        """The stored change, state and advice (None where missing or unknown)."""
        details = event.details or {}
        return cls(
            _enum(ServingChange, details.get("kind")),
            _enum(ServingState, details.get("state")),
            _text(details.get("advice")),
        )


@dataclass(frozen=True, slots=True)
class EngineMetricFacts:
    """An engine metric alarm's event: which figure, firing or ended, and what to do."""

    metric: str
    firing: bool
    advice: str | None

    @classmethod
    def of(cls, event: EventRow) -> EngineMetricFacts:
        """The stored metric name, whether it fires, and its advice."""
        details = event.details or {}
        return cls(
            _text(details.get("metric")) or "",
            details.get("firing") is True,
            _text(details.get("advice")),
        )


@dataclass(frozen=True, slots=True)
class CheckFacts:
    """A check's transition: which check, whether confirmed, what to do."""

    check: str | None
    confirmed: bool
    remedy: str | None

    @classmethod
    def of(cls, event: EventRow) -> CheckFacts:
        """The stored check id; ``confirmed`` is False only when the check said so."""
        details = event.details or {}
        return cls(
            _text(details.get("check")),
            details.get("confirmed") is not False,
            _text(details.get("remedy")),
        )


@dataclass(frozen=True, slots=True)
class RecoveryFacts:
    """A recovery event: the decision or action, who asked, how it ended, and its reasons.

    ``codes`` are the reasons' codes (the gate's and the supervisor's, kept typed from
    where they were found); ``first`` the first reason's words, for a one-line summary.
    """

    action: str | None
    dry_run: bool
    advice: str | None
    actor: str | None = None
    result: str | None = None
    first: str | None = None
    codes: tuple[str, ...] = ()

    @classmethod
    def of(cls, event: EventRow) -> RecoveryFacts:
        """The stored action word (the audit trail's), dry run, advice or remedy, and more."""
        details = event.details or {}
        codes = details.get("codes")
        return cls(
            _text(details.get("action")),
            details.get("dry_run") is True,
            _text(details.get("advice")) or _text(details.get("remedy")),
            _text(details.get("actor")),
            _text(details.get("result")),
            _text(details.get("first")),
            tuple(c for c in codes if isinstance(c, str)) if isinstance(codes, list) else (),
        )
