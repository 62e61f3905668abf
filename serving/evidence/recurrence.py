"""Recurrence: the same fault again on the same card, rank, depth band or build.

NVSentinel counts repeated failures of a node; here faults and crashes are kept together
by card serial, pipeline rank, depth band and build, so a third illegal memory access on
one card in a week reads as that card's, not as three bad days. A repeat escalates once:
the third on a card in ``WINDOW_S`` advises a stress memory test of that card, then moving
it to another slot (a riser or slot fault follows the slot, a card fault the card). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WINDOW_S = 7 * 24 * 3600
REPEATS_TO_ESCALATE = 3
DEPTH_BAND_TOKENS = 64_000


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One bundle as recurrence reads it."""

    bundle_id: str
    at: datetime
    kind: str  # the fault: the crash class, or xid<N>
    card: int | None
    serial: str | None
    rank: int | None
    depth_tokens: int | None
    build: str | None
    during: str | None = None  # what ran: "speculative verify", a depth, ...


@dataclass(frozen=True, slots=True)
class Escalation:
    """A repeat that crossed the line: the words, and the group it counted."""

    key: str
    count: int
    summary: str
    advice: str
    bundle_ids: tuple[str, ...]


def depth_band(depth_tokens: int | None) -> str | None:
    """``128k-192k``: the 64k band a depth falls in (None without a depth)."""
    if depth_tokens is None:
        return None
    low = depth_tokens // DEPTH_BAND_TOKENS * DEPTH_BAND_TOKENS
    return f"{low // 1000}k-{(low + DEPTH_BAND_TOKENS) // 1000}k"


def _card_key(item: Occurrence) -> str | None:
    if item.serial:
        return f"serial:{item.serial}"
    return None if item.card is None else f"card:{item.card}"


def groups(items: Sequence[Occurrence]) -> dict[str, list[str]]:
    """Bundle ids by card serial, PP rank, depth band and build (``"rank:3" -> [ids]``)."""
    found: dict[str, list[str]] = {}
    for item in items:
        keys = [
            _card_key(item),
            None if item.rank is None else f"rank:{item.rank}",
            None if (band := depth_band(item.depth_tokens)) is None else f"depth:{band}",
            None if not item.build else f"build:{item.build}",
        ]
        for key in keys:
            if key is not None:
                found.setdefault(f"{item.kind}/{key}", []).append(item.bundle_id)
    return found


def escalation(new: Occurrence, earlier: Sequence[Occurrence]) -> Escalation | None:
    """The escalation ``new`` makes: exactly the REPEATS_TO_ESCALATE-th same fault on its card.

    Counted in the window before ``new`` by card (its serial when known), so the webhook
    says it once: the fourth adds to the bundle's recurrence, not another notification.
    """
    key = _card_key(new)
    if key is None:
        return None
    since = new.at - timedelta(seconds=WINDOW_S)
    same = [
        item
        for item in earlier
        if item.kind == new.kind
        and _card_key(item) == key
        and since <= item.at <= new.at
        and item.bundle_id != new.bundle_id
    ]
    count = len(same) + 1
    if count != REPEATS_TO_ESCALATE:
        return None
    ordinal = {3: "third"}.get(count, f"{count}th")
    card = f"card {new.card}" if new.card is not None else key
    rank = f" (rank {new.rank})" if new.rank is not None else ""
    during = {item.during for item in (*same, new)}
    all_during = f", all during {new.during}" if new.during and len(during) == 1 else ""
    days = WINDOW_S // 86400
    kind = new.kind.replace("_", " ")
    return Escalation(
        key=f"{new.kind}/{key}",
        count=count,
        summary=f"{ordinal} {kind} on {card}{rank} in {days} days{all_during}",
        advice=(
            f"run a stress memory test of {card} (fleetctl diag memtest --card "
            f"{new.card if new.card is not None else 'N'} --minutes 30); if it passes, move the "
            "card to another slot and see whether the fault follows the card or the slot"
        ),
        bundle_ids=(*(item.bundle_id for item in same), new.bundle_id),
    )
