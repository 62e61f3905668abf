"""``clocks``: each card's maximum clocks are still those of the baseline.

The maximum memory clock comes from the VBIOS: 1,728 MHz on a current one, 1,458 MHz on an
old one (about 16% less memory bandwidth; decode is bandwidth-bound). A maximum below the
baseline is a warning that says what it costs; never critical (the card works, slower).
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, fmt_num
from hwcheck.checks.host_cards import Verdict, judge_cards, ok
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.hostfacts.baseline import CardBaseline
from hwcheck.model import CheckResult, GpuSnapshot, Severity

CHECK_ID = "clocks"
REMEDY = (
    "an old VBIOS caps the memory clock at 1,458 MHz: flash the baseline VBIOS (see vbios); "
    "check application clock limits (nvidia-smi -q -d CLOCK)"
)


def _cost(clock: str, lost: str, have_mhz: int | None, want_mhz: int | None) -> str | None:
    if have_mhz is None or want_mhz is None or have_mhz >= want_mhz:
        return None
    loss = 1 - have_mhz / want_mhz
    return (
        f"max {clock} clock {fmt_num(have_mhz, 'MHz')}, baseline {fmt_num(want_mhz)}: "
        f"about {loss:.0%} less {lost}"
    )


def bandwidth_cost(have_mhz: int | None, want_mhz: int | None) -> str | None:
    """``max memory clock 1,458 MHz, baseline 1,728: about 16% less memory bandwidth``."""
    return _cost("memory", "memory bandwidth", have_mhz, want_mhz)


def _judge(card: GpuSnapshot, base: CardBaseline) -> Verdict:
    costs = [
        cost
        for cost in (
            bandwidth_cost(card.memory_clock_max_mhz, base.memory_clock_max_mhz),
            _cost("SM", "compute", card.sm_clock_max_mhz, base.sm_clock_max_mhz),
        )
        if cost
    ]
    if costs:
        return Severity.WARNING, "; ".join(costs), REMEDY
    return ok(
        f"max clocks SM {fmt_num(card.sm_clock_max_mhz, 'MHz')}, "
        f"memory {fmt_num(card.memory_clock_max_mhz, 'MHz')}"
    )


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card that answers (none where the host facts are not read)."""
    return judge_cards(inp, CHECK_ID, _judge)


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "clocks capped",
        "A card's maximum memory or SM clock is below the baseline (1,458 against 1,728 MHz "
        "memory on an old VBIOS: about 16% less bandwidth).",
        "flash the baseline VBIOS, or record the new limits.",
    ),
    alert=Alert("ClocksCapped", "Max clocks below baseline"),
    tag="CLOCKS",
    host_panel=True,
)
