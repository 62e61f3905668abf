"""What every per-card host check shares: each answering card judged against its baseline.

A check gives a judge ``(card, its baseline) -> (severity, message, remedy)``; this runs it
over the cards that answer (lost cards are ``card_lost``'s) and labels each message with
the card. Nothing is judged where the host facts are not read.
"""

from __future__ import annotations

from collections.abc import Callable

from hwcheck.checks.base import CheckInput, card_label
from hwcheck.hostfacts.baseline import CardBaseline
from hwcheck.model import CheckResult, GpuSnapshot, Severity

Verdict = tuple[Severity, str, str]  # severity, message (after the card's label), remedy
Judge = Callable[[GpuSnapshot, CardBaseline], Verdict]


def judge_cards(inp: CheckInput, check_id: str, judge: Judge) -> list[CheckResult]:
    """One result per card that answers (none where the host facts are not read)."""
    if inp.host is None:
        return []
    results: list[CheckResult] = []
    for card in inp.live_cards():
        severity, message, remedy = judge(card, inp.baseline.card(card.pci_bus_id))
        results.append(
            CheckResult(check_id, card.index, severity, f"{card_label(card)}: {message}", remedy)
        )
    return results


def ok(message: str) -> Verdict:
    """An ok verdict (no remedy)."""
    return Severity.OK, message, ""
