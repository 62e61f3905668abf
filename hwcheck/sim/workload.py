"""What the simulated engine does to its cards: memory, utilisation, PCIe traffic, a process.

A simulated rig with an engine on it should look to ``status``, ``top``, the dashboard and
``/metrics`` as a real one does to nvitop: while the engine loads, its cards fill with
weights over the PCIe link (about 1.4 GB/s received on Gen2 x4, a few % busy); once it
serves, vLLM holds ``gpu_memory_utilization`` of each card (KV cache preallocated), the
SMs are 70-95 % busy while requests run and near 0 while none do, and pipeline parallel
moves a few MB/s of activations between ranks. The engine's pid is listed on each of its
cards with its share of memory. Cards the engine does not use stay idle.

fleetd tells the rig what its engine does (``SimulatedRig.attach_engine``); the readings
move with the sample number only (no random generator), so no test can flake.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

from hwcheck.model import GpuProcess, GpuSnapshot

LOADING_RX_KIB_S = 1_400_000  # weights over Gen2 x4
LOADING_SHARE = 0.45  # how full a card is while the weights load
SERVING_PCIE_KIB_S = 6_000  # pipeline-parallel activations between ranks
IDLE_PCIE_KIB_S = 12


class EnginePhase(enum.Enum):
    """Where the simulated engine is: loading its weights, or up."""

    LOADING = "loading"
    SERVING = "serving"


@dataclass(frozen=True, slots=True)
class EngineLoad:
    """The simulated engine as its cards see it.

    ``cards``: the indices it runs on (None: every card); ``busy``: requests are running;
    ``memory_fraction``: the recipe's ``gpu_memory_utilization``; ``load_fraction``: the
    share of the engine's slots running requests (its cards' draw follows it).
    """

    pid: int
    phase: EnginePhase
    cards: frozenset[int] | None = None
    busy: bool = False
    memory_fraction: float = 0.85
    name: str = "python3"
    container: str | None = None
    load_fraction: float = 0.0

    def runs_on(self, index: int) -> bool:
        """True when the engine uses card ``index``."""
        return self.cards is None or index in self.cards

    def busy_fraction(self) -> float:
        """The share of slots busy (a busy engine with no count: one slot of eight)."""
        if self.phase is not EnginePhase.SERVING:
            return 0.0
        return self.load_fraction if self.load_fraction > 0 else (0.125 if self.busy else 0.0)


def _wave(sample: int, index: int, phase: float) -> float:
    """A deterministic value in [0, 1] for one sample of one card."""
    return 0.5 + 0.5 * math.sin(sample * 1.3 + index * 1.7 + phase)


def _idle(card: GpuSnapshot, sample: int) -> GpuSnapshot:
    return replace(
        card,
        utilization_gpu_pct=0,
        utilization_memory_pct=0,
        pcie_tx_kib_s=round(IDLE_PCIE_KIB_S * _wave(sample, card.index, 0.4)),
        pcie_rx_kib_s=round(IDLE_PCIE_KIB_S * _wave(sample, card.index, 1.1)),
        processes=(),
    )


def loaded(card: GpuSnapshot, load: EngineLoad | None, sample: int) -> GpuSnapshot:
    """``card`` as it reads with ``load`` on the rig (idle when the engine is not on it)."""
    if card.lost:
        return card
    if load is None or not load.runs_on(card.index):
        return _idle(card, sample)
    total = card.memory_total_mib or 0
    share = load.memory_fraction * (LOADING_SHARE if load.phase is EnginePhase.LOADING else 1.0)
    held_mib = round(total * share)
    process = GpuProcess(load.pid, held_mib, load.name, load.container)
    wave = _wave(sample, card.index, 0.0)
    if load.phase is EnginePhase.LOADING:
        gpu, memory = round(3 + 9 * wave), round(1 + 3 * wave)
        tx, rx = round(40 + 60 * wave), round(LOADING_RX_KIB_S * (0.85 + 0.15 * wave))
    elif load.busy:
        gpu, memory = round(70 + 25 * wave), round(35 + 25 * wave)
        tx = rx = round(SERVING_PCIE_KIB_S * (0.5 + wave))
    else:
        gpu, memory = round(2 * wave), 0
        tx = rx = round(IDLE_PCIE_KIB_S * (1 + wave))
    return replace(
        card,
        memory_used_mib=(card.memory_used_mib or 0) + held_mib,
        utilization_gpu_pct=gpu,
        utilization_memory_pct=memory,
        pcie_tx_kib_s=tx,
        pcie_rx_kib_s=rx,
        processes=(process,),
    )
