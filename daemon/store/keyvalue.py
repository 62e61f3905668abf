"""Small durable values in the one ``kv`` table: cursor, boot id, serving state, latch...

Every value is one JSON document under a fixed key. The session-level functions take
the caller's open session so a value can change in the same transaction as the rows it
belongs with (the kernel-log cursor with the Xid it moved past, the check states with
their transition events, the latch with the event that clears it: see ``events``).

The reboot-required latch is set by recovery when a hardware-class fault leaves the rig
in a state only a reboot fixes; it blocks engine starts until the boot id changes (a
real reboot) or an operator clears it.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import delete, select, text
from sqlalchemy.orm import Session

from daemon.store.db import Database, mark_news, require_aware, upsert
from daemon.store.models import KvEntry, StoredRow
from hwcheck.advice import ADVICE_STEPS, RigNow
from hwcheck.kernellog.records import KernelLogCursor
from hwcheck.model import Advice

KERNEL_LOG_CURSOR = "kernel_log_cursor"
LAST_BOOT_ID = "last_boot_id"
REBOOT_LATCH = "reboot_latch"
CHECK_SEVERITIES = "check_severities"
SERVING_STATE = "serving_state"


def serving_state_key(engine: str | None) -> str:
    """The primary engine's state key as always; ``serving_state:NAME`` for a side engine."""
    return SERVING_STATE if engine is None else f"{SERVING_STATE}:{engine}"


ROLLUP_WATERMARK = "rollup_watermark"
CARD_FAULT_HISTORY = "card_fault_history"  # recovery's per-card faults across boots
LATCH_WAIVER = "latch_waiver"  # what a person's clear of the latch waived, this boot

ClearHow = Literal["reboot", "operator"]


def parse_advice(value: object) -> Advice:
    """A stored latch's advice: the ``Advice`` word (what fleetd stores).

    Latches written by an older fleetd stored the advice's text: its own cold-cycle text
    reads as ``cold_power_cycle``, anything else as a warm reboot.
    """
    text = str(value or "")
    if text in set(Advice):
        return Advice(text)
    if text.startswith("power the rig off"):
        return Advice.COLD_POWER_CYCLE
    return Advice.WARM_REBOOT


@dataclass(frozen=True, slots=True)
class Latch(StoredRow):
    """The reboot-required latch: why, who set it, since when, and the step it asks for."""

    reason: str
    source: str
    since: datetime
    advice: Advice = Advice.WARM_REBOOT
    card: int | None = None  # the card the fault is on (None: the rig, or an older latch)

    def rig_now(self, engine_running: bool, wrong_boot: str | None = None) -> RigNow:
        """The state a step reads under this latch: its rung, its card, a wrong boot entry."""
        return RigNow(
            engine_running,
            latched=True,
            latch_advice=self.advice,
            latch_card=self.card,
            wrong_boot=wrong_boot,
        )

    def advice_text(self, engine_running: bool, wrong_boot: str | None = None) -> str:
        """What the advice tells a person now (the one table, ``hwcheck.advice.ADVICE_STEPS``).

        ``wrong_boot``: the default boot entry a reboot would refuse (fixed first).
        """
        return ADVICE_STEPS[self.advice].text(self.rig_now(engine_running, wrong_boot))

    @classmethod
    def from_json(cls, value: Any) -> Latch:
        """The latch from its stored document (``to_dict``'s output)."""
        return cls(
            reason=str(value["reason"]),
            source=str(value["source"]),
            since=datetime.fromisoformat(str(value["since"])).astimezone(UTC),
            advice=parse_advice(value.get("advice")),
            card=value["card"] if isinstance(value.get("card"), int) else None,
        )


# -- the table ------------------------------------------------------------------------


def get_value(session: Session, key: str) -> Any | None:
    """The JSON value stored under ``key``, or ``None``."""
    return session.execute(select(KvEntry.value).where(KvEntry.key == key)).scalar_one_or_none()


def set_value(session: Session, key: str, value: Any, now: datetime | None = None) -> None:
    """Store ``value`` (JSON-serialisable) under ``key``, replacing what was there."""
    upsert(
        session,
        KvEntry.__table__,  # type: ignore[arg-type]
        {"key": key, "value": value, "updated_at": now or datetime.now(UTC)},
        ["key"],
    )


def delete_value(session: Session, key: str) -> bool:
    """Remove ``key``; True when it was there."""
    result = session.execute(delete(KvEntry).where(KvEntry.key == key))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def lock_key(session: Session, key: str) -> None:
    """Serialise read-modify-write of ``key`` across connections until commit.

    SQLite write transactions already begin ``IMMEDIATE`` (one writer at a time); on
    PostgreSQL a transaction-scoped advisory lock does the same for this key only.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": zlib.crc32(key.encode())}
        )


# -- typed values, inside a caller's session -----------------------------------------


def get_cursor(session: Session) -> KernelLogCursor | None:
    """Where the kernel-log follower resumes, or ``None`` before the first record."""
    value = get_value(session, KERNEL_LOG_CURSOR)
    if value is None:
        return None
    return KernelLogCursor(boot_id=str(value["boot_id"]), last_seq=int(value["last_seq"]))


def set_cursor(session: Session, cursor: KernelLogCursor) -> KernelLogCursor:
    """Move the cursor forward; within one boot it never moves back. The cursor in force."""
    lock_key(session, KERNEL_LOG_CURSOR)
    current = get_cursor(session)
    if (
        current is not None
        and current.boot_id == cursor.boot_id
        and current.last_seq >= cursor.last_seq
    ):
        return current
    set_value(session, KERNEL_LOG_CURSOR, {"boot_id": cursor.boot_id, "last_seq": cursor.last_seq})
    return cursor


def get_boot_id(session: Session) -> str | None:
    """The boot id the daemon saw last (a different one now means the host rebooted)."""
    value = get_value(session, LAST_BOOT_ID)
    return None if value is None else str(value)


def get_latch(session: Session) -> Latch | None:
    """The latch in force, or ``None``."""
    value = get_value(session, REBOOT_LATCH)
    return None if value is None else Latch.from_json(value)


def check_severities(session: Session) -> dict[str, str]:
    """The stored severity per ``"<check id>:<card index|rig>"``."""
    return dict(get_value(session, CHECK_SEVERITIES) or {})


class KeyValueQueries(Database):
    """``Store`` methods for the small durable values (those without an event)."""

    def get_cursor(self) -> KernelLogCursor | None:
        """The kernel-log resume cursor."""
        with self.read() as session:
            return get_cursor(session)

    def set_cursor(self, cursor: KernelLogCursor) -> KernelLogCursor:
        """Move the cursor (never backwards within a boot); the cursor in force."""
        with self.write() as session:
            return set_cursor(session, cursor)

    def get_boot_id(self) -> str | None:
        """The boot id seen last (another one now means the host rebooted)."""
        with self.read() as session:
            return get_boot_id(session)

    def set_boot_id(self, boot_id: str) -> None:
        """Remember the current boot id."""
        with self.write() as session:
            set_value(session, LAST_BOOT_ID, boot_id)

    def get_serving_state(self, engine: str | None = None) -> dict[str, Any] | None:
        """The supervisor's last persisted state document (``engine``: a side engine's)."""
        with self.read() as session:
            value = get_value(session, serving_state_key(engine))
        return None if value is None else dict(value)

    def set_serving_state(self, value: dict[str, Any], engine: str | None = None) -> None:
        """Persist the supervisor's state document (``engine``: a side engine's, by profile)."""
        with self.write() as session:
            set_value(session, serving_state_key(engine), value)

    def check_severities(self) -> dict[str, str]:
        """The stored severity per ``"<check id>:<card index|rig>"``."""
        with self.read() as session:
            return check_severities(session)

    def get_document(self, key: str) -> dict[str, Any] | None:
        """A JSON document kept under ``key`` (``CARD_FAULT_HISTORY``, ``LATCH_WAIVER``)."""
        with self.read() as session:
            value = get_value(session, key)
        return dict(value) if isinstance(value, dict) else None

    def set_document(self, key: str, value: dict[str, Any]) -> None:
        """Replace the document under ``key``."""
        with self.write() as session:
            set_value(session, key, value)

    def get_latch(self) -> Latch | None:
        """The reboot-required latch, or ``None``."""
        with self.read() as session:
            return get_latch(session)

    def set_latch(
        self,
        reason: str,
        source: str,
        advice: Advice | str | None = None,
        now: datetime | None = None,
        card: int | None = None,
    ) -> Latch:
        """Set the latch unless it is already set; the latch in force.

        A second fault while latched keeps the first reason and time: the first one is
        the cause the operator has to deal with, and ``since`` must not move forward.
        """
        with self.write() as session:
            lock_key(session, REBOOT_LATCH)
            current = get_latch(session)
            if current is not None:
                return current
            since = require_aware(now or datetime.now(UTC), "latch time")
            latch = Latch(reason, source, since, parse_advice(advice), card)
            set_value(session, REBOOT_LATCH, latch.to_dict(), since)
            mark_news(session)
            return latch
