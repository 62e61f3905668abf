"""``p2p``: card pairs that read P2P as OK at the baseline still do.

Booted without the patched kernel and driver every pair reads "not supported", and the
stock driver's P2P path "reports success" and moves zero bytes: an engine under tensor
parallel then hangs at NCCL init (a start that times out after 45 minutes, cause
unnamed). Pipeline parallel moves its few transfers through the host, so there a lost
pair is a warning; under tensor parallel (size above 1) it is critical.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput
from hwcheck.checks.host_cards import Verdict, judge_cards, ok
from hwcheck.checks.spec import Alert, CheckSpec, CheckText, DrawnAt
from hwcheck.hostfacts.baseline import CardBaseline
from hwcheck.hostfacts.model import HostFacts, P2pStatus
from hwcheck.model import CheckResult, GpuSnapshot, Severity

CHECK_ID = "p2p"
REMEDY = (
    "boot the patched kernel and driver module (see host_kernel, driver_module and bar1): "
    "P2P needs the 64 GB BAR1 and the patched driver's P2P path"
)


def _lost_peers(host: HostFacts, card: GpuSnapshot, was_ok: tuple[str, ...]) -> str:
    """``not supported with 0000:21:00.0, ...``: the recorded peers P2P no longer reaches."""
    lost: dict[P2pStatus, list[str]] = {}
    for peer in was_ok:
        status = host.p2p_status(card.pci_bus_id, peer)
        if status is not None and status not in (P2pStatus.OK, P2pStatus.UNKNOWN):
            lost.setdefault(status, []).append(peer)
    return "; ".join(
        f"{status.value.replace('_', ' ')} with {', '.join(peers)}"
        for status, peers in lost.items()
    )


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card that answers (none where the host facts are not read)."""
    host = inp.host
    if host is None:
        return []
    size = inp.tensor_parallel_size
    severity = Severity.CRITICAL if size > 1 else Severity.WARNING
    impact = (
        f"the engine runs tensor parallel {size}: its start would hang at NCCL init"
        if size > 1
        else "pipeline parallel copes through the host, tensor parallel would hang"
    )

    def judge(card: GpuSnapshot, base: CardBaseline) -> Verdict:
        if base.p2p_ok is None:
            return ok("no P2P baseline")
        lost = _lost_peers(host, card, base.p2p_ok)
        if lost:
            return severity, f"P2P read {lost} (OK at the baseline); {impact}", REMEDY
        return ok(
            f"P2P read OK with {len(base.p2p_ok)} peers" if base.p2p_ok else "no P2P peers recorded"
        )

    return judge_cards(inp, CHECK_ID, judge)


SPEC = CheckSpec(
    id=CHECK_ID,
    run=check,
    text=CheckText(
        "P2P lost",
        "A card pair that read peer-to-peer at the baseline no longer does. Pipeline parallel "
        "copes through the host; tensor parallel hangs, so it is critical only there.",
        "boot the patched kernel and driver (host_kernel, driver_module, bar1).",
    ),
    alert=Alert("P2pLost", "P2P lost"),
    tag="P2P",
    gate=True,
    host_panel=True,
    drawn_at=DrawnAt.HOST_P2P,
)
