"""The daemon's answer to ``web.metrics_model.MetricsSource``: ``/metrics`` from memory.

Everything comes from what the daemon already holds: the monitor's latest snapshot and
check results, the engine supervisor's status, the follower's health, the poll timer.
The reboot-required latch in force is read from its one holder (``daemon.ports.latch``:
memory first, its state file, the store after): a scrape never queries the database.
The rig's verdict is the one fleetd judged (``hwcheck.verdict``), and the engine's
state its typed status: nothing here parses the status document back.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Sequence

from daemon.rig.monitor import MonitorView, RigMonitor
from daemon.rig.status_document import view_verdict
from daemon.store import Latch
from hwcheck.checks.vram import CHECK_ID as VRAM_CHECK_ID
from hwcheck.hostfacts.model import DeviceAer
from hwcheck.model import CheckResult, ClassifiedXid, RigSnapshot, Severity
from serving.runtime.states import ServingState, ServingStatus
from web.metrics_model import (
    CanaryMetrics,
    CardMetrics,
    DurationHistogram,
    GuardMetrics,
    RigMetrics,
)


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
            index=card.index,
            uuid=card.uuid,
            pci_bus_id=card.pci_bus_id,
            lost=card.lost,
            power_draw_w=card.power_draw_w,
            power_limit_w=card.power_limit_w,
            energy_total_mj=card.energy_total_mj,
            memory_total_mib=card.memory_total_mib,
            memory_used_mib=card.memory_used_mib,
            vram_unlocked=unlocked.get(card.index),
            power_brake_active=card.power_brake_active,
            temperature_c=card.temperature_c,
            memory_temperature_c=card.memory_temperature_c,
            sm_clock_mhz=card.sm_clock_mhz,
            pcie_gen=card.pcie_gen_current,
            pcie_width=card.pcie_width_current,
            xid_counts=dict(xid_counts.get(card.index, {})),
            clock_event_reasons=None
            if card.clock_event_reasons is None
            else tuple(card.clock_event_names),
            name=card.name,
            serial=card.serial,
            vbios_version=card.vbios_version,
            driver_version=card.driver_version,
            bar1_total_mib=card.bar1_total_mib,
            sm_clock_max_mhz=card.sm_clock_max_mhz,
            memory_clock_max_mhz=card.memory_clock_max_mhz,
            pcie_replay_count=card.pcie_replay_count,
            utilization_gpu_pct=card.utilization_gpu_pct,
            utilization_memory_pct=card.utilization_memory_pct,
            pcie_tx_kib_s=card.pcie_tx_kib_s,
            pcie_rx_kib_s=card.pcie_rx_kib_s,
            processes=None if card.processes is None else len(card.processes),
            in_profile=None if profile_cards is None else card.index in profile_cards,
        )
        for card in latest.cards
    )


class DaemonMetrics:
    """Builds ``RigMetrics`` from the daemon's parts (memory only)."""

    def __init__(
        self,
        monitor: RigMonitor,
        serving_status: Callable[[], ServingStatus | None],
        follower_up: Callable[[], bool],
        latch: Callable[[], Latch | None],
        poll_durations: DurationHistogram,
        canaries: Callable[[], tuple[tuple[CanaryMetrics, ...], dict[str, int]]] | None = None,
        pcie_aer: Callable[[], tuple[DeviceAer, ...]] | None = None,
        guard: Callable[[], GuardMetrics] | None = None,
        profile_cards: Callable[[], Collection[int] | None] = lambda: None,
    ) -> None:
        self._monitor = monitor
        self._profile_cards = profile_cards
        self._serving_status = serving_status
        self._follower_up = follower_up
        self._latch = latch
        self._poll_durations = poll_durations
        self._canaries = canaries
        self._pcie_aer = pcie_aer
        self._guard = guard

    def metrics_state(self) -> RigMetrics:
        """The picture a scrape exports."""
        view = self._monitor.view()
        serving = self._serving_status()
        tokens = None
        figures: dict[str, float | None] = {}
        if serving is not None and serving.metrics is not None:
            tokens = serving.metrics.generation_tokens_per_s
            figures = {k: v for k, v in serving.metrics.as_dict().items() if not isinstance(v, str)}
        canaries, signatures = self._canaries() if self._canaries is not None else ((), {})
        return RigMetrics(
            cards=card_metrics(view, self._profile_cards()),
            check_severities=worst_by_check(view.results),
            rig_status=view_verdict(view).rank,
            reboot_required=self._latch() is not None,
            serving_state=ServingState.STOPPED if serving is None else serving.state,
            serving_restarts=0 if serving is None else serving.restarts,
            generation_tokens_per_s=None if tokens is None else float(tokens),
            kernel_log_follower_up=self._follower_up(),
            poll_durations=self._poll_durations.snapshot(),
            polls=view.polls,
            last_poll_age_s=view.last_poll_age_s,
            canaries=canaries,
            log_signature_totals=signatures,
            pcie_aer=() if self._pcie_aer is None else self._pcie_aer(),
            guard=None if self._guard is None else self._guard(),
            engine_figures=figures,
        )
