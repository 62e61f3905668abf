"""The reboot-required latch, durable across daemon restarts.

Set by recovery when a hardware-class fault leaves the rig in a state only a reboot
fixes; it blocks engine starts until it is cleared, which happens only when the boot id
changes (a real reboot) or an operator overrides it. Clearing records an event in the
same transaction, so the history always says who cleared it, how, and what it was for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

from daemon.store import kv
from daemon.store.coltypes import require_aware
from daemon.store.errors import StoreInputError
from daemon.store.events import record_event
from daemon.store.rows import EventKind, EventSeverity, Latch

ClearHow = Literal["reboot", "operator"]


def _from_json(value: Any) -> Latch:
    return Latch(
        reason=str(value["reason"]),
        source=str(value["source"]),
        since=datetime.fromisoformat(str(value["since"])).astimezone(UTC),
        advice=None if value.get("advice") is None else str(value["advice"]),
    )


def get_latch(session: Session) -> Latch | None:
    """The latch in force, or ``None``."""
    value = kv.get_value(session, kv.REBOOT_LATCH)
    return None if value is None else _from_json(value)


def set_latch(
    session: Session,
    reason: str,
    source: str,
    advice: str | None = None,
    now: datetime | None = None,
) -> Latch:
    """Set the latch unless it is already set; return the latch in force.

    A second fault while latched keeps the first reason and time: the first one is the
    cause the operator has to deal with, and ``since`` must not move forward.
    """
    kv.lock_key(session, kv.REBOOT_LATCH)
    current = get_latch(session)
    if current is not None:
        return current
    since = require_aware(now or datetime.now(UTC), "latch time")
    latch = Latch(reason=reason, source=source, since=since, advice=advice)
    kv.set_value(
        session,
        kv.REBOOT_LATCH,
        {"reason": reason, "source": source, "since": since.isoformat(), "advice": advice},
        since,
    )
    return latch


def clear_latch(
    session: Session, reason: str, by: str, how: ClearHow, now: datetime | None = None
) -> Latch | None:
    """Clear the latch and record who cleared it and how; the cleared latch or ``None``."""
    if how not in ("reboot", "operator"):
        raise StoreInputError(f"unknown way to clear the latch {how!r}: expected reboot|operator")
    ts = require_aware(now or datetime.now(UTC), "clear time")
    kv.lock_key(session, kv.REBOOT_LATCH)
    current = get_latch(session)
    if current is None:
        return None
    kv.delete_value(session, kv.REBOOT_LATCH)
    record_event(
        session,
        EventKind.REBOOT if how == "reboot" else EventKind.OPERATOR,
        EventSeverity.INFO,
        f"reboot-required latch cleared by {by} ({how}): {reason}",
        details={
            "latch_reason": current.reason,
            "latch_source": current.source,
            "latch_since": current.since.isoformat(),
            "cleared_by": by,
            "how": how,
            "reason": reason,
        },
        ts=ts,
    )
    return current
