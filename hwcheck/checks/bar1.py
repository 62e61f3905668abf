"""``bar1``: each card still has the BAR1 aperture it had at the baseline.

Behind PLX switches the 64 GB BAR1 needs the bridge-window patch and its kernel arguments;
booted without them the cards come up with the stock 256 MiB, and P2P and large
transfers fail in ways that look like an engine hang. A card below its baseline is
critical; a card the driver does not report BAR1 for is not judged.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, fmt_num
from hwcheck.checks.host_cards import Verdict, judge_cards, ok
from hwcheck.checks.spec import Alert, CheckSpec, CheckText
from hwcheck.hostfacts.baseline import CardBaseline
from hwcheck.model import CheckResult, GpuSnapshot, Severity

CHECK_ID = "bar1"
REMEDY = (
    "boot the patched kernel with its kernel arguments (see host_kernel and kernel_cmdline: "
    "pci= bridge windows behind the PLX switches), then reboot; a card that alone lost it: "
    "reseat it"
)


def _judge(card: GpuSnapshot, base: CardBaseline) -> Verdict:
    have, want = card.bar1_total_mib, base.bar1_mib
    if have is None:
        return ok("BAR1 n/a")
    if want is not None and have < want:
        return (
            Severity.CRITICAL,
            f"BAR1 {fmt_num(have, 'MiB')}, baseline {fmt_num(want, 'MiB')}: the 64 GB BAR1 is "
            "gone: the bridge-window patch or kernel arguments are missing",
            REMEDY,
        )
    return ok(f"BAR1 {fmt_num(have, 'MiB')}")


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card that answers (none where the host facts are not read)."""
    return judge_cards(inp, CHECK_ID, _judge)


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "BAR1 lost",
        "Behind PLX switches the 64 GB BAR1 needs the bridge-window patch and its kernel "
        "arguments; without them the cards come up with 256 MiB, and P2P and large transfers "
        "fail in ways that look like an engine hang at NCCL init.",
        "boot the patched kernel with its arguments (host_kernel, kernel_cmdline), reboot.",
    ),
    alert=Alert("Bar1Lost", "64 GB BAR1 gone"),
    tag="BAR1",
    gate=True,
    host_panel=True,
)
