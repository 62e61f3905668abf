"""``SimCard``: one card as the simulated host holds it, between the rig and the backend.

The rig (``hwcheck.sim.rig``) keeps the truth; the backend (``hwcheck.sim.backend``)
presents it the way NVML would. This is what passes between them, in a module of its own
so neither has to import the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwcheck.model import GpuSnapshot


@dataclass(frozen=True, slots=True)
class SimCard:
    """A card as the simulated host has it now, before NVML-style presentation.

    ``overridden`` names the fields changed at runtime: the backend adds its small
    reading jitter only to values that come from the scenario, never to ones a test set.
    """

    card: GpuSnapshot
    overridden: frozenset[str]
