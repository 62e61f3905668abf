"""What the start gate would refuse now, for the dashboard's buttons (``daemon.engine.gate_now``)."""

from __future__ import annotations

from daemon.engine.gate_now import KEEP_S, GateNow
from recovery.decisions import Reason
from recovery.refusals import LastRefusal
from recovery.starts import StartAnswer


class Gate:
    """Recovery's start path as the switch asks it, answering what it is told to."""

    def __init__(self) -> None:
        self.refusals: tuple[Reason, ...] = ()
        self.asked = 0

    def start_refusals(
        self,
        recipe_cards: frozenset[int] | None = None,
        recipe_errors: tuple[str, ...] | None = None,
    ) -> tuple[Reason, ...]:
        self.asked += 1
        return self.refusals

    def request_start(self, trigger: object, actor: str, restart: bool) -> StartAnswer:
        raise AssertionError("the gate's answer for the status never starts anything")

    def last_refusal(self) -> LastRefusal | None:
        return None


def test_the_answer_is_kept_a_second_then_asked_again() -> None:
    gate = Gate()
    now = [100.0]
    kept = GateNow(gate, clock=lambda: now[0])
    assert kept.blocked() == [] and gate.asked == 1
    gate.refusals = (Reason("critical_check", "bar1 (cards 0-3): BAR1 256 MiB", "boot it"),)
    assert kept.blocked() == [] and gate.asked == 1  # within KEEP_S: the kept answer
    now[0] += KEEP_S
    (refused,) = kept.blocked()
    assert refused == {
        "code": "critical_check",
        "message": "bar1 (cards 0-3): BAR1 256 MiB (what to do: boot it)",
        "blocking": True,
    }
