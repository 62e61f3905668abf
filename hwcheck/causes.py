"""Check results grouped by cause: one line per fault, naming its cards, the root first.

A board-level fault turns the same check bad on every card at once: PWRBRK# asserted on
every slot is four ``power_brake`` results, a stock kernel is a ``host_kernel`` result plus
``bar1`` and ``p2p`` on every card. A person at 3 a.m. has one thing to do for each, so the
status, ``top``, the dashboard, its banner and the webhooks (``daemon.store.alert_batch``)
say each once, naming the cards (``power_brake cards 0-3: ...``), and put the root cause
first when one explains the others: a host that booted another kernel explains a lost
BAR1 and P2P, so ``host_kernel`` leads and ``bar1``/``p2p`` say they follow from it.

Pure: results in, ``Cause``s out. Results group when they share the check, severity,
remedy and confirmation; the message is the first card's, without its ``card N (...)``
label, and a card whose message differs in more than its numbers and addresses is named
after it (``; card 2: ...``), so nothing a card says is hidden by the grouping.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from hwcheck.card_ranges import cards_text
from hwcheck.checks import xid_since_boot
from hwcheck.checks.registry import CHECKS
from hwcheck.model import CheckResult, Severity

# Which failing checks a critical one explains (each check's ``SPEC.explains``; docs/domain.md:
# a stock kernel boots without the bridge-window patch, its arguments, the patched module
# and the unlock module; NVML down hides every card reading; a lost card fails whatever
# reads it).
EXPLAINS: Mapping[str, frozenset[str]] = {
    spec.id: spec.explains for spec in CHECKS if spec.explains
}

# The short word a card row shows for its failing check (phones, 80 columns): ``SPEC.tag``.
TAGS: Mapping[str, str] = {spec.id: spec.tag for spec in CHECKS if spec.tag is not None}
XID_CHECK = xid_since_boot.CHECK_ID

_LABEL = re.compile(r"^card \d+( \([0-9a-f:.]+\))?: ")
_VARYING = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]|\d[\d,.]*")


def without_label(message: str) -> str:
    """A per-card message without its leading ``card N (address): ``."""
    return _LABEL.sub("", message, count=1)


def _shape(message: str) -> str:
    """What a message says without its numbers and addresses (88 W and 87 W read alike)."""
    return _VARYING.sub("#", message)


@dataclass(frozen=True, slots=True)
class Cause:
    """One fault as a person reads it: a check, its cards (none: rig-wide), one message.

    ``explained_by`` names the critical check that explains it (``host_kernel`` for a lost
    BAR1): fix that one first. ``members`` keeps each card's own message.
    """

    id: str
    severity: Severity
    cards: tuple[int, ...]
    message: str
    remedy: str
    confirmed: bool = True
    explained_by: str | None = None
    members: tuple[CheckResult, ...] = ()

    @property
    def where(self) -> str:
        """``cards 0-3``, ``card 1``, or ``""`` for a rig-wide cause."""
        return cards_text(self.cards) if self.cards else ""

    @property
    def headline(self) -> str:
        """``power_brake cards 0-3: HW power brake ...``: the one line for this cause."""
        where = f" {self.where}" if self.cards else ""
        return f"{self.id}{where}: {self.message}"

    def as_dict(self) -> dict[str, object]:
        """The status document's ``causes`` entry."""
        return {
            "id": self.id,
            "severity": self.severity.value,
            "cards": list(self.cards),
            "where": self.where,
            "message": self.message,
            "remedy": self.remedy,
            "confirmed": self.confirmed,
            "explained_by": self.explained_by,
            "headline": self.headline,
        }


def _merged_message(members: Sequence[CheckResult]) -> str:
    first = without_label(members[0].message)
    extra = [
        f"card {m.card}: {without_label(m.message)}"
        for m in members[1:]
        if _shape(without_label(m.message)) != _shape(first)
    ]
    return "; ".join([first, *extra])


def _grouped(failing: Sequence[CheckResult]) -> list[Cause]:
    groups: dict[tuple[object, ...], list[CheckResult]] = {}
    for result in failing:
        key: tuple[object, ...] = (result.id, result.severity, result.remedy, result.confirmed)
        if result.card is None:
            key = (*key, "rig", len(groups))  # rig-wide results stay apart
        groups.setdefault(key, []).append(result)
    causes = []
    for members in groups.values():
        cards = tuple(sorted({m.card for m in members if m.card is not None}))
        lead = members[0]
        message = lead.message if lead.card is None else _merged_message(members)
        causes.append(
            Cause(
                lead.id,
                lead.severity,
                cards,
                message,
                lead.remedy,
                lead.confirmed,
                members=tuple(members),
            )
        )
    return causes


def _root_of(cause: Cause, roots: Mapping[str, Cause]) -> str | None:
    """The critical cause present that explains ``cause`` (on its cards, or rig-wide)."""
    for root_id, root in roots.items():
        if root_id == cause.id or cause.id not in EXPLAINS.get(root_id, frozenset()):
            continue
        if not root.cards or not cause.cards or set(cause.cards) & set(root.cards):
            return root_id
    return None


def group_causes(results: Iterable[CheckResult]) -> list[Cause]:
    """The results that are not ok, one ``Cause`` each, worst and root causes first.

    Order: critical before warning; within that the order the results came in (the
    registry's), except that a cause a present critical one explains comes right after
    its root, marked ``explained_by``.
    """
    failing = [r for r in results if r.severity.rank > Severity.OK.rank]
    causes = _grouped(failing)
    roots = {c.id: c for c in causes if c.severity is Severity.CRITICAL and c.id in EXPLAINS}
    marked = [replace(c, explained_by=_root_of(c, roots)) for c in causes]
    by_rank = sorted(marked, key=lambda c: -c.severity.rank)
    placed: set[int] = set()
    ordered: list[Cause] = []

    def place(position: int) -> None:
        if position in placed:
            return
        placed.add(position)
        ordered.append(by_rank[position])
        for n, follower in enumerate(by_rank):
            if follower.explained_by == by_rank[position].id:
                place(n)

    for n, cause in enumerate(by_rank):
        if cause.explained_by is None:
            place(n)
    for n in range(len(by_rank)):  # a cycle of explanations: keep every cause anyway
        place(n)
    return ordered


def card_tags(
    results: Iterable[CheckResult], xids_by_card: Mapping[int, Sequence[int]] | None = None
) -> dict[int, list[str]]:
    """Each card's failing checks as short tags (``BRAKE``, ``LOCKED``, ``Xid 31``), worst first.

    ``xids_by_card``: the Xid numbers seen on each card this boot, newest last, so the
    Xid tag names the Xid rather than a count.
    """
    xids = xids_by_card or {}
    tags: dict[int, list[str]] = {}
    for cause in group_causes(results):
        for card in cause.cards:
            tag = _tag(cause.id, xids.get(card, ()))
            if tag not in tags.setdefault(card, []):
                tags[card].append(tag)
    return tags


def _tag(check_id: str, xids: Sequence[int]) -> str:
    if check_id == XID_CHECK:
        seen = list(dict.fromkeys(reversed(xids)))  # newest first, each once
        return "Xid " + ",".join(str(x) for x in seen[:2]) if seen else "Xid"
    return TAGS.get(check_id, check_id.upper())
