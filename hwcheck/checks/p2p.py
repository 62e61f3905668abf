"""``p2p``: card pairs that read P2P as OK at the baseline still do.

Booted without the patched kernel and driver every pair reads "not supported", and the
stock driver's P2P path "reports success" and moves zero bytes: an engine under tensor
parallel then hangs at NCCL init (a start that times out after 45 minutes, cause
unnamed). Pipeline parallel moves its few transfers through the host, so there a lost
pair is a warning; under tensor parallel (size above 1) it is critical.
"""

from __future__ import annotations

from hwcheck.checks.base import CheckInput, card_label
from hwcheck.hostfacts.model import P2pStatus
from hwcheck.model import CheckResult, Severity

CHECK_ID = "p2p"
REMEDY = (
    "boot the patched kernel and driver module (see host_kernel, driver_module and bar1): "
    "P2P needs the 64 GB BAR1 and the patched driver's P2P path"
)


def check(inp: CheckInput) -> list[CheckResult]:
    """One result per card that answers (none where the host facts are not read)."""
    host = inp.host
    if host is None:
        return []
    tensor_parallel = inp.tensor_parallel_size > 1
    severity = Severity.CRITICAL if tensor_parallel else Severity.WARNING
    results: list[CheckResult] = []
    for card in inp.live_cards():
        label = card_label(card)
        was_ok = inp.baseline.card(card.pci_bus_id).p2p_ok
        if was_ok is None:
            results.append(
                CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: no P2P baseline")
            )
            continue
        lost: dict[P2pStatus, list[str]] = {}
        for peer in was_ok:
            status = host.p2p_status(card.pci_bus_id, peer)
            if status is not None and status not in (P2pStatus.OK, P2pStatus.UNKNOWN):
                lost.setdefault(status, []).append(peer)
        if not lost:
            ok = f"P2P read OK with {len(was_ok)} peers" if was_ok else "no P2P peers recorded"
            results.append(CheckResult(CHECK_ID, card.index, Severity.OK, f"{label}: {ok}"))
            continue
        impact = (
            f"the engine runs tensor parallel {inp.tensor_parallel_size}: its start would hang "
            "at NCCL init"
            if tensor_parallel
            else "pipeline parallel copes through the host, tensor parallel would hang"
        )
        results.append(
            CheckResult(
                CHECK_ID,
                card.index,
                severity,
                f"{label}: P2P read "
                + "; ".join(
                    f"{status.value.replace('_', ' ')} with {', '.join(peers)}"
                    for status, peers in lost.items()
                )
                + f" (OK at the baseline); {impact}",
                REMEDY,
            )
        )
    return results
