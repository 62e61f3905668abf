"""``pcie_errors``: PCIe link errors climbing on a card or on a bridge above it.

Riser links at Gen1/Gen2 x4 are where link errors live: a climbing NVML replay counter or
AER correctable/non-fatal counters mean a riser, cable or slot going bad, long before the
card falls off the bus (Xid 79). Counters count since boot, so it is their climb that is
judged: at least two new errors at ``[host] pcie_errors_warn_per_min`` or faster is a
warning, for the card itself and for each switch or root port above it (a port shared
by four cards warns on all four). A fatal AER error is critical until the next reboot.
"""

from __future__ import annotations

from collections.abc import Callable

from hwcheck.checks.base import CheckInput, fmt_num
from hwcheck.checks.host_cards import Verdict, judge_cards, ok
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.hostfacts.counters import (
    CounterRate,
    aer_ends,
    counter_rate,
    latest_aer,
    replay_ends,
)
from hwcheck.hostfacts.model import AerCounts, HostFacts
from hwcheck.model import CheckResult, GpuSnapshot, Severity

CHECK_ID = "pcie_errors"
MIN_NEW_ERRORS = 2  # one error in a short window is noise, not a rate
REMEDY_RATE = (
    "reseat or replace the riser or cable of {where} (Gen1/Gen2 x4 risers are where link "
    "errors live) and check its power; errors on a switch port shared by several cards "
    "point at the switch's own link"
)
REMEDY_FATAL = (
    "a fatal PCIe error: stop the engine (fleetctl stop), reboot, then reseat or replace the "
    "riser of {where}; lspci -vv shows the device's error status"
)
_AER_KINDS: tuple[tuple[str, Callable[[AerCounts], int | None]], ...] = (
    ("correctable AER errors", lambda c: c.correctable),
    ("non-fatal AER errors", lambda c: c.nonfatal),
)


def _climb(what: str, rate: CounterRate) -> str:
    return (
        f"{what} +{fmt_num(rate.delta)} in {fmt_num(round(rate.span_s))} s "
        f"({fmt_num(round(rate.per_min, 1))}/min, {fmt_num(rate.latest)} since boot)"
    )


def _judge_card(inp: CheckInput, host: HostFacts, card: GpuSnapshot) -> Verdict:
    samples = inp.pcie_counters
    limit = inp.baseline.pcie_errors_warn_per_min
    bus = host.card(card.pci_bus_id)
    devices = [(card.pci_bus_id, "")]
    devices += [(bridge, f"port {bridge} above it: ") for bridge in (bus.bridges if bus else ())]
    climbing: list[str] = []
    fatal: list[str] = []
    replay = counter_rate(replay_ends(samples, card.pci_bus_id))
    if replay is not None and replay.delta >= MIN_NEW_ERRORS and replay.per_min >= limit:
        climbing.append(_climb("PCIe replays", replay))
    for address, where in devices:
        for what, field in _AER_KINDS:
            rate = counter_rate(aer_ends(samples, address, field))
            if rate is not None and rate.delta >= MIN_NEW_ERRORS and rate.per_min >= limit:
                climbing.append(where + _climb(what, rate))
        counts = latest_aer(samples, address)
        if counts is not None and counts.fatal:
            plural = "s" if counts.fatal != 1 else ""
            fatal.append(f"{where}{fmt_num(counts.fatal)} fatal AER error{plural} since boot")
    where = f"card {card.index}"
    if fatal:
        return Severity.CRITICAL, "; ".join(fatal + climbing), REMEDY_FATAL.format(where=where)
    if climbing:
        return Severity.WARNING, "; ".join(climbing), REMEDY_RATE.format(where=where)
    since_boot = (
        ""
        if card.pcie_replay_count is None
        else f" ({card.pcie_replay_count:,} replays since boot)"
    )
    return ok(f"no PCIe errors climbing{since_boot}")


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card that answers (none where the host facts are not read)."""
    host = inp.host
    if host is None:
        return []
    return judge_cards(inp, CHECK_ID, lambda card, _base: _judge_card(inp, host, card))


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "PCIe errors climbing",
        "The card's replay counter or the AER counters of the card or a port above it climb: "
        "a riser or a switch link is marginal. Fatal AER errors precede cards falling off "
        "the bus (Xid 79).",
        "reseat or replace the riser; a port shared by several cards: the switch's own link.",
    ),
    alert=Alert("PcieErrors", "PCIe errors climbing"),
    tag="PCIE ERR",
    host_panel=True,
)
