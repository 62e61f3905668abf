"""What the start gate would refuse now, for the dashboard's buttons (``daemon.engine.gate_now``)."""

from __future__ import annotations

from daemon.engine.gate_now import KEEP_S, LINT_KEEP_S, GateNow, RecipeFacts
from recovery.decisions import Reason
from recovery.refusals import LastRefusal
from recovery.starts import StartAnswer


class Gate:
    """Recovery's start path as the switch asks it, answering what it is told to."""

    def __init__(self) -> None:
        self.refusals: tuple[Reason, ...] = ()
        self.asked = 0
        self.errors_seen: list[tuple[str, ...] | None] = []

    def start_refusals(
        self,
        recipe_cards: frozenset[int] | None = None,
        recipe_errors: tuple[str, ...] | None = None,
        held_elsewhere: tuple[Reason, ...] = (),
    ) -> tuple[Reason, ...]:
        self.asked += 1
        self.errors_seen.append(recipe_errors)
        return self.refusals


class Recipe:
    """The engine's side: the profile in force and its lint, counted (it reads the disk)."""

    def __init__(self) -> None:
        self.profile = "a"
        self.linted = 0

    def facts(self) -> RecipeFacts:
        self.linted += 1
        return self.profile, frozenset({0, 1}), (f"lint of {self.profile}",), ()

    def request_start(self, trigger: object, actor: str, restart: bool) -> StartAnswer:
        raise AssertionError("the gate's answer for the status never starts anything")

    def last_refusal(self) -> LastRefusal | None:
        return None


def test_the_answer_is_kept_a_second_then_asked_again() -> None:
    gate = Gate()
    now = [100.0]
    recipe = Recipe()
    kept = GateNow(gate, lambda: recipe.profile, recipe.facts, clock=lambda: now[0])
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


def test_the_lint_is_kept_longer_and_redone_when_the_profile_changes() -> None:
    """A status render must not read the model's disk each second (issue 28)."""
    gate, recipe, now = Gate(), Recipe(), [100.0]
    kept = GateNow(gate, lambda: recipe.profile, recipe.facts, clock=lambda: now[0])
    kept.blocked()
    now[0] += KEEP_S
    kept.blocked()
    assert (gate.asked, recipe.linted) == (2, 1)  # the gate asked again, the lint kept
    assert gate.errors_seen == [("lint of a",), ("lint of a",)]
    recipe.profile = "b"  # serve b: its own lint at once
    now[0] += KEEP_S
    kept.blocked()
    assert recipe.linted == 2 and gate.errors_seen[-1] == ("lint of b",)
    now[0] += LINT_KEEP_S
    kept.blocked()
    assert recipe.linted == 3
