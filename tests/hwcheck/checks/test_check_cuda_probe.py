"""``cuda_probe``: the last probe round judged per card (critical when a card is wedged)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hwcheck.cuda_results import CardProbe, ProbeOutcome, ProbeRound
from hwcheck.model import LatchWaiver, Severity
from tests.support.cards import make_input, results_for

AT = datetime(2026, 9, 29, 14, tzinfo=UTC)


@pytest.mark.parametrize(
    ("outcome", "severity", "words"),
    [
        (ProbeOutcome.OK, Severity.OK, "takes a CUDA context"),
        (ProbeOutcome.UNAVAILABLE, Severity.OK, "not probed"),
        (ProbeOutcome.FAILED, Severity.CRITICAL, "CUDA probe failed"),
        (ProbeOutcome.TIMED_OUT, Severity.CRITICAL, "CUDA probe timed_out"),
    ],
)
def test_each_outcome_is_judged(outcome: ProbeOutcome, severity: Severity, words: str) -> None:
    probes = ProbeRound(AT, (CardProbe(0, ProbeOutcome.OK), CardProbe(1, outcome, "ERR")))
    results = results_for(make_input(probes=probes), "cuda_probe")
    assert [r.card for r in results] == [0, 1]
    assert results[1].severity is severity
    assert words in results[1].message
    if severity is Severity.CRITICAL:
        assert "reboot the host" in results[1].remedy and "ERR" in results[1].message


def test_no_round_no_result() -> None:
    inp = make_input(probes=ProbeRound(AT, ()))
    assert results_for(inp, "cuda_probe") == []


def test_a_failure_from_before_a_persons_clear_is_shown_cleared_as_a_warning() -> None:
    probes = ProbeRound(AT, (CardProbe(1, ProbeOutcome.FAILED, "CUDA_ERROR_DEVICE_UNAVAILABLE"),))
    waiver = LatchWaiver("card checked", AT + timedelta(minutes=1))
    (result,) = results_for(make_input(probes=probes, waiver=waiver), "cuda_probe")
    assert result.severity is Severity.WARNING
    assert "cleared by 'card checked'" in result.message
    later = ProbeRound(AT + timedelta(minutes=2), probes.results)
    (again,) = results_for(make_input(probes=later, waiver=waiver), "cuda_probe")
    assert again.severity is Severity.CRITICAL
