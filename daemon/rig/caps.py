"""Keeping every card at the configured power cap.

``nvidia-smi -pl`` is lost at every boot and GPU reset, so fleetd re-applies the cap
whenever a poll finds a card off target (``[rig] apply_power_caps``), and on request
(``fleetctl caps apply``), and the post-reboot bring-up does so at once. Each change is
audited; a failure (no root, out of range) is reported once per card and reason, not
every poll.

The poller and the bring-up run on different threads and each reads the cards before
asking: after a reboot both saw every card at its default and both set the cap, twice per
card. So one apply runs at a time, and a caller's reading that shows cards off target is
read again under the lock: what another caller has just set is then seen, and each card
gets its cap once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from daemon.store import Store
from hwcheck.backend import BackendError, GpuBackend
from hwcheck.model import EventKind, GpuSnapshot, RigSnapshot, Severity

log = logging.getLogger("fleetd.caps")


@dataclass(frozen=True)
class CapResult:
    """What happened to one card."""

    card: int
    before_w: float | None
    target_w: float
    outcome: str  # applied | already | failed | skipped | dry_run
    detail: str = ""

    def as_dict(self) -> dict[str, object]:
        """JSON form for the API."""
        return {
            "card": self.card,
            "before_w": self.before_w,
            "target_w": self.target_w,
            "outcome": self.outcome,
            "detail": self.detail,
        }


def reading_is_stale(results: list[CapResult]) -> bool:
    """True when the reading that asked for caps no longer says what the cards are.

    A cap set now, or found set already (the bring-up after a reboot re-applies the caps
    too): a 250 W reading taken before it did must not be judged, or every reboot pages a
    false PowerCapDrift.
    """
    return any(result.outcome in ("applied", "already") for result in results)


class CapKeeper:
    """Applies each card's cap to the cards that are off it.

    ``target_w`` is the rig's cap; ``cap_for(index, pci_bus_id)`` a card's own when it has
    one (``[rig] power_cap_w_by_card``: 180 W on cards 0-3 beside 175 W on the others).
    """

    def __init__(
        self,
        backend: GpuBackend,
        store: Store,
        target_w: float,
        tolerance_w: float,
        dry_run: bool,
        cap_for: Callable[[int, str], float] | None = None,
    ) -> None:
        self._backend = backend
        self._store = store
        self._cap_for = cap_for
        self.target_w = target_w
        self.tolerance_w = tolerance_w
        self.dry_run = dry_run
        self._reported: set[tuple[int, str]] = set()
        self._lock = threading.Lock()
        self._override: dict[int, float] | None = None

    def override(self, caps_w: dict[int, float] | None) -> None:
        """Hold the cards at ``caps_w`` (a cap sweep's step) until ``None`` ends it.

        While held, the poller keeps these caps instead of the configured ones, so it
        does not fight the sweep.
        """
        with self._lock:
            self._override = None if caps_w is None else dict(caps_w)

    def cap_of(self, card: GpuSnapshot) -> float:
        """The cap ``card`` should run at."""
        held = self._override
        if held is not None and card.index in held:
            return held[card.index]
        if self._cap_for is None:
            return self.target_w
        return self._cap_for(card.index, card.pci_bus_id)

    def off_target(self, card: GpuSnapshot) -> bool:
        """True when the card's limit is known and outside the tolerance."""
        if card.lost or card.power_limit_w is None:
            return False
        return abs(card.power_limit_w - self.cap_of(card)) > self.tolerance_w

    def apply(
        self, snapshot: RigSnapshot, actor: str, only_off_target: bool = True
    ) -> list[CapResult]:
        """Set the cap where needed; returns one result per card (one caller at a time)."""
        with self._lock:
            if only_off_target and any(map(self.off_target, snapshot.cards)):
                snapshot = self._read_again(snapshot)
            return self._apply_locked(snapshot, actor, only_off_target)

    def _read_again(self, snapshot: RigSnapshot) -> RigSnapshot:
        """A fresh reading (another caller may have set the caps since ``snapshot``)."""
        try:
            return self._backend.snapshot()
        except BackendError as exc:
            log.warning("cannot read the cards again before capping (%s): using the reading", exc)
            return snapshot

    def _apply_locked(
        self, snapshot: RigSnapshot, actor: str, only_off_target: bool
    ) -> list[CapResult]:
        results: list[CapResult] = []
        for card in snapshot.cards:
            if card.lost:
                results.append(
                    CapResult(card.index, None, self.cap_of(card), "skipped", "card is lost")
                )
                continue
            if only_off_target and not self.off_target(card):
                results.append(
                    CapResult(card.index, card.power_limit_w, self.cap_of(card), "already")
                )
                continue
            results.append(self._apply_one(card, actor))
        return results

    def _apply_one(self, card: GpuSnapshot, actor: str) -> CapResult:
        before = card.power_limit_w
        target_w = self.cap_of(card)
        target = f"card {card.index} ({card.pci_bus_id})"
        if self.dry_run:
            key = (card.index, f"dry_run {before}")
            if key in self._reported:
                return CapResult(card.index, before, target_w, "dry_run", "already recorded")
            self._reported.add(key)
            self._store.audit(
                actor,
                "apply_power_cap",
                "dry_run",
                target=target,
                dry_run=True,
                reason=f"limit {before} W, target {target_w} W",
            )
            return CapResult(card.index, before, target_w, "dry_run", "recovery.dry_run is set")
        try:
            self._backend.set_power_limit(card.index, target_w)
        except BackendError as exc:
            key = (card.index, str(exc))
            if key not in self._reported:
                self._reported.add(key)
                log.error("cannot apply the %.0f W cap to %s: %s", target_w, target, exc)
                self._store.record_event(
                    EventKind.RECOVERY,
                    Severity.WARNING,
                    f"cannot apply the {target_w:.0f} W cap to {target}: {exc}",
                    card.index,
                    card_uuid=card.uuid,
                    pci_bus_id=card.pci_bus_id,
                    details={"action": "apply_power_cap", "actor": actor},
                )
                self._store.audit(
                    actor, "apply_power_cap", "failed", target=target, reason=str(exc)
                )
            return CapResult(card.index, before, target_w, "failed", str(exc))
        self._reported = {k for k in self._reported if k[0] != card.index}
        message = f"power cap {target_w:.0f} W applied to {target} (was {before} W)"
        log.info("%s", message)
        self._store.record_event(
            EventKind.RECOVERY,
            Severity.INFO,
            message,
            card.index,
            card_uuid=card.uuid,
            pci_bus_id=card.pci_bus_id,
        )
        self._store.audit(
            actor,
            "apply_power_cap",
            "applied",
            target=target,
            reason=f"limit {before} W, target {target_w} W",
        )
        return CapResult(card.index, before, target_w, "applied")
