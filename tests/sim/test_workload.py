"""What the simulated engine does to its cards, as NVML would show it (``hwcheck.sim.workload``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwcheck.model import GpuProcess
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario
from hwcheck.sim.workload import EngineLoad, EnginePhase, loaded
from tests.support.cards import make_card

TOTAL_MIB = 65_536


@pytest.mark.parametrize("sample", range(8))
def test_a_busy_serving_engine_fills_and_works_its_cards(sample: int) -> None:
    load = EngineLoad(4242, EnginePhase.SERVING, frozenset({0, 1}), busy=True)
    card = loaded(make_card(0, memory_used_mib=0), load, sample)

    assert 70 <= (card.utilization_gpu_pct or 0) <= 95
    assert card.memory_used_mib == round(TOTAL_MIB * 0.85)
    assert card.processes == (GpuProcess(4242, round(TOTAL_MIB * 0.85), "python3", None),)
    assert (card.pcie_tx_kib_s or 0) > 0 and (card.pcie_rx_kib_s or 0) > 0


def test_loading_streams_weights_in_and_idle_serving_is_near_zero() -> None:
    card = make_card(0, memory_used_mib=0)
    loading = loaded(card, EngineLoad(7, EnginePhase.LOADING), 3)
    idle = loaded(card, EngineLoad(7, EnginePhase.SERVING, busy=False), 3)

    assert (loading.pcie_rx_kib_s or 0) > 1_000_000  # ~1.4 GB/s over Gen2 x4
    assert (loading.memory_used_mib or 0) < (idle.memory_used_mib or 0)
    assert (idle.utilization_gpu_pct or 0) <= 2


def test_cards_outside_the_profile_and_with_no_engine_stay_idle() -> None:
    elsewhere = loaded(make_card(5), EngineLoad(7, EnginePhase.SERVING, frozenset({0})), 1)
    nothing = loaded(make_card(5), None, 1)
    for card in (elsewhere, nothing):
        assert card.processes == () and card.utilization_gpu_pct == 0


def test_the_simulated_backend_shows_the_attached_engine(tmp_path: Path) -> None:
    rig = SimulatedRig(load_scenario("healthy"), tmp_path)
    backend = rig.host_sources().gpu
    try:
        assert all(card.processes == () for card in backend.snapshot().cards)
        rig.attach_engine(
            lambda: EngineLoad(99, EnginePhase.SERVING, frozenset({1, 2}), container="engine")
        )
        cards = backend.snapshot().cards
        assert [bool(card.processes) for card in cards] == [False, True, True, False]
        assert cards[1].processes is not None
        assert cards[1].processes[0].container == "engine"
        rig.set_card(1, utilization_gpu_pct=13)  # a reading set by a test wins over the load
        assert backend.snapshot().cards[1].utilization_gpu_pct == 13
        # A second engine (a rig of several, `[serving] run`) loads its own cards.
        rig.attach_engine(lambda: EngineLoad(77, EnginePhase.SERVING, frozenset({3})))
        cards = backend.snapshot().cards
        assert [[p.pid for p in card.processes or ()] for card in cards] == [[], [99], [99], [77]]
    finally:
        backend.close()
