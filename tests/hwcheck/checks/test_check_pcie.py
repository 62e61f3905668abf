"""pcie_link: width judged strictly, generation via the link's max, never "not x16"."""

from __future__ import annotations

import pytest

from hwcheck.model import ClockEventReason, PcieBaseline, RigProfile, Severity
from tests.support.cards import make_card, make_input, make_rig, result_for

IDLE = int(ClockEventReason.GPU_IDLE)
BUSY = 0


@pytest.mark.parametrize(
    ("gen", "width", "gen_max", "width_max", "reasons", "severity", "words"),
    [
        pytest.param(2, 4, 2, 4, BUSY, Severity.OK, "PCIe Gen2 x4", id="gen2-x4"),
        pytest.param(2, 8, 2, 16, BUSY, Severity.OK, "PCIe Gen2 x8", id="x8-above"),
        pytest.param(3, 16, 4, 16, BUSY, Severity.OK, "PCIe Gen3 x16", id="x16"),
        pytest.param(2, 1, 2, 4, BUSY, Severity.WARNING, "link trained x1", id="x1"),
        pytest.param(2, 2, 2, 4, BUSY, Severity.WARNING, "link trained x2", id="x2"),
        pytest.param(1, 4, 2, 4, IDLE, Severity.OK, "idle link power saving", id="gen1-idle"),
        pytest.param(1, 4, 2, 4, BUSY, Severity.WARNING, "Gen1 while busy", id="gen1-busy"),
        pytest.param(1, 4, 1, 4, IDLE, Severity.WARNING, "capable of Gen1 only", id="max-gen1"),
        pytest.param(1, 4, None, 4, BUSY, Severity.WARNING, "capable of Gen1", id="no-max"),
    ],
)
def test_link_against_the_default_baseline(
    *,
    gen: int,
    width: int,
    gen_max: int | None,
    width_max: int,
    reasons: int,
    severity: Severity,
    words: str,
) -> None:
    card = make_card(
        1,
        pcie_gen_current=gen,
        pcie_width_current=width,
        pcie_gen_max=gen_max,
        pcie_width_max=width_max,
        clock_event_reasons=reasons,
    )
    inp = make_input([make_rig([make_card(0), card])], profile=RigProfile())

    result = result_for(inp, "pcie_link", 1)

    assert result.severity is severity, result.message
    assert words in result.message
    assert "x16" not in result.remedy


def test_x1_remedy_is_the_riser() -> None:
    inp = make_input([make_rig([make_card(0, pcie_width_current=1)])])

    result = result_for(inp, "pcie_link", 0)

    assert result.remedy == "reseat riser/check cable"
    assert "baseline Gen2 x4" in result.message


def test_recorded_baseline_overrides_the_profile_minimum() -> None:
    profile = RigProfile(pcie_baseline={"0000:02:00.0": PcieBaseline(gen=3, width=8)})
    card = make_card(1, pcie_gen_current=3, pcie_width_current=4, pcie_gen_max=3)
    inp = make_input([make_rig([make_card(0), card])], profile=profile)

    assert result_for(inp, "pcie_link", 1).severity is Severity.WARNING
    assert "baseline Gen3 x8" in result_for(inp, "pcie_link", 1).message
    assert result_for(inp, "pcie_link", 0).severity is Severity.OK


def test_unknown_link_is_a_warning() -> None:
    card = make_card(0, pcie_width_current=None)
    inp = make_input([make_rig([card])])

    result = result_for(inp, "pcie_link", 0)

    assert result.severity is Severity.WARNING
    assert "not available" in result.message
