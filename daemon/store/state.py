"""Typed accessors for the small durable values: kernel-log cursor, boot id, serving state."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from daemon.store import kv
from hwcheck.kernellog.records import KernelLogCursor


def get_cursor(session: Session) -> KernelLogCursor | None:
    """Where the kernel-log follower resumes, or ``None`` before the first record."""
    value = kv.get_value(session, kv.KERNEL_LOG_CURSOR)
    if value is None:
        return None
    return KernelLogCursor(boot_id=str(value["boot_id"]), last_seq=int(value["last_seq"]))


def set_cursor(session: Session, cursor: KernelLogCursor) -> KernelLogCursor:
    """Move the cursor forward; within one boot it never moves back. The cursor in force."""
    kv.lock_key(session, kv.KERNEL_LOG_CURSOR)
    current = get_cursor(session)
    if (
        current is not None
        and current.boot_id == cursor.boot_id
        and current.last_seq >= cursor.last_seq
    ):
        return current
    kv.set_value(
        session, kv.KERNEL_LOG_CURSOR, {"boot_id": cursor.boot_id, "last_seq": cursor.last_seq}
    )
    return cursor


def get_boot_id(session: Session) -> str | None:
    """The boot id the daemon saw last (a different one now means the host rebooted)."""
    value = kv.get_value(session, kv.LAST_BOOT_ID)
    return None if value is None else str(value)


def set_boot_id(session: Session, boot_id: str) -> None:
    """Remember the current boot id."""
    kv.set_value(session, kv.LAST_BOOT_ID, boot_id)


def get_serving_state(session: Session) -> dict[str, Any] | None:
    """The supervisor's last persisted state document."""
    value = kv.get_value(session, kv.SERVING_STATE)
    return None if value is None else dict(value)


def set_serving_state(session: Session, state: dict[str, Any]) -> None:
    """Persist the supervisor's state document (JSON-serialisable)."""
    kv.set_value(session, kv.SERVING_STATE, state)
