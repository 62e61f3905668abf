"""temperature: core and HBM limits at and around their edges."""

from __future__ import annotations

import pytest

from hwcheck.model import RigProfile, Severity
from tests.support.cards import make_card, make_input, make_rig, result_for


@pytest.mark.parametrize(
    ("core_c", "severity"),
    [
        (79.9, Severity.OK),
        (80.0, Severity.WARNING),
        (89.9, Severity.WARNING),
        (90.0, Severity.CRITICAL),
        (97.0, Severity.CRITICAL),
    ],
)
def test_core_limits(core_c: float, severity: Severity) -> None:
    inp = make_input([make_rig([make_card(0, temperature_c=core_c)])], profile=RigProfile())

    result = result_for(inp, "temperature", 0)

    assert result.severity is severity
    assert f"core {core_c:g} C (warn 80 C, crit 90 C)" in result.message
    assert ("cooling" in result.remedy) is (severity is not Severity.OK)


@pytest.mark.parametrize(
    ("hbm_c", "severity"),
    [
        (84.9, Severity.OK),
        (85.0, Severity.WARNING),
        (95.0, Severity.CRITICAL),
        (None, Severity.OK),
    ],
)
def test_memory_limits(hbm_c: float | None, severity: Severity) -> None:
    card = make_card(0, temperature_c=60.0, memory_temperature_c=hbm_c)
    inp = make_input([make_rig([card])], profile=RigProfile())

    result = result_for(inp, "temperature", 0)

    assert result.severity is severity
    assert ("HBM" in result.message) is (hbm_c is not None)


def test_worst_of_core_and_memory_wins() -> None:
    card = make_card(0, temperature_c=91.0, memory_temperature_c=86.0)
    inp = make_input([make_rig([card])])

    assert result_for(inp, "temperature", 0).severity is Severity.CRITICAL


def test_missing_core_temperature_is_a_warning() -> None:
    inp = make_input([make_rig([make_card(0, temperature_c=None)])])

    result = result_for(inp, "temperature", 0)

    assert result.severity is Severity.WARNING
    assert "not available" in result.message
