"""The status document (``GET /api/v1/status``, ``fleetctl status --json``) from typed parts.

Built as ``web.models.StatusDocument`` from the monitor's view, the rig's one verdict
(``hwcheck.verdict``, judged by fleetd), the engine's status and recovery's block: every
part is a model checked on the way out, and nothing downstream parses it back (``/metrics``
reads the same typed sources, never this document).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from daemon.rig.host_watch import HostStatus
from daemon.rig.monitor import MonitorView
from hwcheck.causes import card_tags, group_causes
from hwcheck.checks import card_states, pcie_link
from hwcheck.explain import explanations
from hwcheck.hostfacts.document import card_bus_fields
from hwcheck.model import CheckResult, RigProfile
from hwcheck.report import card_document, xid_counts_by_card, xid_numbers_by_card
from hwcheck.verdict import NO_DATA, RigVerdict
from web.models import (
    CanaryResultDocument,
    CardDocument,
    CauseDocument,
    CheckDocument,
    DaemonInfoDocument,
    ExplanationDocument,
    LogSignatureDocument,
    Overall,
    RecoveryDocument,
    RigInfoDocument,
    ServingDocument,
    StatusDocument,
)
from web.models_host import HostDocument
from web.version import __version__


def iso_or_none(ts: datetime | None) -> str | None:
    """ISO 8601 (the store's times are aware already)."""
    return None if ts is None else ts.isoformat()


def check_documents(results: Sequence[CheckResult]) -> list[CheckDocument]:
    """Each check result as ``{id, card, severity, message, remedy}``."""
    return [
        CheckDocument(id=r.id, card=r.card, severity=r.severity, message=r.message, remedy=r.remedy)
        for r in results
    ]


def card_documents(
    view: MonitorView,
    rig: RigProfile,
    host: HostStatus | None = None,
    profile_cards: Sequence[int] | None = None,
) -> list[CardDocument]:
    """The cards of the last poll, with their state and the PCIe baseline they should train.

    With ``host`` (fleetd watches the host), each card also gets its bus facts: driver,
    bridges, uplink and AER counters. ``profile_cards``: the cards the profile in force
    uses (``in_profile``; None: no engine is configured).
    """
    latest = view.latest
    if latest is None or view.nvml_down is not None:
        return []  # nothing about the cards is known: the nvml check says why
    counts = xid_counts_by_card(latest, view.xids)
    states = card_states(view.results)
    tags = card_tags(view.results, xid_numbers_by_card(latest, view.xids))
    cards = []
    for card in latest.cards:
        state = "lost" if card.lost else states.get(card.index, "ok")
        gen, width = pcie_link.baseline(rig, card.pci_bus_id)
        bus = {} if host is None else card_bus_fields(host.facts, card.pci_bus_id)
        shown_tags = tags.get(card.index, ["LOST"] if card.lost else [])
        cards.append(
            CardDocument(
                **card_document(card, counts.get(card.index, 0), state, shown_tags),
                **bus,
                pcie_baseline_gen=gen,
                pcie_baseline_width=width,
                lost_kind=None if card.lost_kind is None else card.lost_kind.value,
                in_profile=None if profile_cards is None else card.index in profile_cards,
                power_cap_w=rig.power_cap_for(card.index, card.pci_bus_id),
            )
        )
    return cards


def rig_info(
    view: MonitorView, simulated: bool, kernel_records_lost: int, rig: RigProfile
) -> RigInfoDocument:
    """Which rig, where the picture comes from and how fresh it is, and its limits."""
    latest = view.latest
    return RigInfoDocument(
        name=rig.display_name(),
        power_cap_w=rig.power_cap_w,
        temperature_warn_c=rig.temperature_warn_c,
        temperature_crit_c=rig.temperature_crit_c,
        simulated=simulated,
        boot_id=view.boot_id,
        polls=view.polls,
        last_poll=iso_or_none(latest.taken_at) if latest else None,
        last_poll_error=view.last_poll_error,
        nvml_error=None if view.nvml_down is None else view.nvml_down.message,
        last_poll_age_s=None if view.last_poll_age_s is None else round(view.last_poll_age_s, 1),
        stale=view.stale_reason is not None,
        stale_reason=view.stale_reason,
        xid_since_boot=len(view.xids),
        kernel_records_lost=kernel_records_lost,
        why=view_verdict(view).why,
    )


def view_verdict(view: MonitorView) -> RigVerdict:
    """The verdict fleetd judged, as a reader sees it now (unknown once stale)."""
    if view.polls == 0 and view.nvml_down is None:
        return NO_DATA
    return (view.verdict or NO_DATA).read(view.stale_reason)


def status_document(
    view: MonitorView,
    *,
    rig: RigProfile,
    serving: dict[str, Any],
    recovery: RecoveryDocument,
    canaries: list[dict[str, Any]],
    log_signatures: list[dict[str, Any]] | None,
    simulated: bool,
    kernel_records_lost: int,
    started_at: str | None,
    gpu_pids: list[int],
    host: HostStatus | None = None,
    engine_cards: Sequence[int] | None = None,
) -> StatusDocument:
    """The whole document, every block a typed model (``host``: the host truth's section).

    ``engine_cards``: the cards some engine uses when several run (``in_profile``); else
    the serving block's.
    """
    causes = group_causes(view.results)
    extra: dict[str, Any] = {}
    if log_signatures is not None:
        extra["log_signatures"] = [LogSignatureDocument.model_validate(s) for s in log_signatures]
    if host is not None:
        extra["host"] = HostDocument.model_validate(host.section)
    return StatusDocument(
        overall=cast(Overall, view_verdict(view).overall),
        cards=card_documents(
            view, rig, host, serving.get("cards") if engine_cards is None else engine_cards
        ),
        checks=check_documents(view.results),
        causes=[CauseDocument.model_validate(c.as_dict()) for c in causes],
        serving=ServingDocument.model_validate(serving),
        recovery=recovery,
        canaries=[CanaryResultDocument.model_validate(entry) for entry in canaries],
        rig=rig_info(view, simulated, kernel_records_lost, rig),
        daemon=DaemonInfoDocument(
            pid=os.getpid(),
            started_at=started_at or "",
            version=__version__,
            # fleetctl check leaves these out of foreign_gpu_processes (fleetd, the engine).
            gpu_pids=gpu_pids,
        ),
        explanations=[
            ExplanationDocument(**item.as_dict())
            for item in explanations(
                (x.info for x in view.xids),
                recovery.advice_kind if recovery.reboot_required else None,
                (cause.id for cause in causes),
            )
        ],
        **extra,
    )
