"""The rig wing's part of ``/metrics``: its cards, its own series and the poll timer.

Everything comes from what the rig wing already holds: the monitor's latest snapshot
and check results, the follower's health, the poll job's ``Histogram``; a scrape never
calls NVML or queries the database. The rig's verdict is the one fleetd judged
(``hwcheck.verdict``): nothing here parses the status document back. The collectors
themselves (``web.metrics_cards``, ``web.metrics_rig``) only turn this into families.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Sequence

from prometheus_client import Histogram
from prometheus_client.registry import Collector

from daemon.rig.monitor import MonitorView, RigMonitor
from daemon.rig.status_document import view_verdict
from hwcheck.checks.vram_unlocked import CHECK_ID as VRAM_CHECK_ID
from hwcheck.model import CheckResult, ClassifiedXid, RigSnapshot, Severity
from web.metrics_cards import CardsCollector
from web.metrics_model import CardMetrics, RigState
from web.metrics_rig import PollDurationCollector, RigCollector


def worst_by_check(results: Sequence[CheckResult]) -> dict[str, Severity]:
    """The worst severity of each check id (a per-card check folds into one series)."""
    worst: dict[str, Severity] = {}
    for result in results:
        known = worst.get(result.id)
        if known is None or result.severity.rank > known.rank:
            worst[result.id] = result.severity
    return worst


def _xid_counts(snapshot: RigSnapshot, xids: Sequence[ClassifiedXid]) -> dict[int, Counter[int]]:
    """Card index -> Xid number -> how many since boot (joined on the PCI address)."""
    by_address = {card.pci_bus_id: card.index for card in snapshot.cards}
    counts: dict[int, Counter[int]] = defaultdict(Counter)
    for item in xids:
        index = by_address.get(item.event.pci_bus_id or "")
        if index is not None:
            counts[index][item.event.xid] += 1
    return counts


def card_metrics(
    view: MonitorView, profile_cards: Collection[int] | None = None
) -> tuple[CardMetrics, ...]:
    """Each card of the latest snapshot with its Xid counts and unlock verdict.

    ``profile_cards``: the cards the profile in force uses (None: no engine configured).
    """
    latest = view.latest
    if latest is None or view.nvml_down is not None:
        return ()
    xid_counts = _xid_counts(latest, view.xids)
    unlocked = {
        result.card: result.severity is Severity.OK
        for result in view.results
        if result.id == VRAM_CHECK_ID and result.card is not None
    }
    return tuple(
        CardMetrics(
            card,
            xid_counts=dict(xid_counts.get(card.index, {})),
            vram_unlocked=unlocked.get(card.index),
            in_profile=None if profile_cards is None else card.index in profile_cards,
        )
        for card in latest.cards
    )


def rig_state(view: MonitorView, follower_up: bool) -> RigState:
    """The rig's own series: worst verdict per check, the rig's verdict, polls, follower."""
    return RigState(
        check_severities=worst_by_check(view.results),
        kernel_log_follower_up=follower_up,
        polls=view.polls,
        last_poll_age_s=view.last_poll_age_s,
        rig_status=view_verdict(view).rank,
    )


def rig_collectors(
    monitor: RigMonitor,
    follower_up: Callable[[], bool],
    poll_durations: Histogram,
    profile_cards: Callable[[], Collection[int] | None] = lambda: None,
) -> tuple[Collector, ...]:
    """The rig wing's collectors: its cards, its own series and the poll timer.

    ``profile_cards``: the cards the profile in force uses (None: no engine configured).
    """
    return (
        CardsCollector(lambda: card_metrics(monitor.view(), profile_cards())),
        RigCollector(lambda: rig_state(monitor.view(), follower_up())),
        PollDurationCollector(poll_durations),
    )
