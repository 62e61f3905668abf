"""The card diagnostics' procedures and verdicts, on the simulated cards and by hand.

The same ``run_compute``/``measure``/``judge`` the child runs on a card; the simulated card
(``hwcheck.sim.carddiag``) plants the faults only the right test finds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hwcheck.carddiag.compute import KERNELS, Launch, expected_word, expected_words, run_compute
from hwcheck.carddiag.model import CardDiag, DiagKind, DiagOutcome, DiagPlan, ThermalLimits
from hwcheck.carddiag.pcie import Link, LinkFigures, expected_gb_per_s, judge, measure
from hwcheck.sim.carddiag import SimulatedDiagnoser
from hwcheck.sim.rig import SimulatedRig
from hwcheck.sim.scenario import load_scenario


def never() -> str | None:
    return None


def rig_of(name: str, tmp_path: Path) -> SimulatedRig:
    return SimulatedRig(load_scenario(name), tmp_path / "state")


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_the_fast_expected_words_are_the_recurrence_itself(kernel) -> None:  # type: ignore[no-untyped-def]
    fast = expected_words(kernel, 300, seed=0x5EED)
    assert [expected_word(kernel, t, 0x5EED) for t in (0, 1, 17, 299)] == [
        fast[0],
        fast[1],
        fast[17],
        fast[299],
    ]


def test_a_healthy_card_computes_every_result_exactly(tmp_path: Path) -> None:
    result = SimulatedDiagnoser(rig_of("healthy", tmp_path)).compute(
        0, DiagPlan(DiagKind.COMPUTE), never
    )
    assert result.outcome is DiagOutcome.PASSED, result.findings
    assert result.figures["results_wrong"] == 0
    assert result.figures["sms_seen"] == result.figures["sm_count"] == 70


def test_bad_sm_names_card_1s_sm_17_and_the_units_that_were_wrong(tmp_path: Path) -> None:
    diagnoser = SimulatedDiagnoser(rig_of("bad-sm", tmp_path))
    bad = diagnoser.compute(1, DiagPlan(DiagKind.COMPUTE), never)
    assert bad.outcome is DiagOutcome.FAILED
    assert bad.figures["bad_sms"] == [17]
    assert "SM 17" in bad.verdict
    assert [f.split(":")[0] for f in bad.findings] == ["FP32 FMA", "FP16 tensor-core MMA"]
    for other in (0, 2, 3):
        assert (
            diagnoser.compute(other, DiagPlan(DiagKind.COMPUTE), never).outcome
            is DiagOutcome.PASSED
        )


def test_a_wrong_word_is_counted_on_the_sm_that_wrote_it() -> None:
    kernel = KERNELS[0]
    words = expected_words(kernel, 8, seed=3)
    words[5] ^= 1

    class Target:
        sm_count = 2

        def launch(self, kernel, seed):  # type: ignore[no-untyped-def]
            return Launch(
                [4, 9],
                words
                if kernel is KERNELS[0]
                else expected_words(kernel, 8, seed) * kernel.words_per_thread,
                4,
            )

        def temperatures(self) -> tuple[None, None]:
            return None, None

    result = run_compute(Target(), 0, DiagPlan(DiagKind.COMPUTE), never, seed=3)
    assert result.outcome is DiagOutcome.FAILED
    assert result.figures["bad_sms"] == [9]  # thread 5 ran in the second block, on SM 9


def test_the_thermal_stop_ends_a_hot_card_stopped_hot_never_passed(tmp_path: Path) -> None:
    rig = rig_of("hot-card", tmp_path)
    limits = ThermalLimits(core_c=80.0, hbm_c=85.0)

    def guard() -> str | None:
        card = rig.cards()[3].card
        return limits.breach(card.temperature_c, card.memory_temperature_c)

    hot = SimulatedDiagnoser(rig).compute(3, DiagPlan(DiagKind.COMPUTE, seconds=60), guard)
    assert hot.outcome is DiagOutcome.STOPPED_HOT
    assert hot.outcome.failure
    assert "stopped hot" in hot.verdict and "°C" in hot.verdict
    assert rig.cards()[3].card.temperature_c == 66.0  # it cools back after the run
    cool = SimulatedDiagnoser(rig).compute(0, DiagPlan(DiagKind.COMPUTE), guard)
    assert cool.outcome is DiagOutcome.PASSED


def test_the_breach_names_hbm_first_and_skips_what_is_not_read() -> None:
    limits = ThermalLimits(80, 85)
    assert limits.breach(79, None) is None
    assert limits.breach(80, None) == "core 80 °C >= 80 °C"
    assert limits.breach(70, 86) == "HBM 86 °C >= 85 °C"


def test_link_rates_follow_the_trained_link() -> None:
    assert expected_gb_per_s(1, 4) == pytest.approx(0.81, abs=0.01)  # 0.816 measured
    assert expected_gb_per_s(2, 4) == pytest.approx(1.62, abs=0.01)  # 1.628 measured
    assert expected_gb_per_s(None, 4) is None


def test_a_gen1_card_is_told_to_reseat_or_retrain(tmp_path: Path) -> None:
    rig = rig_of("slow-link", tmp_path)
    diagnoser = SimulatedDiagnoser(rig)
    plan = DiagPlan(DiagKind.PCIE, repeats=3)
    figures = {i: diagnoser.link(i, plan, never) for i in range(4)}
    assert all(isinstance(f, LinkFigures) for f in figures.values())
    links = {
        i: Link(card.card.pcie_gen_current, card.card.pcie_width_current, 2, 4, 2, 4)
        for i, card in enumerate(rig.cards())
    }
    verdicts = {i: judge(i, links[i], None, figures[i]) for i in range(4)}  # type: ignore[arg-type]
    assert verdicts[2].outcome is DiagOutcome.FAILED
    assert verdicts[2].verdict.startswith(
        "Gen1 x4: 0.8 GB/s, expected about 1.6 at Gen2 x4: reseat or retrain"
    )
    assert [verdicts[i].outcome for i in (0, 1, 3)] == [DiagOutcome.PASSED] * 3


def test_a_flipped_bit_in_transit_fails_and_a_shared_switch_is_noted() -> None:
    link = Link(2, 4, 2, 4, 2, 4)
    flipped = judge(0, link, None, LinkFigures(1.6, 1.6, 3, 256 << 20))
    assert flipped.outcome is DiagOutcome.FAILED and "changed in transit" in flipped.verdict
    shared = judge(0, link, LinkFigures(0.8, 0.8, 0, 1), LinkFigures(1.6, 1.6, 0, 1))
    assert shared.outcome is DiagOutcome.PASSED
    assert "share a switch" in shared.findings[0]
    slow = judge(0, link, None, LinkFigures(0.5, 0.5, 0, 1))
    assert slow.outcome is DiagOutcome.FAILED and "for its link" in slow.verdict


def test_measure_stops_hot_between_copies() -> None:
    class Target:
        def copy_s(self, nbytes: int, to_device: bool) -> float:
            return 1.0

        def round_trip_mismatches(self, nbytes: int, seed: int) -> int:
            return 0

    asked = iter([None, None, "card 0 core 81 °C >= 80 °C"])
    assert (
        measure(Target(), DiagPlan(DiagKind.PCIE), lambda: next(asked))
        == "card 0 core 81 °C >= 80 °C"
    )


def test_results_cross_the_child_boundary_whole() -> None:
    result = CardDiag(2, DiagKind.PCIE, DiagOutcome.FAILED, "slow", {"link": "Gen1 x4"}, ["x"])
    assert CardDiag.from_dict(result.as_dict()) == result
    plan = DiagPlan(DiagKind.COMPUTE, seconds=30, stop_file="/tmp/x")
    assert DiagPlan.from_dict(plan.as_dict()) == plan


def test_the_memory_tests_stress_mode_stops_hot_on_a_card_that_heats(tmp_path: Path) -> None:
    """The stress mode asks the guard each cycle; the hot card ends stopped_hot, named."""
    from hwcheck.memtest.results import MemtestOutcome, MemtestPlan, run_on_cards

    rig = rig_of("hot-card", tmp_path)
    limits = ThermalLimits(core_c=80.0, hbm_c=85.0)

    def guard_for(card: int):  # type: ignore[no-untyped-def]
        def guard() -> str | None:
            now = rig.cards()[card].card
            breach = limits.breach(now.temperature_c, now.memory_temperature_c)
            return None if breach is None else f"card {card} {breach}"

        return guard

    memtester = rig.host_sources().memtester
    assert memtester is not None
    plain = run_on_cards(memtester, [3], MemtestPlan(mib=1), stop_for=guard_for)
    assert plain[0].outcome is MemtestOutcome.PASSED  # the fixed patterns alone stay cool
    stressed = run_on_cards(memtester, [0, 3], MemtestPlan(mib=1, stress_s=60), stop_for=guard_for)
    assert [r.outcome for r in stressed] == [MemtestOutcome.PASSED, MemtestOutcome.STOPPED_HOT]
    assert stressed[1].verdict is not None and "stopped hot (card 3 HBM 85" in stressed[1].verdict
    assert rig.cards()[3].card.temperature_c == 66.0
