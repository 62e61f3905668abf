"""``on_fail = "restart"`` counts its restarts by rounds, then holds (issue 36).

The breaker's time window never filled when a cold start plus a round outlasted
``breaker_window_s / breaker_max_restarts``: an always-failing canary restarted the engine
every round, forever. Rounds are what is counted now, whatever their length.
"""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.canaries.on_fail import OnFail
from serving.canary.model import CanaryResult, Outcome, Verdict
from serving.canary.settings import CanarySettings


def _round(outcome: Outcome) -> list[CanaryResult]:
    verdict = Verdict(outcome, 0.1, "m")
    return [CanaryResult.of("copy_fidelity", "ratio", verdict, 1.0, datetime.now(UTC))]


def test_restarts_in_a_row_then_a_hold_and_a_passing_round_resets() -> None:
    asked: list[str] = []
    act = OnFail("restart", lambda action, why: asked.append(action) or "ok", lambda: False, 3)
    for _ in range(3):
        act(_round(Outcome.FAIL))
    assert asked == ["restart"] * 3
    act(_round(Outcome.FAIL))  # a fourth failing round: three restarts did not fix it
    assert asked[-1] == "hold"
    act(_round(Outcome.FAIL))  # after a person starts it again, the count starts afresh
    assert asked[-1] == "restart"
    act(_round(Outcome.PASS))  # a passing round ends a streak
    act(_round(Outcome.FAIL))
    act(_round(Outcome.FAIL))
    act(_round(Outcome.FAIL))
    assert asked[-3:] == ["restart"] * 3


def test_the_hold_says_why() -> None:
    reasons: list[str] = []
    act = OnFail("restart", lambda action, why: reasons.append(why) or "ok", lambda: False, 1)
    act(_round(Outcome.FAIL))
    act(_round(Outcome.FAIL))
    assert "1 restarts in a row did not fix it" in reasons[-1]


def test_the_default_is_three_and_the_setting_is_bounded() -> None:
    assert CanarySettings().restarts_in_a_row == 3
    assert CanarySettings(restarts_in_a_row=1).restarts_in_a_row == 1
