"""A simulated card that heats under load (``[host.cards.N] diag_faults = ["heats-under-load"]``).

Each step of an on-card test warms the card through the rig's own readings
(``set_card``), so fleetd's thermal guard sees it in NVML as it would on a rig, and the
run ends ``stopped_hot``; the card is back at its scenario temperatures once the run ends.
Used by the simulated card diagnostics and the simulated memory test's stress mode.
"""

from __future__ import annotations

from typing import Protocol

from hwcheck.model import GpuSnapshot
from hwcheck.sim.card import SimCard
from hwcheck.sim.scenario import Scenario

HEATS = "heats-under-load"


class SimulatedRig(Protocol):
    """What the diagnostics need of ``hwcheck.sim.rig.SimulatedRig`` (which builds them)."""

    scenario: Scenario

    def cards(self) -> tuple[SimCard, ...]:
        """Every card as it is now."""
        ...

    def set_card(self, index: int, **fields: object) -> GpuSnapshot:
        """Change a card's readings."""
        ...


class SimHeat:
    """Warms and cools the simulated rig's cards that heat under load."""

    def __init__(self, rig: SimulatedRig) -> None:
        self._rig = rig

    def heats(self, card: int) -> bool:
        """Whether card ``card`` heats under load in this scenario."""
        return HEATS in self._rig.scenario.host.facts.card(card).diag_faults

    def warm(self, card: int, degrees_c: float) -> None:
        """Card ``card`` a step warmer (core; HBM a quarter more), when it heats."""
        if not self.heats(card):
            return
        now = self._rig.cards()[card].card
        core = (now.temperature_c or 50.0) + degrees_c
        hbm = (now.memory_temperature_c or 55.0) + degrees_c * 1.25
        self._rig.set_card(card, temperature_c=core, memory_temperature_c=hbm)

    def cool(self, card: int) -> None:
        """Back to the scenario's temperatures (the run ended: the card idles again)."""
        if self.heats(card):
            base = self._rig.scenario.cards[card]
            self._rig.set_card(
                card,
                temperature_c=base.temperature_c,
                memory_temperature_c=base.memory_temperature_c,
            )
